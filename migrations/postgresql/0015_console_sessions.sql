-- PostgreSQL's dialect of 0015 (see there): the same table, with times as BIGINT.
CREATE TABLE console_sessions (
    token_sha256 TEXT PRIMARY KEY,
    admin_key_id TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at_ms);
