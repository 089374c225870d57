-- name: nearest
-- ($1 org, $2 scopes text[], $3 model, $4 query vector, $5 max cosine distance, $6 limit)
-- -> (item_id, distance, passage), nearest first: active items at their current revision
-- only, each once, by its nearest passage.
SELECT item_id, distance, passage FROM indexer.nearest($1, $2, $3, $4, $5, $6)

-- name: lock_items
-- Serialises every writer of an item's vectors (the event path, re-embedding):
-- keys taken in one statement, in one order, so two writers never deadlock.
SELECT pg_advisory_xact_lock(k)
FROM (SELECT DISTINCT hashtextextended('indexer.item:' || id, 0) AS k
      FROM unnest($1::text[]) AS id ORDER BY k) AS keys

-- name: tracked
SELECT item_id, org, scope, status, revision, text_revision, content, title
FROM indexer.items WHERE item_id = ANY ($1)

-- name: save_tracked
INSERT INTO indexer.items AS t (item_id, org, scope, status, revision, text_revision, content,
                                title)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[],
                     $7::jsonb[], $8::jsonb[])
ON CONFLICT (item_id) DO UPDATE
SET status = EXCLUDED.status, revision = EXCLUDED.revision,
    text_revision = EXCLUDED.text_revision, content = EXCLUDED.content, title = EXCLUDED.title,
    updated_at = now()
-- A replayed batch never moves an item back; nothing moves a forgotten one.
WHERE t.status IS DISTINCT FROM 'forgotten'
  AND (EXCLUDED.revision > t.revision OR EXCLUDED.status = 'forgotten')

-- name: views
-- Both views of each item: the indexer's own and the projector's row.
SELECT ids.id AS item_id, t.status AS own_status, t.revision AS own_revision,
       i.status AS projected_status, i.revision AS projected_revision
FROM unnest($1::text[]) AS ids (id)
LEFT JOIN indexer.items t ON t.item_id = ids.id
LEFT JOIN memory.items i ON i.item_id = ids.id

-- name: any_vectors
SELECT EXISTS (SELECT 1 FROM indexer.vectors)

-- name: plan_revisions
-- Each item's vector revision of the model (its passages are written together: the oldest
-- stands for them all) and its row's revision in the projector's read model; NULL where
-- there is none. One round trip for the event path's plan.
SELECT ids.id AS item_id,
       (SELECT min(v.revision) FROM indexer.vectors v
        WHERE v.item_id = ids.id AND v.model = $2) AS vector_revision,
       i.revision AS projected_revision
FROM unnest($1::text[]) AS ids (id)
LEFT JOIN memory.items i ON i.item_id = ids.id

-- name: void_vectors
-- Older text (revision before keep_from), or everything when keep_from is NULL.
DELETE FROM indexer.vectors v
USING unnest($1::text[], $2::int[]) AS p (item_id, keep_from)
WHERE v.item_id = p.item_id AND (p.keep_from IS NULL OR v.revision < p.keep_from)

-- name: relabel_vectors
-- The text did not change (a pin, a status change): its vectors stand for the new revision.
UPDATE indexer.vectors v SET revision = p.revision
FROM unnest($1::text[], $2::int[], $3::int[]) AS p (item_id, text_revision, revision)
WHERE v.item_id = p.item_id AND v.revision >= p.text_revision AND v.revision < p.revision

-- name: upsert_vector
-- The passages of older text are voided first (void_vectors, same transaction).
INSERT INTO indexer.vectors AS v (item_id, model, revision, org, scope, embedding, passage,
                                  piece)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (item_id, model, passage, piece) DO UPDATE
SET revision = EXCLUDED.revision, embedding = EXCLUDED.embedding, created_at = now()
WHERE EXCLUDED.revision >= v.revision

-- name: model
SELECT dimensions, index_name FROM indexer.models WHERE model = $1

-- name: add_model
INSERT INTO indexer.models (model, dimensions, index_name) VALUES ($1, $2, $3)

-- name: reindex_candidates
-- Active items without a vector of this model for their current revision, in id order.
SELECT i.item_id, i.org, i.scope, i.revision, i.title, i.content
FROM memory.items i
WHERE i.status = 'active' AND i.content IS NOT NULL AND i.item_id > $2
  AND ($3::text IS NULL OR i.org = $3)
  AND NOT EXISTS (SELECT 1 FROM indexer.vectors v
                  WHERE v.item_id = i.item_id AND v.model = $1 AND v.revision = i.revision)
ORDER BY i.item_id
LIMIT $4

-- name: reindex_pending
SELECT count(*)::int
FROM memory.items i
WHERE i.status = 'active' AND i.content IS NOT NULL AND ($2::text IS NULL OR i.org = $2)
  AND NOT EXISTS (SELECT 1 FROM indexer.vectors v
                  WHERE v.item_id = i.item_id AND v.model = $1 AND v.revision = i.revision)

-- name: running_job
SELECT job_id, cursor, total, embedded, dropped FROM indexer.reindex_jobs
WHERE model = $1 AND org IS NOT DISTINCT FROM $2 AND status = 'running'

-- name: start_job
INSERT INTO indexer.reindex_jobs (model, org, status, total) VALUES ($1, $2, 'running', $3)
RETURNING job_id

-- name: job_progress
UPDATE indexer.reindex_jobs
SET cursor = $2, embedded = embedded + $3, dropped = dropped + $4, updated_at = now()
WHERE job_id = $1

-- name: finish_job
UPDATE indexer.reindex_jobs SET status = 'done', finished_at = now(), updated_at = now()
WHERE job_id = $1

-- name: prune_other_models
DELETE FROM indexer.vectors WHERE model <> $1 AND ($2::text IS NULL OR org = $2)
