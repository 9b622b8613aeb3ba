-- Fact search without a Python call per row: each fact keeps its key and value case-folded
-- (casefold() is registered on every connection, so this backfill and later inserts agree),
-- and current facts have a covering index to scan instead of the table.
ALTER TABLE knowledge ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
UPDATE knowledge SET search_text = casefold(key) || char(31) || casefold(value);
CREATE INDEX knowledge_search ON knowledge (search_text, key, value, created_at)
    WHERE superseded_at IS NULL;
