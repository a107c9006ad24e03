-- Files uploaded through /resources, kept on the gateway's own storage.
CREATE TABLE resources (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    safe_name TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    app_id TEXT NOT NULL DEFAULT 'default',
    project_id TEXT NOT NULL DEFAULT 'default',
    session_id TEXT NOT NULL,
    internal_uri TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL,
    deleted_at INTEGER
);
CREATE INDEX resources_by_user ON resources (user_id, deleted_at, created_at, id);
CREATE INDEX resources_by_content ON resources (user_id, sha256, name);

-- Which attachment belongs to which session of which user (SPEC §8).
CREATE TABLE memory_attachments (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    app_id TEXT NOT NULL DEFAULT 'default',
    project_id TEXT NOT NULL DEFAULT 'default',
    session_id TEXT NOT NULL,
    resource_id TEXT,
    content_type TEXT NOT NULL,
    name TEXT NOT NULL,
    internal_uri TEXT NOT NULL,
    source TEXT NOT NULL,
    sha256 TEXT,
    created_at INTEGER NOT NULL,
    deleted_at INTEGER,
    UNIQUE (user_id, session_id, internal_uri)
);
CREATE INDEX memory_attachments_by_session ON memory_attachments (user_id, session_id, deleted_at);

-- Session ownership: the first user to add to (app_id, project_id, session_id) owns it.
CREATE TABLE memory_sessions (
    app_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (app_id, project_id, session_id)
);
CREATE INDEX memory_sessions_by_session ON memory_sessions (session_id, user_id);

-- Work recorded before an upstream call (files written, rows to make), settled at start-up.
CREATE TABLE pending_intents (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
