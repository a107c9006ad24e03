-- PostgreSQL's dialect of 0011 (see there).
CREATE TABLE uploaded_objects (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    object_key TEXT NOT NULL,
    file_id TEXT NOT NULL,
    file_name TEXT NOT NULL,
    file_type TEXT NOT NULL,
    content_type TEXT NOT NULL,
    max_size BIGINT NOT NULL,
    internal_uri TEXT NOT NULL,
    token_sha256 TEXT,
    state TEXT NOT NULL DEFAULT 'signed',
    size BIGINT,
    sha256 TEXT,
    engine_key TEXT,
    signed_at_ms BIGINT NOT NULL,
    upload_expires_at_ms BIGINT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    uploaded_at_ms BIGINT
);
CREATE UNIQUE INDEX uploaded_objects_key ON uploaded_objects (user_id, object_key);
CREATE UNIQUE INDEX uploaded_objects_token ON uploaded_objects (token_sha256);
CREATE INDEX uploaded_objects_expiry ON uploaded_objects (expires_at_ms);
