-- name: full_text
-- The principal comes from the transaction (see 004_search_functions.sql).
SELECT * FROM recall.full_text($1, $2)

-- name: bm25
-- BM25 over the term index (see 006_bm25.sql and 007_bm25_deltas.sql); the principal as above.
SELECT * FROM recall.bm25($1, $2)

-- name: bm25_feedback
-- The full-text pool scored again with the feedback items' words (see 008_relevance_feedback.sql).
SELECT item_id, score FROM recall.bm25_feedback($1, $2, $3, $4, $5)

-- name: opening
-- What every packet needs first, in one round trip: the generation (shared:own:expired),
-- the org's policy, and the pinned items (newest first, at most $4; $3: visible scopes).
SELECT g.shared, g.own, g.expired, o.policy, o.max_items, o.max_chars,
       (SELECT coalesce(json_agg(p ORDER BY p.updated_at DESC), '[]')
        FROM (SELECT item_id, revision, scope, kind, title, content, pinned,
                     extract(epoch FROM updated_at)::double precision AS updated_at
              FROM memory.items
              WHERE org = $1 AND scope = ANY($3) AND status = 'active' AND pinned
                AND (expires_at IS NULL OR expires_at > now())
              ORDER BY updated_at DESC
              LIMIT $4) AS p) AS pinned
FROM (
    SELECT coalesce((SELECT generation FROM memory.generations
                      WHERE org = $1 AND scope = 'shared'), 0) AS shared,
           coalesce((SELECT generation FROM memory.generations
                      WHERE org = $1 AND scope = $2), 0) AS own,
           (SELECT count(*) FROM memory.items
             WHERE org = $1 AND scope = $2 AND status = 'active' AND expires_at <= now())
               AS expired
) AS g
LEFT JOIN recall.org_policies o ON o.org = $1

-- name: save_context
INSERT INTO recall.memory_contexts (context_id, org, member, run_id, query, policy, generation,
                                    entries)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)

-- name: context
SELECT c.context_id, c.run_id, c.query, c.policy, c.generation, c.created_at, c.entries
FROM recall.memory_contexts c
WHERE c.context_id = $1 AND c.org = $2 AND c.member = $3

-- name: current_of
SELECT item_id, revision, status FROM memory.items WHERE item_id = ANY($1) AND org = $2

-- name: get_item
SELECT item_id, revision, scope, kind, status, key, title, content, pinned, tags, sources,
       superseded_by, created_at, updated_at
FROM memory.items
WHERE item_id = $1 AND org = $2 AND scope = ANY($3)
  AND status IN ('active', 'disabled', 'archived', 'candidate')

-- name: list_items
SELECT item_id, revision, scope, kind, status, key, title, content, pinned, tags,
       updated_at
FROM memory.items
WHERE org = $1 AND scope = ANY($2) AND status = ANY($3)
  AND ($4::timestamptz IS NULL OR (updated_at, item_id) < ($4, $5))
ORDER BY updated_at DESC, item_id DESC
LIMIT $6

-- name: preferences
SELECT item_id, revision, scope, kind, title, content, pinned,
       extract(epoch FROM updated_at) AS updated_at
FROM memory.items
WHERE org = $1 AND scope = ANY($2) AND status = 'active' AND kind = 'preference'
  AND (expires_at IS NULL OR expires_at > now())
ORDER BY updated_at DESC
LIMIT $3

-- name: newest
SELECT item_id, revision, scope, kind, title, content, pinned,
       extract(epoch FROM updated_at) AS updated_at
FROM memory.items
WHERE org = $1 AND scope = ANY($2) AND status = 'active'
  AND (expires_at IS NULL OR expires_at > now())
ORDER BY updated_at DESC
LIMIT $3

-- name: nearest
-- Nearest vectors of the configured model (current revision, active items, under the
-- max distance) with the items' text, for the transaction's principal.
SELECT * FROM recall.nearest($1, $2, $3, $4)

-- name: org_policy
SELECT policy, max_items, max_chars FROM recall.org_policies WHERE org = $1

-- name: set_org_policy
INSERT INTO recall.org_policies (org, policy, max_items, max_chars, updated_by)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (org) DO UPDATE SET policy = EXCLUDED.policy, max_items = EXCLUDED.max_items,
    max_chars = EXCLUDED.max_chars, updated_by = EXCLUDED.updated_by, updated_at = now()
RETURNING policy, max_items, max_chars
