-- API keys: only a SHA-256 hash of the secret is stored.
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    revoked_at_ms INTEGER
);
CREATE INDEX api_keys_user ON api_keys (user_id);
