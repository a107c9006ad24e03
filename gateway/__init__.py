"""memory-gateway: an attachment-aware, authenticating gateway in front of a memory engine."""

__version__ = "0.1.0"
