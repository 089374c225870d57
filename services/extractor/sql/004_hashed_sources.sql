-- A memory's sources are sealed in engram.events now, with keyed hashes beside them
-- (MemoryRemembered.source_hashes): this table keeps those hashes, not the ids, so a
-- forgotten memory's source ids are kept nowhere in plain. `hashed` tells the rows of
-- before apart; the extractor hashes them when it starts (adapters/sources.py). A
-- forgotten item's own id (source_id = item_id) stays as it is: an id Engram made, no
-- person's words.
ALTER TABLE extractor.sources ADD COLUMN hashed boolean NOT NULL DEFAULT false;
