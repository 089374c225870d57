-- A proposal may change a teammate's memory's kind and tags (seed 004's category and tags):
-- its new kind, and its new tags in plain like every read model's words (NULL once the
-- memory is forgotten, as its text).
ALTER TABLE memory.proposals ADD COLUMN kind text, ADD COLUMN tags text[];
