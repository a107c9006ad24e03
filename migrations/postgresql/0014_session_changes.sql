-- PostgreSQL's dialect of 0014: beside 0008's notification of the topic on `mgw_cache`, which
-- processes of earlier versions still act on, each change of a memory_sessions row notifies
-- channel `mgw_sessions` with the session's id, so every process learns which session each
-- move of its "sessions" generation was about (gateway/store/postgresql.py); processes of this
-- version take the topic's moves from it alone. An id too long for a payload is sent as the
-- empty string: which session is not known, and everything is dropped.
CREATE FUNCTION mgw_session_notify(session_id TEXT) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF octet_length(session_id) <= 4000 THEN
        PERFORM pg_notify('mgw_sessions', session_id);
    ELSE
        PERFORM pg_notify('mgw_sessions', '');
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

CREATE TRIGGER memory_sessions_changes AFTER INSERT OR UPDATE OR DELETE ON memory_sessions
    FOR EACH ROW EXECUTE FUNCTION mgw_session_changed();
