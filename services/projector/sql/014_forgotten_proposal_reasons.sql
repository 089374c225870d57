-- A forgotten memory's proposals lose their reasons too (the proposer's and the
-- reviewer's words about the memory): the column may now be NULL.
ALTER TABLE memory.proposals ALTER COLUMN reason DROP NOT NULL;
