"""Attachments: what an add body carries, streamed uploads, the file store, and the
intents that make an upstream call and its mappings commit together (recovery included)."""
