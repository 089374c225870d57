-- name: full_text
-- The principal comes from the transaction (see 004_search_functions.sql).
SELECT * FROM recall.full_text($1, $2)

-- name: exact
-- The memories that hold every quoted phrase (see 023, 024 and 025_exact_words.sql);
-- principal as above.
SELECT * FROM recall.exact($1, $2, $3)

-- name: bm25
-- BM25 over the term index (see 006_bm25.sql and 007_bm25_deltas.sql); the principal as above.
-- With $3, each item comes with its words and their term frequencies, for relevance
-- feedback (read by key, item by item); without it, they are not read.
SELECT b.item_id, b.revision, b.scope, b.kind, b.title, b.content, b.pinned, b.updated_at,
       b.rank AS score, t.lexemes, t.tfs
FROM recall.bm25($1, $2) WITH ORDINALITY AS b
LEFT JOIN LATERAL (SELECT * FROM recall.item_terms(b.item_id) WHERE $3) AS t ON true
ORDER BY b.ordinality

-- name: term_stats
-- Items holding each word in the visible streams, the totals (lexeme ''), and the query's
-- own words (see 008_relevance_feedback.sql).
SELECT lexeme, docs, length, in_query FROM recall.term_stats($1, $2)

-- name: opening
-- What every packet needs first, in one round trip: the generation (shared:own:expired; own
-- and expired over $2, the token's own scopes: its member's, and its agent's, session's
-- and project's when it names them),
-- the org's policy (with its memory switch), and the pinned items, newest first ($3: the visible scopes), as many
-- as the packet holds: the request's $4 items, else the org's, else $6; none when the
-- policy (the request's $5, else the org's) is newest_first, which shows no pinned first.
SELECT g.shared, g.own, g.expired, o.policy, o.max_items, o.max_chars, o.memory,
       (SELECT coalesce(json_agg(p ORDER BY p.updated_at DESC), '[]')
        FROM (SELECT item_id, revision, scope, kind, title, content, pinned,
                     extract(epoch FROM updated_at)::double precision AS updated_at
              FROM memory.items
              WHERE org = $1 AND scope = ANY($3) AND status = 'active' AND pinned
                AND (expires_at IS NULL OR expires_at > now())
              ORDER BY updated_at DESC
              LIMIT CASE WHEN coalesce($5, o.policy) = 'newest_first' THEN 0
                         ELSE coalesce($4, o.max_items, $6) END) AS p) AS pinned
FROM (
    SELECT coalesce((SELECT generation FROM memory.generations
                      WHERE org = $1 AND scope = 'shared'), 0) AS shared,
           coalesce((SELECT sum(generation) FROM memory.generations
                      WHERE org = $1 AND scope = ANY($2)), 0)::bigint AS own,
           (SELECT count(*) FROM memory.items
             WHERE org = $1 AND scope = ANY($2) AND status = 'active' AND expires_at <= now())
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
SELECT item_id, revision, status, title FROM memory.items WHERE item_id = ANY($1) AND org = $2

-- name: get_item
SELECT item_id, revision, scope, kind, status, key, title, content, pinned, tags, sources,
       superseded_by, created_at, updated_at, expires_at,
       coalesce(expires_at <= now(), false) AS expired, inferred
FROM memory.items
WHERE item_id = $1 AND org = $2 AND scope = ANY($3)
  AND status IN ('active', 'disabled', 'archived', 'candidate')

-- name: list_items
SELECT item_id, revision, scope, kind, status, key, title, content, pinned, tags,
       updated_at, expires_at, coalesce(expires_at <= now(), false) AS expired, inferred
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
-- With $5, each item comes with its words, as in bm25; each with the passage its vector
-- was found by.
SELECT n.item_id, n.revision, n.scope, n.kind, n.title, n.content, n.pinned, n.updated_at,
       n.passage, t.lexemes, t.tfs
FROM recall.nearest($1, $2, $3, $4) WITH ORDINALITY AS n
LEFT JOIN LATERAL (SELECT * FROM recall.item_terms(n.item_id) WHERE $5) AS t ON true
ORDER BY n.ordinality

-- name: org_policy
SELECT policy, max_items, max_chars, keep_revisions, session_use, session_generate,
       max_candidates_per_run, agent_memory, max_memories_per_scope, memory, learning
FROM recall.org_policies WHERE org = $1

-- name: set_org_policy
-- $11: the fields the request names; the others keep their value (as configure_session
-- does), or, in an org's first row, take $2-$10 and $12-$14 as the defaults. In one
-- statement, so two admins setting different fields at once both keep theirs.
INSERT INTO recall.org_policies AS o (org, policy, max_items, max_chars, keep_revisions,
                                      session_use, session_generate, updated_by,
                                      max_candidates_per_run, agent_memory,
                                      max_memories_per_scope, memory, learning)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $12, $13, $14)
ON CONFLICT (org) DO UPDATE SET
    policy = CASE WHEN 'policy' = ANY($11::text[]) THEN EXCLUDED.policy ELSE o.policy END,
    max_items = CASE WHEN 'max_items' = ANY($11) THEN EXCLUDED.max_items ELSE o.max_items END,
    max_chars = CASE WHEN 'max_chars' = ANY($11) THEN EXCLUDED.max_chars ELSE o.max_chars END,
    keep_revisions = CASE WHEN 'keep_revisions' = ANY($11)
                          THEN EXCLUDED.keep_revisions ELSE o.keep_revisions END,
    session_use = CASE WHEN 'session_use' = ANY($11)
                       THEN EXCLUDED.session_use ELSE o.session_use END,
    session_generate = CASE WHEN 'session_generate' = ANY($11)
                            THEN EXCLUDED.session_generate ELSE o.session_generate END,
    max_candidates_per_run = CASE WHEN 'max_candidates_per_run' = ANY($11)
                                  THEN EXCLUDED.max_candidates_per_run
                                  ELSE o.max_candidates_per_run END,
    agent_memory = CASE WHEN 'agent_memory' = ANY($11)
                        THEN EXCLUDED.agent_memory ELSE o.agent_memory END,
    max_memories_per_scope = CASE WHEN 'max_memories_per_scope' = ANY($11)
                                  THEN EXCLUDED.max_memories_per_scope
                                  ELSE o.max_memories_per_scope END,
    memory = CASE WHEN 'memory' = ANY($11) THEN EXCLUDED.memory ELSE o.memory END,
    learning = CASE WHEN 'learning' = ANY($11) THEN EXCLUDED.learning ELSE o.learning END,
    updated_by = EXCLUDED.updated_by, updated_at = now()
RETURNING policy, max_items, max_chars, keep_revisions, session_use, session_generate,
          max_candidates_per_run, agent_memory, max_memories_per_scope, memory, learning

-- name: session_switches
SELECT * FROM recall.session_switches($1, $2, $3)

-- name: configure_session
-- $3/$5: whether the request names `use`/`generate` (a name with NULL follows the org).
INSERT INTO recall.session_settings (org, session, use, generate, updated_by)
VALUES ($1, $2, $4, $6, $7)
ON CONFLICT (org, session) DO UPDATE SET
    use = CASE WHEN $3 THEN EXCLUDED.use ELSE recall.session_settings.use END,
    generate = CASE WHEN $5 THEN EXCLUDED.generate ELSE recall.session_settings.generate END,
    updated_by = EXCLUDED.updated_by, updated_at = now()

-- name: links
-- A memory's links, outbound ($2 'out'), inbound ('in') or both, newest first; the
-- policy on memory.links keeps those whose two memories the caller cannot see.
SELECT source_id, target_id, kind, weight, created_at, updated_at
FROM memory.links
WHERE org = $4
  AND ((source_id = $1 AND $2 IN ('out', 'both')) OR (target_id = $1 AND $2 IN ('in', 'both')))
ORDER BY updated_at DESC, source_id, target_id, kind
LIMIT $3

-- name: proposals
-- Proposals on memories the caller can see, newest first. $3 'review': others' proposals
-- on the caller's memories (an admin's: on anyone's), its agents' too when the caller is a
-- person ($8: it is an agent); 'mine': the caller's own; 'all'.
-- A pending proposal older than $5 days reads as expired; one resolved more than $5 days
-- ago is left out, and so is one expired as long (seed 004: resolved ones leave after
-- another 30 days; a seed audit found an expired one listed for good). $4: a status to
-- keep, or NULL for every one.
SELECT * FROM (
    SELECT p.proposal_id, p.item_id, p.scope, p.change, p.base_revision, p.title, p.content,
           p.superseded_by, p.kind, p.tags, p.reason, p.proposer, p.proposer_agent,
           CASE WHEN p.status = 'pending' AND p.proposed_at < now() - make_interval(days => $5)
                THEN 'expired' ELSE p.status END AS status,
           p.proposed_at, p.resolved_at, p.resolution_reason,
           i.created_by ->> 'member' AS author, i.revision AS current_revision
    FROM memory.proposals p
    JOIN memory.items i ON i.item_id = p.item_id
    WHERE p.org = $1
      AND CASE WHEN p.resolved_at IS NULL OR p.status = 'expired'  -- (a merge tried late)
               THEN p.proposed_at > now() - make_interval(days => 2 * $5)
               ELSE p.resolved_at > now() - make_interval(days => $5) END
      AND CASE $3
            WHEN 'review' THEN (p.proposer <> $2 OR (p.proposer_agent IS NOT NULL AND NOT $8))
                               AND (i.created_by ->> 'member' = $2 OR $6)
            WHEN 'mine' THEN p.proposer = $2
            ELSE true
          END
) AS visible
WHERE $4::text IS NULL OR status = $4
ORDER BY proposed_at DESC, proposal_id
LIMIT $7

-- name: revisions
-- A memory's kept revisions, newest first, with who made each and why.
SELECT revision, reason, title, content, actor ->> 'member' AS member,
       actor ->> 'agent' AS agent, command_id, occurred_at
FROM memory.revisions
WHERE item_id = $1 AND org = $2
ORDER BY revision DESC

-- name: changes
-- One scope's changes after version $2, oldest first: each event with who and what made it,
-- and what it cost (seed 004: every charge appears in the activity log).
SELECT a.seq AS version, a.type, a.item_id, a.revision, i.key,
       a.actor ->> 'member' AS member, a.actor ->> 'agent' AS agent, a.made_by, a.command_id,
       a.occurred_at, coalesce(b.credits, 0) AS charged
FROM memory.audit a
LEFT JOIN memory.items i ON i.item_id = a.item_id
LEFT JOIN billing.charges b ON b.stream_id = a.stream_id AND b.seq = a.seq
WHERE a.stream_id = $1 AND a.seq > $2
ORDER BY a.seq
LIMIT $3

-- name: scope_version
-- A scope's current version: its newest change the caller can see; 0 when it has none.
SELECT coalesce(max(seq), 0) FROM memory.audit WHERE stream_id = $1

-- name: contexts_of
-- The caller's memory contexts that gave this memory, newest first.
SELECT c.context_id, c.run_id, c.query, c.created_at, (e ->> 'revision')::int AS revision,
       e -> 'why' AS why
FROM recall.memory_contexts c, jsonb_array_elements(c.entries) AS e
WHERE c.org = $1 AND c.member = $2
  AND c.entries @> jsonb_build_array(jsonb_build_object('item_id', $3::text))
  AND e ->> 'item_id' = $3
ORDER BY c.created_at DESC
LIMIT $4

-- name: entity_aliases
-- The org's entities and their other names, by entity.
SELECT entity, aliases, updated_by, updated_at
FROM recall.entity_aliases WHERE org = $1 ORDER BY entity

-- name: alias_taken
-- Another entity of the org that holds one of these folded names already (one whose own
-- name is this one's but for its case is this one, renamed: $4, the folded name).
SELECT entity FROM recall.entity_aliases
WHERE org = $1 AND entity <> $2 AND names[1] <> $4 AND lower(entity) <> lower($2)
  AND names && $3::text[]
ORDER BY entity LIMIT 1

-- name: rename_entity
-- The entity of the org whose own name is this one's but for its case takes this spelling.
UPDATE recall.entity_aliases SET entity = $2
WHERE org = $1 AND entity <> $2 AND (names[1] = $3 OR lower(entity) = lower($2))

-- name: set_entity_aliases
-- An entity's other names, replacing those it had; NULL when the org holds as many
-- entities as it may ($6) and this is a new one.
INSERT INTO recall.entity_aliases AS e (org, entity, aliases, names, updated_by)
SELECT $1, $2, $3, $4, $5
WHERE EXISTS (SELECT 1 FROM recall.entity_aliases WHERE org = $1 AND entity = $2)
   OR (SELECT count(*) FROM recall.entity_aliases WHERE org = $1) < $6
ON CONFLICT (org, entity) DO UPDATE
    SET aliases = EXCLUDED.aliases, names = EXCLUDED.names,
        updated_by = EXCLUDED.updated_by, updated_at = now()
RETURNING entity, aliases, updated_by, updated_at

-- name: delete_entity_aliases
-- The entity of this name, its case aside ($2 folded, $3 as given: a row folded by an
-- earlier rule is found by its name too).
DELETE FROM recall.entity_aliases
WHERE org = $1 AND (names[1] = $2 OR lower(entity) = lower($3)) RETURNING entity

-- name: processed
-- The session's turns the extractor has read, newest first (extractor 008_processed_own.sql).
SELECT turn_id FROM extractor.processed($1, $2)

-- name: org_holds
-- The transaction's org's account, if it is metered (seed 004's holds; 029_own_holds.sql).
SELECT * FROM recall.org_holds()
