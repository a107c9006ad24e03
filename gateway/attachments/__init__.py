"""Attachments: what an add body carries, streamed uploads, the file store (local disk or S3),
links to stored files for callers and engines elsewhere, and the intents that make an upstream
call and its mappings commit together (recovery included)."""
