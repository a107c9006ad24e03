-- Which sessions changed (SPEC §15): the "sessions" cache generation is now the number of the
-- last row of this log, one row per change of a memory_sessions row (claimed, deleted, its
-- attachment mappings changed), naming the session. A process that sees the generation move
-- reads the rows after the last one it saw, and keeps what it knows of every other session
-- (gateway/search/index.py): another user's new session no longer drops the lookups of a
-- search. The last LOG_ROWS (4096) rows are kept; a process further behind drops everything.
CREATE TABLE session_changes (
    seq INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL
);
-- numbered on from the counter's value, so no generation number names two states
INSERT INTO session_changes (seq, session_id)
    SELECT value, '' FROM cache_generations WHERE topic = 'sessions';

DROP TRIGGER memory_sessions_generation_insert;
DROP TRIGGER memory_sessions_generation_update;
DROP TRIGGER memory_sessions_generation_delete;

-- each change is a row; the row moves the counter and drops the rows past the last 4096
CREATE TRIGGER session_changes_generation AFTER INSERT ON session_changes BEGIN
    UPDATE cache_generations SET value = NEW.seq WHERE topic = 'sessions';
    DELETE FROM session_changes WHERE seq <= NEW.seq - 4096;
END;

CREATE TRIGGER memory_sessions_changes_insert AFTER INSERT ON memory_sessions BEGIN
    INSERT INTO session_changes (session_id) VALUES (NEW.session_id);
END;

CREATE TRIGGER memory_sessions_changes_update AFTER UPDATE ON memory_sessions BEGIN
    INSERT INTO session_changes (session_id) VALUES (NEW.session_id);
    INSERT INTO session_changes (session_id)
        SELECT OLD.session_id WHERE OLD.session_id IS NOT NEW.session_id;
END;

CREATE TRIGGER memory_sessions_changes_delete AFTER DELETE ON memory_sessions BEGIN
    INSERT INTO session_changes (session_id) VALUES (OLD.session_id);
END;
