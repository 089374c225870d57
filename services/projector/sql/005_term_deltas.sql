-- The term index's counts change through append-only deltas (003_terms.sql kept
-- them row by row). The trigger appends rows to memory.term_deltas, and
-- memory.fold_term_counts() adds them into memory.term_counts once per batch (the
-- projector calls it before each commit). Updating the counts row by row rewrote a
-- common word's row once per item, and a transaction that updates one row N times
-- walks a chain of N versions. Readers add the deltas not folded yet (recall's
-- 007_bm25_deltas.sql), so the counts are right either way.
--
-- Idempotent: a database whose 003_terms.sql was the version of c4b21eb already has
-- these objects (see 003_terms.sql.accepts).

-- No index: the table only holds the batch in flight (folded before each commit).
CREATE TABLE IF NOT EXISTS memory.term_deltas (
    stream_id text NOT NULL,
    lexeme    text NOT NULL,
    docs      integer NOT NULL,
    length    bigint NOT NULL DEFAULT 0
);

CREATE OR REPLACE FUNCTION memory.count_terms(p_stream text, p_tsv tsvector, p_sign integer)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO memory.term_deltas (stream_id, lexeme, docs, length)
    SELECT p_stream, l, p_sign, CASE WHEN l = '' THEN p_sign * length(p_tsv) ELSE 0 END
    FROM unnest(array_prepend('', tsvector_to_array(p_tsv))) AS l
$$;

-- Add the pending deltas into the counts, one update per word. A word no active item
-- of the stream holds any more leaves no row behind: after a forget, not even its
-- lexeme stays in the database.
CREATE OR REPLACE FUNCTION memory.fold_term_counts() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    emptied_streams text[];
    emptied_words   text[];
BEGIN
    WITH folded AS (
        DELETE FROM memory.term_deltas RETURNING stream_id, lexeme, docs, length
    ), summed AS (
        SELECT stream_id, lexeme, sum(docs)::integer AS docs, sum(length) AS length
        FROM folded GROUP BY stream_id, lexeme
    ), added AS (
        INSERT INTO memory.term_counts AS c (stream_id, lexeme, docs, length)
        SELECT stream_id, lexeme, docs, length FROM summed ORDER BY stream_id, lexeme
        ON CONFLICT (stream_id, lexeme) DO UPDATE
            SET docs = c.docs + EXCLUDED.docs, length = c.length + EXCLUDED.length
        RETURNING c.stream_id, c.lexeme, c.docs
    )
    SELECT array_agg(stream_id), array_agg(lexeme) INTO emptied_streams, emptied_words
    FROM added WHERE docs <= 0;
    IF emptied_streams IS NOT NULL THEN
        DELETE FROM memory.term_counts c
        USING unnest(emptied_streams, emptied_words) AS e (stream_id, lexeme)
        WHERE c.stream_id = e.stream_id AND c.lexeme = e.lexeme AND c.docs <= 0;
    END IF;
END
$$;
