-- name: guard
-- The (stream_id, seq) guard and the audit trail in one (the events that are new), with
-- the heads of the batch's streams and the statuses and streams of its items as they were
-- before it.
SELECT ARRAY(SELECT projector.insert_audit($1)) AS new,
       (SELECT coalesce(jsonb_object_agg(stream_id, seq), '{}')::text
        FROM projector.stream_heads WHERE stream_id = ANY($2)) AS heads,
       (SELECT coalesce(jsonb_object_agg(item_id, jsonb_build_array(status, stream_id)), '{}')::text
        FROM memory.items WHERE item_id = ANY($3)) AS statuses

-- name: finish
-- After a batch's writes: the heads of its streams, the generations it bumped, and the
-- term index's counts folded from the batch's deltas.
SELECT projector.advance($1, $2, $3, $4, $5), memory.fold_term_counts()

-- name: apply_new_items
SELECT projector.apply_new_items($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)

-- name: audit_at
SELECT stream_id, seq, event_id FROM memory.audit
WHERE (stream_id, seq) IN (SELECT * FROM unnest($1::text[], $2::bigint[]))

-- name: anomaly
INSERT INTO projector.anomalies (kind, stream_id, expected, got, event_id, topic, partition, "offset")
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)

-- name: insert_item
-- A batch's new items in one statement (the term index's trigger runs once for all).
SELECT projector.insert_items($1)

-- name: insert_revision
SELECT projector.insert_revisions($1)

-- name: copy_revision
INSERT INTO memory.revisions (item_id, revision, org, scope, reason, title, content, content_hash,
                              actor, command_id, occurred_at)
SELECT item_id, $2, org, scope, $3, title, content, content_hash, $4, $5, $6
FROM memory.revisions WHERE item_id = $1 AND revision = $2 - 1
ON CONFLICT (item_id, revision) DO NOTHING

-- name: revise_item
UPDATE memory.items SET revision = GREATEST(revision, $2), title = $3, content = $4,
                        content_length = $5, updated_at = GREATEST(updated_at, $6)
WHERE item_id = $1

-- name: relabel_item
-- A keyed save that revised the memory brought tags or sources, or a relabel gave it other
-- tags ($3 NULL: its sources stay): its labels from now on. One query for both, so a batch
-- that holds both applies them in the log's order.
UPDATE memory.items SET tags = $2, sources = coalesce($3, sources)
WHERE item_id = $1 AND status <> 'forgotten'

-- name: kind_item
UPDATE memory.items SET revision = GREATEST(revision, $2), kind = $3,
                        updated_at = GREATEST(updated_at, $4)
WHERE item_id = $1

-- name: pin_item
UPDATE memory.items SET revision = GREATEST(revision, $2), pinned = $3,
                        updated_at = GREATEST(updated_at, $4)
WHERE item_id = $1

-- name: status_item
UPDATE memory.items SET revision = GREATEST(revision, $2), status = $3, superseded_by = $4,
                        updated_at = GREATEST(updated_at, $5),
                        archived_from = CASE WHEN $3 = 'archived' THEN $6 END
WHERE item_id = $1

-- name: forget_item
UPDATE memory.items SET status = 'forgotten', title = NULL, content = NULL, key = NULL,
                        tags = '{}', sources = '{}', pinned = false, updated_at = $2
WHERE item_id = $1

-- name: forget_revisions
UPDATE memory.revisions SET title = NULL, content = NULL WHERE item_id = $1

