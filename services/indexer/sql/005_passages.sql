-- A vector for each slice of a memory the model reads whole. The local model reads 256
-- tokens of a text, its marks and the title among them (an English passage of 1,200
-- characters about whole, a German one to about its 667th character, Chinese to its
-- 250th), and a memory holds up to 4,000 characters: its later part was unknown to the
-- vector list. Now each passage of a memory (engram.passages: at most 1,200 characters,
-- what a search shows) is embedded in the slices the model reads whole
-- (EmbeddingProvider.pieces), each slice a row labelled with its passage, and a search
-- shows the passage its nearest vector was found by (seed 004: "the same chunk the
-- ranking scored").
ALTER TABLE indexer.vectors ADD COLUMN passage smallint NOT NULL DEFAULT 0;
ALTER TABLE indexer.vectors ADD COLUMN piece smallint NOT NULL DEFAULT 0;
ALTER TABLE indexer.vectors DROP CONSTRAINT vectors_pkey;
ALTER TABLE indexer.vectors ADD PRIMARY KEY (item_id, model, passage, piece);

-- A long memory's one vector stood for its head only: dropped, so that the re-embedding
-- pass (at the indexer's start, then every ENGRAM_INDEXER_REINDEX_INTERVAL_S) gives it its
-- vectors. Until then it is found by its words. A shorter memory's vector stands for what
-- the model read of it until its text changes.
-- (memory.items is the projector's: a database the indexer alone was set up in has none.)
DO $do$
BEGIN
    IF to_regclass('memory.items') IS NOT NULL THEN
        DELETE FROM indexer.vectors v
        USING memory.items i
        WHERE i.item_id = v.item_id AND i.content_length > 1200;
    END IF;
END
$do$;

-- indexer.nearest as in 004_small_sets_exact.sql, naming each memory once, by its nearest
-- vector and that vector's passage. A memory's slices each take a row of those read, so
-- p_limit + 8 rows could hold far fewer memories (QA: 20 memories of four passages each,
-- a limit of 20: 16 found). While fewer than p_limit memories came and the rows read were
-- all within the distance cut and as many as asked (there may be more), it reads four
-- times as many, three times at most. A row counts only at its item's current revision
-- (a stale row nearer than the current ones must not hide the item).
DROP FUNCTION indexer.nearest(text, text[], text, vector, double precision, integer);
CREATE FUNCTION indexer.nearest(
    p_org text, p_scopes text[], p_model text, p_query vector,
    p_max_distance double precision, p_limit integer)
RETURNS TABLE (item_id text, distance double precision, passage integer)
LANGUAGE plpgsql STABLE
SET hnsw.iterative_scan = 'relaxed_order'
AS $fn$
DECLARE
    dims integer;
    few boolean;
    v_rows integer := p_limit + 8;
    v_read integer;
    v_farthest double precision;
    v_ids text[];
    v_distances double precision[];
    v_passages integer[];
BEGIN
    SELECT m.dimensions INTO dims FROM indexer.models m WHERE m.model = p_model;
    IF dims IS NULL THEN
        RETURN;  -- no vector was ever written with this model
    END IF;
    SELECT count(*) < 1000 INTO few FROM (
        SELECT 1 FROM indexer.vectors v
        WHERE v.org = p_org AND v.model = p_model AND v.scope = ANY (p_scopes)
        LIMIT 1000) AS bounded;
    FOR attempt IN 1..4 LOOP
        -- "+ 0" keeps the planner off the graph: only the bare distance can use it.
        EXECUTE format($q$
            WITH nearest AS MATERIALIZED (
                SELECT v.item_id, v.revision, v.passage::integer AS passage,
                       (v.embedding::vector(%1$s) <=> $1)::double precision AS distance
                FROM indexer.vectors v
                WHERE v.model = %2$L AND v.org = $2 AND v.scope = ANY ($3)
                ORDER BY (v.embedding::vector(%1$s) <=> $1) %3$s
                LIMIT $5),
            live AS (
                SELECT n.item_id, n.passage, n.distance
                FROM nearest n JOIN memory.items i ON i.item_id = n.item_id
                WHERE i.org = $2 AND i.status = 'active' AND i.revision = n.revision
                  AND n.distance <= $4),
            found AS (
                SELECT DISTINCT ON (c.item_id) c.item_id, c.distance, c.passage
                FROM live c
                ORDER BY c.item_id, c.distance, c.passage)
            SELECT (SELECT array_agg(f.item_id ORDER BY f.distance, f.item_id) FROM found f),
                   (SELECT array_agg(f.distance ORDER BY f.distance, f.item_id) FROM found f),
                   (SELECT array_agg(f.passage ORDER BY f.distance, f.item_id) FROM found f),
                   (SELECT count(*)::integer FROM nearest),
                   (SELECT max(n.distance) FROM nearest n)$q$,
            dims, p_model, CASE WHEN few THEN '+ 0' ELSE '' END)
        INTO v_ids, v_distances, v_passages, v_read, v_farthest
        USING p_query, p_org, p_scopes, p_max_distance, v_rows;
        EXIT WHEN coalesce(cardinality(v_ids), 0) >= p_limit  -- enough
              OR v_read < v_rows                              -- no more vectors
              OR v_farthest > p_max_distance;                 -- the rest are too far
        v_rows := v_rows * 4;
    END LOOP;
    RETURN QUERY
    SELECT u.item_id, u.distance, u.passage
    FROM unnest(v_ids, v_distances, v_passages) WITH ORDINALITY AS u(item_id, distance, passage, n)
    ORDER BY u.n
    LIMIT p_limit;
END
$fn$;
