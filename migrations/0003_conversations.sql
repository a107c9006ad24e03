-- Application memory beside the proxy (SPEC §10–§11): agents, conversations and their messages,
-- long-term agent memories, user preference facts and the observations behind them.
-- Every row carries user_id; every query filters by it.

CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    profile TEXT NOT NULL DEFAULT '{}',
    opening_message TEXT,
    -- Sort key of the agent list: the last message in any of its conversations, else creation.
    activity_at_ms INTEGER NOT NULL,
    last_message_at_ms INTEGER,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    deleted_at_ms INTEGER
);
CREATE INDEX agents_by_activity ON agents (user_id, deleted_at_ms, activity_at_ms, id);

CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL REFERENCES agents (id),
    is_default INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1)),
    title TEXT NOT NULL,
    -- 1 once the title came from the first user message (or was given at creation).
    title_fixed INTEGER NOT NULL DEFAULT 0 CHECK (title_fixed IN (0, 1)),
    summary TEXT,
    summary_message_count INTEGER NOT NULL DEFAULT 0,
    summary_updated_at_ms INTEGER,
    message_count INTEGER NOT NULL DEFAULT 0,
    last_message_at_ms INTEGER,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    deleted_at_ms INTEGER
);
-- The default conversation: one live one per (user, agent); a deleted one may be replaced.
CREATE UNIQUE INDEX conversations_default ON conversations (user_id, agent_id)
    WHERE is_default = 1 AND deleted_at_ms IS NULL;
CREATE INDEX conversations_by_agent
    ON conversations (user_id, agent_id, deleted_at_ms, updated_at_ms, id);

CREATE TABLE conversation_messages (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    agent_id TEXT NOT NULL,
    client_message_id TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
    content TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('completed', 'failed')),
    attachments TEXT NOT NULL DEFAULT '[]',
    metadata TEXT NOT NULL DEFAULT '{}',
    -- SHA-256 of the request's content and attachments: a retry must match it (idempotency).
    fingerprint TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL
);
-- History pages walk this index backwards from a (created_at_ms, id) cursor.
CREATE INDEX conversation_messages_page
    ON conversation_messages (conversation_id, created_at_ms, id);
CREATE UNIQUE INDEX conversation_messages_client_id
    ON conversation_messages (user_id, conversation_id, client_message_id);

CREATE TABLE agent_memories (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL REFERENCES agents (id),
    type TEXT NOT NULL,
    content TEXT NOT NULL,
    importance INTEGER NOT NULL CHECK (importance BETWEEN 1 AND 5),
    status TEXT NOT NULL CHECK (status IN ('active', 'disabled', 'deleted')),
    source_message_id TEXT,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
CREATE INDEX agent_memories_by_agent ON agent_memories (user_id, agent_id, created_at_ms, id);
CREATE INDEX agent_memories_for_prompt
    ON agent_memories (user_id, agent_id, status, importance, updated_at_ms, id);

CREATE TABLE memory_facts (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    fact_type TEXT NOT NULL,
    fact_key TEXT NOT NULL,
    value TEXT NOT NULL,
    confidence INTEGER NOT NULL CHECK (confidence BETWEEN 0 AND 100),
    source_type TEXT NOT NULL CHECK (source_type IN ('inferred', 'manual', 'imported')),
    source_conversation_id TEXT,
    source_message_id TEXT,
    pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
    -- 1 when an observation of the current value was explicit ("from now on ...").
    explicit INTEGER NOT NULL DEFAULT 0 CHECK (explicit IN (0, 1)),
    -- Observations of the current value; an inferred fact is active from 3.
    observations INTEGER NOT NULL DEFAULT 1,
    expires_at_ms INTEGER,
    last_confirmed_at_ms INTEGER,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    deleted_at_ms INTEGER
);
CREATE UNIQUE INDEX memory_facts_by_key ON memory_facts (user_id, scope, fact_type, fact_key)
    WHERE deleted_at_ms IS NULL;
CREATE INDEX memory_facts_by_user ON memory_facts (user_id, deleted_at_ms, created_at_ms, id);

-- Every observation behind a fact, kept for audit and to count one source message only once.
CREATE TABLE memory_fact_observations (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    fact_id TEXT NOT NULL REFERENCES memory_facts (id),
    value TEXT NOT NULL,
    source_type TEXT NOT NULL,
    explicit INTEGER NOT NULL,
    text TEXT,
    source_conversation_id TEXT,
    source_message_id TEXT,
    counted INTEGER NOT NULL,
    created_at_ms INTEGER NOT NULL
);
CREATE INDEX memory_fact_observations_by_fact
    ON memory_fact_observations (user_id, fact_id, source_message_id);