-- name: tombstone
INSERT INTO memory.tombstones (item_id, org, scope, content_hashes, revisions, reason, actor,
                              command_id, forgotten_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (item_id) DO NOTHING

-- name: link
-- A link made or re-weighted ($8 true), or removed ($8 false; a NULL source removes the
-- target's links of that kind from any source). One query for both, so the links of a
-- batch apply in the order of its events.
WITH removed AS (
    DELETE FROM memory.links
    WHERE NOT $8::boolean AND ($1::text IS NULL OR source_id = $1) AND target_id = $2 AND kind = $3
)
INSERT INTO memory.links (source_id, target_id, kind, org, scope, weight, created_at, updated_at)
SELECT $1, $2, $3, $4, $5, $6::double precision, $7::timestamptz, $7 WHERE $8::boolean
ON CONFLICT (source_id, target_id, kind)
    DO UPDATE SET weight = EXCLUDED.weight, updated_at = EXCLUDED.updated_at

-- name: forget_links
-- A forgotten memory's links, and those to it from its own stream.
DELETE FROM memory.links
WHERE source_id = $1 OR (target_id = $1 AND org = $2 AND scope = $3)

-- name: propose
INSERT INTO memory.proposals (proposal_id, item_id, org, scope, change, base_revision, title,
                              content, superseded_by, reason, proposer, status, proposed_at,
                              proposer_agent, kind, tags)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', $12, $13, $14, $15)
ON CONFLICT (proposal_id) DO NOTHING

-- name: resolve_proposal
UPDATE memory.proposals SET status = $2, resolved_at = $3, resolved_by = $4,
                            resolution_reason = $5
WHERE proposal_id = $1

-- name: forget_proposals
-- A forgotten memory's proposals lose their text and reasons; a pending one can never be
-- merged: it is outdated, as of the forget.
UPDATE memory.proposals
SET title = NULL, content = NULL, reason = NULL, resolution_reason = NULL, tags = NULL,
    resolved_at = CASE WHEN status = 'pending' THEN $2 ELSE resolved_at END,
    status = CASE WHEN status = 'pending' THEN 'outdated' ELSE status END
WHERE item_id = $1

-- name: prune_revisions
-- The org's retention: the memory's revisions before $2 leave, text and all.
DELETE FROM memory.revisions WHERE item_id = $1 AND revision < $2

-- name: current_database
SELECT current_database()

-- name: database_comment
-- A database of that name on the server, with its comment (a replay's shadow is marked so).
SELECT shobj_description(oid, 'pg_database') AS mark FROM pg_database
WHERE datname = $1

-- name: checksum_items
-- The rows a replay and the live read models must agree on, of the orgs LIKE $1 (no
-- wall-clock columns). Every column but the full-text vector (derived from the content and
-- title): a damaged expiry or sources went unseen (QA).
SELECT item_id, org, scope, stream_id, kind, status, key, title, content,
       content_length, pinned, tags,
       sources, revision, superseded_by, replaces, expires_at, created_by, created_at,
       updated_at, archived_from, inferred FROM memory.items
WHERE org LIKE $1 ORDER BY item_id

-- name: checksum_revisions
SELECT item_id, revision, reason, title, content, content_hash
FROM memory.revisions WHERE org LIKE $1 ORDER BY item_id, revision

-- name: checksum_tombstones
SELECT item_id, content_hashes, revisions FROM memory.tombstones
WHERE org LIKE $1 ORDER BY item_id

-- name: checksum_generations
SELECT org, scope, generation FROM memory.generations
WHERE org LIKE $1 ORDER BY org, scope

-- name: checksum_links
SELECT source_id, target_id, kind, weight, created_at, updated_at
FROM memory.links WHERE org LIKE $1 ORDER BY source_id, target_id, kind

-- name: checksum_proposals
SELECT proposal_id, item_id, change, base_revision, title, content, status,
       proposer_agent, kind, tags,
       proposed_at, resolved_at FROM memory.proposals WHERE org LIKE $1 ORDER BY proposal_id

-- name: schema_tables
SELECT schemaname || '.' || tablename AS t FROM pg_tables
WHERE schemaname = ANY($1) ORDER BY 1

-- name: stored_columns
-- A table's stored columns, in order (a generated one is computed again on the way in).
SELECT column_name FROM information_schema.columns
WHERE table_schema = $1 AND table_name = $2 AND is_generated = 'NEVER'
ORDER BY ordinal_position

-- name: stored_offsets
SELECT partition, next_offset FROM projector.offsets WHERE consumer = $1 AND topic = $2
