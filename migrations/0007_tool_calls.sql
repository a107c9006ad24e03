-- Tool calls that wait for the user's confirmation (SPEC §16), the dev job runner's jobs, and
-- the image ids (`sha256:` of an asset's originalUrl) that tool arguments name assets by.
-- Plain SQL: the table rebuild below is how both SQLite and PostgreSQL widen a CHECK.

-- Messages gain the role "tool" (a proposed tool call; its state lives in tool_calls).
CREATE TABLE conversation_messages_0007 (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    agent_id TEXT NOT NULL,
    client_message_id TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    content TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('completed', 'failed')),
    attachments TEXT NOT NULL DEFAULT '[]',
    metadata TEXT NOT NULL DEFAULT '{}',
    fingerprint TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
INSERT INTO conversation_messages_0007 (id, user_id, conversation_id, agent_id,
    client_message_id, role, content, status, attachments, metadata, fingerprint, created_at_ms)
SELECT id, user_id, conversation_id, agent_id, client_message_id, role, content, status,
    attachments, metadata, fingerprint, created_at_ms
FROM conversation_messages;
DROP TABLE conversation_messages;
ALTER TABLE conversation_messages_0007 RENAME TO conversation_messages;
CREATE INDEX conversation_messages_page
    ON conversation_messages (conversation_id, created_at_ms, id);
CREATE UNIQUE INDEX conversation_messages_client_id
    ON conversation_messages (user_id, conversation_id, client_message_id);

-- One row per tool message. status: not_completed | completed | failed | cancelled; a
-- not_completed call is proposed (confirmed_at_ms NULL), confirming (no job id yet) or running.
CREATE TABLE tool_calls (
    message_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    job_kind TEXT NOT NULL,
    args TEXT NOT NULL,
    display_args TEXT NOT NULL,
    -- The input images as shown at proposal: [{imageId, assetId, url, mimeType, width, height}].
    input_images TEXT NOT NULL DEFAULT '[]',
    status TEXT NOT NULL
        CHECK (status IN ('not_completed', 'completed', 'failed', 'cancelled')),
    dedupe_key TEXT NOT NULL UNIQUE,
    external_job_id TEXT,
    confirmed_at_ms BIGINT,
    result TEXT,
    error TEXT,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);
-- Reads find the calls waiting on a job without scanning the conversation's history.
CREATE INDEX tool_calls_waiting ON tool_calls (user_id, conversation_id, status, external_job_id);

-- The built-in dev job runner (used when jobs.base_url is empty): one row per submitted job,
-- unique per idempotency key, so retried submissions get the same job across restarts.
CREATE TABLE dev_jobs (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    result TEXT,
    error TEXT,
    created_at_ms BIGINT NOT NULL,
    finished_at_ms BIGINT,
    UNIQUE (user_id, idempotency_key)
);

-- `sha256:<hex>` image ids are looked up by the hex of SHA-256 of original_url; rows registered
-- before this column are filled in on first lookup (gateway/store/assets.py).
ALTER TABLE media_assets ADD COLUMN original_url_sha256 TEXT;
CREATE INDEX media_assets_by_url_sha256 ON media_assets (user_id, original_url_sha256);
