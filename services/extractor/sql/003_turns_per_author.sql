-- A turn id is its caller's (per run or per member), so the same id from another
-- member, agent or session of the org is another turn: a turn is handled per stream
-- (the org and the scope its token resolves it to) and author (the token's member,
-- agent and session), no longer per org.
--
-- Rows from before name neither. They stay, as "some turn of this id in this org was
-- handled": the extractor still counts them as handled for any of the org's turns of
-- that id, so a replay or re-drive of an old turn spends no AI request and proposes
-- nothing twice; every new row names its stream and author.
ALTER TABLE extractor.turns
    ADD COLUMN stream_id text,
    ADD COLUMN author text,
    ADD CONSTRAINT turns_stream_and_author CHECK ((stream_id IS NULL) = (author IS NULL));
ALTER TABLE extractor.turns DROP CONSTRAINT turns_pkey;
CREATE UNIQUE INDEX turns_handled ON extractor.turns (org, turn_id, stream_id, author)
    NULLS NOT DISTINCT;

-- Source ids are the caller's too (message ids may be per member), so a forgotten
-- item's sources suppress extraction in its own stream only. A NULL stream suppresses
-- org-wide: the rows recorded before (their stream is unknown, so forgetting stays as
-- safe as it was) and each forgotten item's own id (a uuid, and a run may recall it
-- into a turn that proposes into another of the caller's scopes).
ALTER TABLE extractor.sources ADD COLUMN stream_id text;
