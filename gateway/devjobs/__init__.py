"""The built-in dev job runner: a development stand-in for a real job service, not a product.

Used when `jobs.base_url` is empty, so the tool-call flow works on a fresh machine.
"""
