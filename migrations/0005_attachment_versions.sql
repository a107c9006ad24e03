-- A per-session version of the attachment mappings, bumped by triggers on every change, so a
-- search can reuse the filename matchers it built for a session until its mappings change.
ALTER TABLE memory_sessions ADD COLUMN mappings_version INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER memory_attachments_version_insert AFTER INSERT ON memory_attachments BEGIN
    INSERT INTO memory_sessions (app_id, project_id, session_id, user_id, created_at,
                                 mappings_version)
    VALUES (NEW.app_id, NEW.project_id, NEW.session_id, NEW.user_id,
            CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER), 1)
    ON CONFLICT (app_id, project_id, session_id)
    DO UPDATE SET mappings_version = mappings_version + 1;
END;

CREATE TRIGGER memory_attachments_version_update AFTER UPDATE ON memory_attachments BEGIN
    UPDATE memory_sessions SET mappings_version = mappings_version + 1
    WHERE (app_id = OLD.app_id AND project_id = OLD.project_id AND session_id = OLD.session_id)
       OR (app_id = NEW.app_id AND project_id = NEW.project_id AND session_id = NEW.session_id);
END;

CREATE TRIGGER memory_attachments_version_delete AFTER DELETE ON memory_attachments BEGIN
    UPDATE memory_sessions SET mappings_version = mappings_version + 1
    WHERE app_id = OLD.app_id AND project_id = OLD.project_id AND session_id = OLD.session_id;
END;
