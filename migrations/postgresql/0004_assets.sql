-- PostgreSQL's dialect of 0004: BIGINT for INTEGER, and an explicit `rowid` (SQLite's implicit
-- one) on the tables whose queries break created_at_ms ties by registration order.
-- The media-asset graph, per-chat working memory and the target-resolution audit (SPEC §12).
CREATE TABLE media_assets (
    rowid BIGSERIAL,
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    chat_id TEXT,
    project_id TEXT,
    media_type TEXT NOT NULL,
    source_type TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'ready',
    original_url TEXT NOT NULL,
    preview_url TEXT,
    mime_type TEXT,
    width BIGINT,
    height BIGINT,
    display_name TEXT,
    prompt TEXT,
    model_id TEXT,
    source_message_id TEXT,
    source_node_id TEXT,
    root_asset_id TEXT NOT NULL,
    primary_parent_asset_id TEXT,
    summary TEXT NOT NULL DEFAULT '{}',
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);
CREATE INDEX media_assets_by_chat ON media_assets (user_id, chat_id, created_at_ms);
CREATE INDEX media_assets_by_root ON media_assets (user_id, root_asset_id);
CREATE INDEX media_assets_by_parent ON media_assets (user_id, primary_parent_asset_id);

CREATE TABLE media_asset_relations (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    from_asset_id TEXT NOT NULL REFERENCES media_assets (id),
    to_asset_id TEXT NOT NULL REFERENCES media_assets (id),
    relation_type TEXT NOT NULL,
    confidence BIGINT NOT NULL DEFAULT 100,
    -- Set on the rows written at registration (0 = the primary parent): these edges are the
    -- version chain that lineage walks; relations added later are annotations, not lineage.
    parent_position BIGINT,
    created_at_ms BIGINT NOT NULL,
    UNIQUE (from_asset_id, to_asset_id, relation_type)
);
CREATE INDEX media_asset_relations_from ON media_asset_relations (user_id, from_asset_id);
CREATE INDEX media_asset_relations_to ON media_asset_relations (user_id, to_asset_id);

CREATE TABLE conversation_working_state (
    user_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    current_focus_asset_id TEXT,
    selected_asset_ids TEXT NOT NULL DEFAULT '[]',
    last_uploaded_asset_ids TEXT NOT NULL DEFAULT '[]',
    last_generated_asset_ids TEXT NOT NULL DEFAULT '[]',
    last_referenced_asset_ids TEXT NOT NULL DEFAULT '[]',
    last_resolved_asset_ids TEXT NOT NULL DEFAULT '[]',
    active_canvas_node_ids TEXT NOT NULL DEFAULT '[]',
    last_canvas_snapshot TEXT,
    turn_count BIGINT NOT NULL DEFAULT 0,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (user_id, chat_id)
);

CREATE TABLE chat_turn_results (
    rowid BIGSERIAL,
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    asset_ids TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX chat_turn_results_by_chat ON chat_turn_results (user_id, chat_id, created_at_ms);

CREATE TABLE message_target_resolutions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    raw_text TEXT NOT NULL,
    uploaded_asset_ids TEXT NOT NULL,
    selected_asset_ids TEXT NOT NULL,
    candidate_asset_ids TEXT NOT NULL,
    resolved_asset_ids TEXT NOT NULL,
    resolution_mode TEXT NOT NULL,
    confidence BIGINT NOT NULL,
    needs_clarification BIGINT NOT NULL,
    reasoning TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX message_target_resolutions_by_chat
    ON message_target_resolutions (user_id, chat_id, created_at_ms);

CREATE TABLE conversation_summary_memory (
    user_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    summary TEXT NOT NULL DEFAULT '',
    message_count_at_summary BIGINT NOT NULL DEFAULT 0,
    updated_at_ms BIGINT NOT NULL,
    PRIMARY KEY (user_id, chat_id)
);
