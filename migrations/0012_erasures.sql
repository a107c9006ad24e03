-- Erasures of a user's data (SPEC §17). A row is written before anything of the user is touched,
-- so an erasure interrupted at any point is found and finished (`users erase` again, or the next
-- start-up). The user's id is kept in clear only while the erasure runs, to find their rows;
-- once finished only its SHA-256 stays, to refuse (or let back) a credential naming it.
--   engine: what the engine answered ({"done": bool, "erased": bool, "remaining": [...]})
--   counts: rows and files removed so far, per kind (bumped in the transaction that removes them)
CREATE TABLE user_erasures (
    user_sha256 TEXT PRIMARY KEY,
    erasing_user_id TEXT,
    status TEXT NOT NULL CHECK (status IN ('erasing', 'erased')),
    admin_key_id TEXT NOT NULL,
    sessions TEXT NOT NULL DEFAULT '[]',
    engine TEXT NOT NULL DEFAULT '{}',
    counts TEXT NOT NULL DEFAULT '{}',
    started_at_ms INTEGER NOT NULL,
    finished_at_ms INTEGER
);
CREATE INDEX user_erasures_running ON user_erasures (status);

-- erased: a user's erasure started, finished or was started again (ErasedUsers' cache).
INSERT INTO cache_generations (topic, value) VALUES ('erased', 0);

CREATE TRIGGER user_erasures_generation_insert AFTER INSERT ON user_erasures BEGIN
    UPDATE cache_generations SET value = value + 1 WHERE topic = 'erased';
END;

CREATE TRIGGER user_erasures_generation_update AFTER UPDATE OF status ON user_erasures BEGIN
    UPDATE cache_generations SET value = value + 1 WHERE topic = 'erased';
END;

CREATE TRIGGER user_erasures_generation_delete AFTER DELETE ON user_erasures BEGIN
    UPDATE cache_generations SET value = value + 1 WHERE topic = 'erased';
END;
