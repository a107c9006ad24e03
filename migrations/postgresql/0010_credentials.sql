-- PostgreSQL's dialect of 0010 (see there).
ALTER TABLE api_keys ADD COLUMN kind TEXT NOT NULL DEFAULT 'user';
ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT 'read,write';
ALTER TABLE api_keys ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN expires_at_ms BIGINT;
ALTER TABLE api_keys ADD COLUMN last_used_at_ms BIGINT;
ALTER TABLE api_keys ADD COLUMN users_glob TEXT NOT NULL DEFAULT '';
CREATE INDEX api_keys_user_created ON api_keys (user_id, created_at_ms, id);

DROP TRIGGER api_keys_generation ON api_keys;
CREATE TRIGGER api_keys_generation_update
AFTER UPDATE OF revoked_at_ms, expires_at_ms, scopes, kind, users_glob, user_id, secret_sha256
ON api_keys FOR EACH ROW EXECUTE FUNCTION mgw_cache_notify('keys');
CREATE TRIGGER api_keys_generation_delete AFTER DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION mgw_cache_notify('keys');

CREATE TABLE admin_audit (
    seq BIGSERIAL PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    admin_key_id TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL
);
