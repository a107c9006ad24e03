-- PostgreSQL's dialect of 0008: instead of a counter table read by every process, each change
-- of a cached row notifies channel `mgw_cache` with its topic; every gateway process LISTENs on
-- it and moves its own generation of that topic (gateway/store/postgresql.py). Row triggers,
-- not statement triggers: an INSERT … ON CONFLICT DO NOTHING that changes no row notifies
-- nobody. PostgreSQL folds identical notifications of one transaction into one.
--   keys:     an API key revoked or deleted (a new key invalidates nothing)
--   sessions: a session claimed, deleted, or its attachment mappings changed
CREATE FUNCTION mgw_cache_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('mgw_cache', TG_ARGV[0]);
    RETURN NULL;
END;
$$;

CREATE TRIGGER api_keys_generation AFTER UPDATE OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION mgw_cache_notify('keys');

CREATE TRIGGER memory_sessions_generation AFTER INSERT OR UPDATE OR DELETE ON memory_sessions
    FOR EACH ROW EXECUTE FUNCTION mgw_cache_notify('sessions');
