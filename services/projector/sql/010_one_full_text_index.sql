-- Two indexes every new item paid for and nothing needs:
--   * memory.items_tsv, the GIN index on the item's words. recall.full_text (the
--     ts_rank_cd ranking) finds a rare word's items through the term index, which holds
--     the same words of the same active items, and checks every visible item for a
--     common one (recall's 009_full_text_by_terms.sql).
--     On one connection, a batch of 256 new items: Postgres's CPU 227-246 us an item
--     without it against 268-326 with it (alternating, three each).
--   * the unique index on memory.audit.event_id. The (stream_id, seq) key is the guard
--     (an event seen twice, or another event at a taken seq, meets it first), and
--     nothing looks an event up by its id.
DROP INDEX IF EXISTS memory.items_tsv;
ALTER TABLE memory.audit DROP CONSTRAINT IF EXISTS audit_event_id_key;
