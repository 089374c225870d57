-- BM25 ranking for full-text recall without ranking every match.
--
-- memory.terms holds one posting per (active item, lexeme of its text): the term
-- frequency, the item's length in lexemes and an impact (the BM25 term weight at a
-- fixed average length) that orders each stream's postings, so a query reads only
-- the strongest postings of each of its words instead of every item that contains
-- a common one. memory.term_counts holds each stream's document frequencies, and
-- under the lexeme '' its number of active items and their total length: the IDF
-- and average length of BM25, read with a few index probes.
--
-- Both are kept by a trigger on memory.items, in the transaction that changes the
-- item: a forget, disable or archive removes the item's postings at once.
CREATE TABLE memory.terms (
    stream_id text NOT NULL,
    lexeme    text NOT NULL,
    item_id   text NOT NULL,
    tf        integer NOT NULL,
    dl        integer NOT NULL,
    impact    real NOT NULL
);
CREATE INDEX terms_impact ON memory.terms (stream_id, lexeme, impact DESC)
    INCLUDE (item_id, tf, dl);
CREATE UNIQUE INDEX terms_item ON memory.terms (item_id, lexeme) INCLUDE (tf, dl);

CREATE TABLE memory.term_counts (
    stream_id text NOT NULL,
    lexeme    text NOT NULL,            -- '': the stream's active items
    docs      integer NOT NULL,
    length    bigint NOT NULL DEFAULT 0, -- '' only: their total length in lexemes
    PRIMARY KEY (stream_id, lexeme)
);

-- k1 = 1.2, b = 0.75; the impact assumes an average length of 16 lexemes.
CREATE FUNCTION memory.bm25_weight(tf integer, dl integer, avgdl double precision)
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT tf * 2.2::float8 / (tf + 1.2::float8 * (0.25::float8 + 0.75::float8 * dl
                                                      / greatest(avgdl, 1.0::float8)))
$$;

-- A word no active item of the stream holds any more leaves no row behind: after a
-- forget, not even its lexeme stays in the database.
CREATE FUNCTION memory.count_terms(p_stream text, p_tsv tsvector, p_sign integer)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO memory.term_counts AS c (stream_id, lexeme, docs, length)
    SELECT p_stream, l, p_sign, CASE WHEN l = '' THEN p_sign * length(p_tsv) ELSE 0 END
    FROM unnest(array_prepend('', tsvector_to_array(p_tsv))) AS l
    ON CONFLICT (stream_id, lexeme) DO UPDATE
        SET docs = c.docs + EXCLUDED.docs, length = c.length + EXCLUDED.length;
    DELETE FROM memory.term_counts c
    WHERE p_sign < 0 AND c.stream_id = p_stream AND c.docs <= 0
      AND c.lexeme = ANY (array_prepend('', tsvector_to_array(p_tsv)));
$$;

CREATE FUNCTION memory.index_terms() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    was boolean := TG_OP <> 'INSERT' AND OLD.status = 'active';
    now_active boolean := TG_OP <> 'DELETE' AND NEW.status = 'active';
BEGIN
    IF TG_OP = 'UPDATE' AND was = now_active AND OLD.tsv = NEW.tsv
       AND OLD.stream_id = NEW.stream_id THEN
        RETURN NULL;
    END IF;
    IF was THEN
        DELETE FROM memory.terms WHERE item_id = OLD.item_id;
        PERFORM memory.count_terms(OLD.stream_id, OLD.tsv, -1);
    END IF;
    IF now_active THEN
        INSERT INTO memory.terms (stream_id, lexeme, item_id, tf, dl, impact)
        SELECT NEW.stream_id, u.lexeme, NEW.item_id, coalesce(cardinality(u.positions), 1),
               length(NEW.tsv),
               memory.bm25_weight(coalesce(cardinality(u.positions), 1), length(NEW.tsv), 16)
        FROM unnest(NEW.tsv) AS u;
        PERFORM memory.count_terms(NEW.stream_id, NEW.tsv, 1);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER items_terms
    AFTER INSERT OR DELETE OR UPDATE OF status, title, key, content, stream_id
    ON memory.items FOR EACH ROW EXECUTE FUNCTION memory.index_terms();

-- Items that exist already.
INSERT INTO memory.terms (stream_id, lexeme, item_id, tf, dl, impact)
SELECT i.stream_id, u.lexeme, i.item_id, coalesce(cardinality(u.positions), 1), length(i.tsv),
       memory.bm25_weight(coalesce(cardinality(u.positions), 1), length(i.tsv), 16)
FROM memory.items i, unnest(i.tsv) AS u
WHERE i.status = 'active';

INSERT INTO memory.term_counts (stream_id, lexeme, docs, length)
SELECT i.stream_id, l, count(*), CASE WHEN l = '' THEN sum(length(i.tsv)) ELSE 0 END
FROM memory.items i, unnest(array_prepend('', tsvector_to_array(i.tsv))) AS l
WHERE i.status = 'active'
GROUP BY i.stream_id, l;
