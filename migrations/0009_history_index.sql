-- The history page (SPEC §14) reads one index on both dialects, whatever the planner's
-- statistics say. Its query names the user and the conversation and walks by
-- (created_at_ms, id): conversation_messages_page (conversation_id, ...) serves the walk but not
-- the user, conversation_messages_client_id (user_id, conversation_id, ...) both equalities but
-- not the order, and PostgreSQL without fresh statistics (a bulk import, a fast-growing
-- conversation before autovacuum analyzes it) picks the latter and sorts the whole
-- conversation: ~50 ms a page at 100,000 messages (docs/decisions.md). This index serves both.
CREATE INDEX conversation_messages_history
    ON conversation_messages (user_id, conversation_id, created_at_ms, id);
