-- Operator console sessions (SPEC §20): one row per signed-in browser, shared by every process.
-- Only the SHA-256 of the session's token is kept; the admin key it signed in with is read again
-- on every page, so revoking that key ends its sessions.
CREATE TABLE console_sessions (
    token_sha256 TEXT PRIMARY KEY,
    admin_key_id TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at_ms);
