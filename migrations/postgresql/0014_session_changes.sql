-- PostgreSQL's dialect of 0014: each change of a memory_sessions row notifies `mgw_cache` with
-- "sessions:" and the session's id (0008 sent the topic alone), so every process learns which
-- session each move of its "sessions" generation was about (gateway/store/postgresql.py). An id
-- too long for a notification's payload is sent as the topic alone: everything is dropped.
CREATE FUNCTION mgw_session_notify(session_id TEXT) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF octet_length(session_id) <= 4000 THEN
        PERFORM pg_notify('mgw_cache', 'sessions:' || session_id);
    ELSE
        PERFORM pg_notify('mgw_cache', 'sessions');
    END IF;
END;
$$;

CREATE FUNCTION mgw_session_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM mgw_session_notify(OLD.session_id);
    ELSE
        PERFORM mgw_session_notify(NEW.session_id);
        IF TG_OP = 'UPDATE' THEN
            IF OLD.session_id IS DISTINCT FROM NEW.session_id THEN
                PERFORM mgw_session_notify(OLD.session_id);
            END IF;
        END IF;
    END IF;
    RETURN NULL;
END;
$$;

DROP TRIGGER memory_sessions_generation ON memory_sessions;
CREATE TRIGGER memory_sessions_generation AFTER INSERT OR UPDATE OR DELETE ON memory_sessions
    FOR EACH ROW EXECUTE FUNCTION mgw_session_changed();
