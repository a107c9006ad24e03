-- Credentials of the product's users (SPEC §3, §17): every key has a kind, scopes, a name, an
-- optional expiry and a last-used time; service keys name the user ids they may act for.
-- The admin audit log keeps every admin action.
ALTER TABLE api_keys ADD COLUMN kind TEXT NOT NULL DEFAULT 'user';
ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT 'read,write';
ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN expires_at_ms INTEGER;
ALTER TABLE api_keys ADD COLUMN last_used_at_ms INTEGER;
ALTER TABLE api_keys ADD COLUMN users_glob TEXT NOT NULL DEFAULT '';
CREATE INDEX api_keys_user_created ON api_keys (user_id, created_at_ms, id);

-- A key's last-used time moves without invalidating anyone's cache: only a change that can
-- take a key's rights away (revoked, expiry, scopes, kind, users) bumps the generation.
DROP TRIGGER api_keys_generation_update;
CREATE TRIGGER api_keys_generation_update
AFTER UPDATE OF revoked_at_ms, expires_at_ms, scopes, kind, users_glob, user_id, secret_sha256
ON api_keys BEGIN
    UPDATE cache_generations SET value = value + 1 WHERE topic = 'keys';
END;

CREATE TABLE admin_audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms INTEGER NOT NULL,
    admin_key_id TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL
);
