-- name: turn_method
-- This author's turn of this id into this stream (003), or a turn of this id the org
-- handled before turns named either: such a row still counts for all of them.
SELECT method FROM extractor.turns
WHERE org = $1 AND turn_id = $2 AND (stream_id IS NULL OR (stream_id = $3 AND author = $4))
LIMIT 1

-- name: turn_done
INSERT INTO extractor.turns (org, turn_id, stream_id, author, method, proposals)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (org, turn_id, stream_id, author) DO UPDATE
SET method = EXCLUDED.method, proposals = EXCLUDED.proposals, processed_at = now()

-- name: suppressed
-- A forgotten item's sources suppress its own stream's turns; a row with no stream
-- suppresses the org's (003: older rows, and forgotten items' own ids).
SELECT EXISTS (
    SELECT 1 FROM extractor.sources
    WHERE org = $1 AND source_id = ANY($2::text[]) AND suppressed
      AND (stream_id IS NULL OR stream_id = $3)
)

-- name: record_sources
-- The sources' keyed hashes (004).
INSERT INTO extractor.sources (org, source_id, item_id, stream_id, hashed)
SELECT $1, source_id, $3, $4, true FROM unnest($2::text[]) AS source_id
ON CONFLICT (org, source_id, item_id) DO NOTHING

-- name: plain_sources
-- Rows recorded before sources were hashed (004), a chunk at a time.
SELECT org, source_id, item_id FROM extractor.sources
WHERE NOT hashed AND source_id <> item_id
LIMIT $1

-- name: rehash_sources
-- Those rows with their sources' hashes in place of the ids.
WITH plain AS (
    DELETE FROM extractor.sources s
    USING unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(org, source_id, item_id, hash)
    WHERE s.org = u.org AND s.source_id = u.source_id AND s.item_id = u.item_id
    RETURNING s.org, u.hash, s.item_id, s.suppressed, s.stream_id
)
INSERT INTO extractor.sources (org, source_id, item_id, suppressed, stream_id, hashed)
SELECT org, hash, item_id, suppressed, stream_id, true FROM plain
ON CONFLICT (org, source_id, item_id) DO UPDATE
SET suppressed = extractor.sources.suppressed OR EXCLUDED.suppressed

-- name: suppress_sources
UPDATE extractor.sources SET suppressed = true WHERE org = $1 AND item_id = $2

-- name: suppress_item_id
-- The item's own id counts as a source too: a turn that cites the forgotten item
-- (it was recalled into the run) must not bring its text back as a candidate. Org-wide
-- (no stream): the id is a uuid, and the run may propose into another of its scopes.
INSERT INTO extractor.sources (org, source_id, item_id, suppressed) VALUES ($1, $2, $2, true)
ON CONFLICT (org, source_id, item_id) DO UPDATE SET suppressed = true, stream_id = NULL

-- name: generate
-- The session's `generate` switch as it applies (recall's session switches: its own,
-- else its fork source's, else the org's default, else on).
SELECT generate FROM recall.session_switches($1, $2, $3)

-- name: agent_memory
-- The org's agent memory switch (recall's org policy; on when the org sets none).
SELECT coalesce((SELECT agent_memory FROM recall.org_policies WHERE org = $1), true)

-- name: memory
-- The org's memory switch (seed 004's memory capability; on when the org sets none).
SELECT coalesce((SELECT memory FROM recall.org_policies WHERE org = $1), true)
