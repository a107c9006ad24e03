-- PostgreSQL's dialect of 0013: UNLOGGED, since a bucket is worth nothing after a crash (the
-- server empties the table on recovery and every bucket starts full) and skipping the WAL
-- keeps the one statement per request cheap.
CREATE UNLOGGED TABLE rate_buckets (
    bucket TEXT PRIMARY KEY,
    tokens DOUBLE PRECISION NOT NULL,
    stamp DOUBLE PRECISION NOT NULL,
    granted INTEGER NOT NULL  -- tokens the last draw took
);
