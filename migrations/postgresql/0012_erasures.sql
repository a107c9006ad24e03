-- PostgreSQL's dialect of 0012 (see there): the erased topic is notified on mgw_cache.
CREATE TABLE user_erasures (
    user_sha256 TEXT PRIMARY KEY,
    erasing_user_id TEXT,
    status TEXT NOT NULL CHECK (status IN ('erasing', 'erased')),
    admin_key_id TEXT NOT NULL,
    sessions TEXT NOT NULL DEFAULT '[]',
    engine TEXT NOT NULL DEFAULT '{}',
    counts TEXT NOT NULL DEFAULT '{}',
    started_at_ms BIGINT NOT NULL,
    finished_at_ms BIGINT
);
CREATE INDEX user_erasures_running ON user_erasures (status);

CREATE TRIGGER user_erasures_generation_insert AFTER INSERT OR DELETE ON user_erasures
    FOR EACH ROW EXECUTE FUNCTION mgw_cache_notify('erased');
CREATE TRIGGER user_erasures_generation_update AFTER UPDATE OF status ON user_erasures
    FOR EACH ROW EXECUTE FUNCTION mgw_cache_notify('erased');
