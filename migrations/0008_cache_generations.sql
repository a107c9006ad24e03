-- Cache generations (SPEC §15): a counter per topic of rows that processes keep in memory,
-- bumped by triggers whenever such a row changes, so every process (any number of them on this
-- file) drops what it kept as soon as it sees the counter move.
--   keys:     an API key revoked or deleted (a new key invalidates nothing)
--   sessions: a session claimed, deleted, or its attachment mappings changed (the triggers of
--             0005 update memory_sessions.mappings_version, which fires these)
CREATE TABLE cache_generations (
    topic TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO cache_generations (topic, value) VALUES ('keys', 0), ('sessions', 0);

CREATE TRIGGER api_keys_generation_update AFTER UPDATE ON api_keys BEGIN
    UPDATE cache_generations SET value = value + 1 WHERE topic = 'keys';
END;

CREATE TRIGGER api_keys_generation_delete AFTER DELETE ON api_keys BEGIN
    UPDATE cache_generations SET value = value + 1 WHERE topic = 'keys';
END;

CREATE TRIGGER memory_sessions_generation_insert AFTER INSERT ON memory_sessions BEGIN
    UPDATE cache_generations SET value = value + 1 WHERE topic = 'sessions';
END;

CREATE TRIGGER memory_sessions_generation_update AFTER UPDATE ON memory_sessions BEGIN
    UPDATE cache_generations SET value = value + 1 WHERE topic = 'sessions';
END;

CREATE TRIGGER memory_sessions_generation_delete AFTER DELETE ON memory_sessions BEGIN
    UPDATE cache_generations SET value = value + 1 WHERE topic = 'sessions';
END;
