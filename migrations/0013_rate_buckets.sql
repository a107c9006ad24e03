-- Rate-limit buckets shared across processes (gateway/store/rate_buckets.py): one row per
-- credential and route class. Used on PostgreSQL; on SQLite each process keeps its buckets in
-- memory (docs/limits.md) and this table stays empty.
CREATE TABLE rate_buckets (
    bucket TEXT PRIMARY KEY,
    tokens DOUBLE PRECISION NOT NULL,
    stamp DOUBLE PRECISION NOT NULL,
    granted INTEGER NOT NULL  -- tokens the last draw took
);
