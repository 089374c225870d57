-- Expired memories no longer crowd live ones out of a search (QA: 30 expired memories that
-- match "wombat" strongly left a live match out of recall and search, which answered
-- nothing). An expired memory stays active (nothing is decided when a time passes), so it
-- keeps its postings in the term index and its vector; the retrievers left it out only
-- after cutting their candidates to a few more than the answer. Now, when that cut left
-- fewer than the answer asked for and dropped an expired memory, the search runs again
-- with a pool ten times as deep, and then a hundred times: no cost while no expired memory
-- is among the best candidates.

-- The candidates of recall.bm25 (007_bm25_deltas.sql) at a depth: each word's strongest
-- 100 * depth postings per stream, the best (p_limit * 2) * depth items of those scored
-- exactly, (p_limit + 10) * depth kept; each with whether it has expired.
CREATE FUNCTION recall.bm25_pool(p_query text, p_limit integer, p_depth integer)
RETURNS TABLE (item_id text, revision integer, scope text, kind text, title text,
               content text, pinned boolean, updated_at double precision, rank real,
               expired boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH streams AS (
        SELECT recall.org() || '/' || s AS stream_id
        FROM unnest(recall.visible_scopes()) AS s
    ), words AS (
        SELECT array_agg(DISTINCT l) AS lexemes
        FROM unnest(tsvector_to_array(to_tsvector('english', p_query))) AS l
    ), counts AS (
        SELECT c.lexeme, c.docs, c.length
        FROM memory.term_counts c JOIN streams s ON s.stream_id = c.stream_id, words w
        WHERE c.lexeme = ANY (array_prepend('', w.lexemes))
        UNION ALL
        SELECT d.lexeme, d.docs, d.length
        FROM memory.term_deltas d JOIN streams s ON s.stream_id = d.stream_id, words w
        WHERE d.lexeme = ANY (array_prepend('', w.lexemes))
    ), totals AS (
        SELECT sum(c.docs)::double precision AS n,
               sum(c.length)::double precision / nullif(sum(c.docs), 0) AS avgdl
        FROM counts c
        WHERE c.lexeme = ''
    ), idf AS (
        SELECT c.lexeme,
               ln(1 + (t.n - sum(c.docs) + 0.5) / (sum(c.docs) + 0.5)) AS idf
        FROM counts c, totals t
        WHERE c.lexeme <> ''
        GROUP BY c.lexeme, t.n
        HAVING sum(c.docs) > 0
        ORDER BY 2 DESC
        LIMIT 32
    ), chosen AS MATERIALIZED (
        SELECT array_agg(idf.lexeme) AS lexemes, array_agg(idf.idf) AS idfs FROM idf
    ), found AS MATERIALIZED (
        SELECT strongest.item_id
        FROM idf, streams s, totals t, LATERAL (
            SELECT p.item_id, p.tf, p.dl FROM memory.terms p
            WHERE p.stream_id = s.stream_id AND p.lexeme = idf.lexeme
            ORDER BY p.impact DESC
            LIMIT 100 * p_depth) AS strongest
        GROUP BY strongest.item_id
        ORDER BY sum(idf.idf * memory.bm25_weight(strongest.tf, strongest.dl, t.avgdl)) DESC
        LIMIT p_limit * 2 * p_depth
    ), scored AS (
        SELECT p.item_id,
               sum(w.idfs[array_position(w.lexemes, p.lexeme)]
                   * memory.bm25_weight(p.tf, p.dl, t.avgdl)) AS score
        FROM found f CROSS JOIN chosen w CROSS JOIN totals t
        JOIN memory.terms p ON p.item_id = f.item_id AND p.lexeme = ANY (w.lexemes)
        GROUP BY p.item_id
        ORDER BY score DESC
        LIMIT (p_limit + 10) * p_depth
    )
    SELECT i.item_id, i.revision, i.scope, i.kind, i.title, i.content, i.pinned,
           extract(epoch FROM i.updated_at)::double precision, s.score::real,
           coalesce(i.expires_at <= now(), false)
    FROM scored s JOIN memory.items i ON i.item_id = s.item_id
    WHERE i.org = recall.org() AND i.scope = ANY (recall.visible_scopes())
      AND i.status = 'active';
END
$fn$;

CREATE TYPE recall.bm25_hit AS (
    item_id text, revision integer, scope text, kind text, title text, content text,
    pinned boolean, updated_at double precision, rank real
);

CREATE OR REPLACE FUNCTION recall.bm25(p_query text, p_limit integer)
RETURNS TABLE (item_id text, revision integer, scope text, kind text, title text,
               content text, pinned boolean, updated_at double precision, rank real)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_depth integer;
    v_hits recall.bm25_hit[];
    v_dropped boolean;
BEGIN
    FOREACH v_depth IN ARRAY ARRAY[1, 10, 100] LOOP
        SELECT array_agg(ROW(p.item_id, p.revision, p.scope, p.kind, p.title, p.content,
                             p.pinned, p.updated_at, p.rank)::recall.bm25_hit
                         ORDER BY p.rank DESC, p.updated_at DESC, p.item_id)
                   FILTER (WHERE NOT p.expired),
               bool_or(p.expired)
        INTO v_hits, v_dropped
        FROM recall.bm25_pool(p_query, p_limit, v_depth) AS p;
        EXIT WHEN NOT coalesce(v_dropped, false) OR coalesce(cardinality(v_hits), 0) >= p_limit;
    END LOOP;
    RETURN QUERY
    SELECT u.item_id, u.revision, u.scope, u.kind, u.title, u.content, u.pinned,
           u.updated_at, u.rank
    FROM unnest(v_hits) WITH ORDINALITY AS u(item_id, revision, scope, kind, title, content,
                                             pinned, updated_at, rank, n)
    ORDER BY u.n
    LIMIT p_limit;
END
$fn$;

REVOKE ALL ON FUNCTION recall.bm25_pool(text, integer, integer) FROM PUBLIC;

-- Vectors the same way (019_nearest_not_expired.sql): the indexer's nearest p_limit
-- vectors, then ten and a hundred times as many while expired memories took the places.
CREATE TYPE recall.nearest_hit AS (
    item_id text, revision integer, scope text, kind text, title text, content text,
    pinned boolean, updated_at double precision, distance double precision
);

CREATE OR REPLACE FUNCTION recall.nearest(p_model text, p_query text,
                                          p_max_distance double precision, p_limit integer)
RETURNS TABLE (item_id text, revision integer, scope text, kind text, title text,
               content text, pinned boolean, updated_at double precision,
               distance double precision)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    v_depth integer;
    v_hits recall.nearest_hit[];
    v_dropped boolean;
BEGIN
    FOREACH v_depth IN ARRAY ARRAY[1, 10, 100] LOOP
        SELECT array_agg(ROW(i.item_id, i.revision, i.scope, i.kind, i.title, i.content,
                             i.pinned, extract(epoch FROM i.updated_at)::double precision,
                             n.distance)::recall.nearest_hit
                         ORDER BY n.distance, n.item_id)
                   FILTER (WHERE i.expires_at IS NULL OR i.expires_at > now()),
               bool_or(i.expires_at <= now())
        INTO v_hits, v_dropped
        FROM indexer.nearest(recall.org(), recall.visible_scopes(), p_model,
                             p_query::public.vector, p_max_distance, p_limit * v_depth) AS n
        JOIN memory.items i ON i.item_id = n.item_id
        WHERE i.status = 'active';
        EXIT WHEN NOT coalesce(v_dropped, false) OR coalesce(cardinality(v_hits), 0) >= p_limit;
    END LOOP;
    RETURN QUERY
    SELECT u.item_id, u.revision, u.scope, u.kind, u.title, u.content, u.pinned,
           u.updated_at, u.distance
    FROM unnest(v_hits) WITH ORDINALITY AS u(item_id, revision, scope, kind, title, content,
                                             pinned, updated_at, distance, n)
    ORDER BY u.n
    LIMIT p_limit;
END
$fn$;
