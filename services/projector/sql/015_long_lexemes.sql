-- A word over 255 bytes is no posting of the term index (a code review: a long lexeme
-- beside a long stream id could pass Postgres's btree row limit, 2,704 bytes, and stop
-- the projector on an event the writer had accepted). Nobody searches by such a word;
-- the memory's text keeps it. Postings and counts skip the same words both ways, so
-- the counts stay whole.
CREATE OR REPLACE FUNCTION memory.post_terms(p_items text[], p_streams text[], p_tsvs tsvector[],
                                             p_sign integer, p_direct boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_items IS NULL THEN
        RETURN;
    END IF;
    IF p_sign < 0 THEN
        DELETE FROM memory.terms WHERE item_id = ANY (p_items);
    ELSE
        INSERT INTO memory.terms (stream_id, lexeme, item_id, tf, dl, impact)
        SELECT r.stream_id, u.lexeme, r.item_id, coalesce(cardinality(u.positions), 1),
               length(r.tsv),
               memory.bm25_weight(coalesce(cardinality(u.positions), 1), length(r.tsv), 16)
        FROM unnest(p_items, p_streams, p_tsvs) AS r(item_id, stream_id, tsv),
             unnest(r.tsv) AS u
        WHERE octet_length(u.lexeme) <= 255;
    END IF;
    IF p_direct THEN
        INSERT INTO memory.term_counts AS c (stream_id, lexeme, docs, length)
        SELECT r.stream_id, l, p_sign * count(*),
               p_sign * sum(CASE WHEN l = '' THEN length(r.tsv) ELSE 0 END)
        FROM unnest(p_streams, p_tsvs) AS r(stream_id, tsv),
             unnest(array_prepend('', tsvector_to_array(r.tsv))) AS l
        WHERE octet_length(l) <= 255
        GROUP BY r.stream_id, l
        ORDER BY r.stream_id, l
        ON CONFLICT (stream_id, lexeme) DO UPDATE
            SET docs = c.docs + EXCLUDED.docs, length = c.length + EXCLUDED.length;
    ELSE
        INSERT INTO memory.term_deltas (stream_id, lexeme, docs, length)
        SELECT r.stream_id, l, p_sign, CASE WHEN l = '' THEN p_sign * length(r.tsv) ELSE 0 END
        FROM unnest(p_streams, p_tsvs) AS r(stream_id, tsv),
             unnest(array_prepend('', tsvector_to_array(r.tsv))) AS l
        WHERE octet_length(l) <= 255;
    END IF;
END
$$;
