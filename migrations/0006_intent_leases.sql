-- Intents carry the process that recorded them and a lease it renews while alive: recovery
-- settles only intents whose owner is gone (SPEC §15). Rows from before this migration have no
-- owner and an expired lease, so the next recovery settles them as before.
ALTER TABLE pending_intents ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE pending_intents ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
CREATE INDEX pending_intents_by_owner ON pending_intents (owner);
