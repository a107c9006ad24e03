-- PostgreSQL's dialect of 0005: the same per-session mappings_version, bumped by one trigger
-- function on every change of memory_attachments.
ALTER TABLE memory_sessions ADD COLUMN mappings_version BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION memory_attachments_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_sessions (app_id, project_id, session_id, user_id, created_at,
                                     mappings_version)
        VALUES (NEW.app_id, NEW.project_id, NEW.session_id, NEW.user_id,
                (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT, 1)
        ON CONFLICT (app_id, project_id, session_id)
        DO UPDATE SET mappings_version = memory_sessions.mappings_version + 1;
        RETURN NEW;
    ELSIF TG_OP = 'UPDATE' THEN
        UPDATE memory_sessions SET mappings_version = mappings_version + 1
        WHERE (app_id = OLD.app_id AND project_id = OLD.project_id
               AND session_id = OLD.session_id)
           OR (app_id = NEW.app_id AND project_id = NEW.project_id
               AND session_id = NEW.session_id);
        RETURN NEW;
    END IF;
    UPDATE memory_sessions SET mappings_version = mappings_version + 1
    WHERE app_id = OLD.app_id AND project_id = OLD.project_id AND session_id = OLD.session_id;
    RETURN OLD;
END;
$$;

CREATE TRIGGER memory_attachments_version AFTER INSERT OR UPDATE OR DELETE ON memory_attachments
    FOR EACH ROW EXECUTE FUNCTION memory_attachments_version();
