"""Fair share (SPEC §13): token buckets per credential and route class, and a cap on each
user's concurrent engine calls; over either, 429 `rate_limited` (docs/limits.md)."""
