-- A batch of new memories (MemoryRemembered events only: the bulk of the log) is applied
-- with one statement, its offsets included: projector.apply_new_items. The full path
-- (handlers.py) takes a transaction and about eight round trips a batch: the guard, then
-- the writes its answer decides, the heads and counts, the offsets, the commit. A batch
-- of new memories needs no answer first (a new item has no status before), so the
-- function checks the guard itself and writes nothing when the batch is not the plain
-- continuation of every stream: the caller then takes the full path, which reports gaps
-- and duplicates. A batch that races another applier of the same events fails on the
-- audit's key and rolls back whole.
--
-- Both paths write through the same functions below, so each row has one definition.

CREATE TYPE projector.audit_row AS (
    stream_id text, seq bigint, event_id text, type text, item_id text, org text, scope text,
    revision integer, actor jsonb, command_id text, occurred_at timestamptz
);

-- The audit trail; returns the ids of the events not recorded before.
CREATE FUNCTION projector.insert_audit(p_rows projector.audit_row[])
RETURNS SETOF text LANGUAGE sql AS $$
    INSERT INTO memory.audit (stream_id, seq, event_id, type, item_id, org, scope, revision,
                              actor, command_id, occurred_at)
    SELECT * FROM unnest(p_rows)
    ON CONFLICT DO NOTHING
    RETURNING event_id
$$;

CREATE FUNCTION projector.insert_items(p_rows projector.item_row[])
RETURNS void LANGUAGE sql AS $$
    INSERT INTO memory.items (item_id, org, scope, stream_id, kind, status, key, title,
                              content, content_length, pinned, tags, sources, revision,
                              replaces, expires_at, created_by, created_at, updated_at)
    SELECT r.*, r.created_at FROM unnest(p_rows) AS r
    ON CONFLICT (item_id) DO NOTHING
$$;

CREATE FUNCTION projector.insert_revisions(p_rows projector.revision_row[])
RETURNS void LANGUAGE sql AS $$
    INSERT INTO memory.revisions (item_id, revision, org, scope, reason, title, content,
                                  content_hash, actor, command_id, occurred_at)
    SELECT * FROM unnest(p_rows)
    ON CONFLICT (item_id, revision) DO NOTHING
$$;

-- The heads of a batch's streams and the generations it bumped. Each new head is also
-- announced on the channel engram_projected, as '<seq> <stream_id>', when the batch
-- commits: whoever holds a command's answer (its stream_id and seq) can LISTEN and know
-- when its events are in the read models, without polling (a stream id too long for a
-- notification, 8,000 bytes, is not announced).
CREATE FUNCTION projector.advance(p_streams text[], p_heads bigint[], p_orgs text[],
                                  p_scopes text[], p_bumps bigint[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO projector.stream_heads (stream_id, seq)
    SELECT * FROM unnest(p_streams, p_heads)
    ON CONFLICT (stream_id) DO UPDATE
        SET seq = GREATEST(projector.stream_heads.seq, EXCLUDED.seq);
    INSERT INTO memory.generations (org, scope, generation)
    SELECT * FROM unnest(p_orgs, p_scopes, p_bumps)
    ON CONFLICT (org, scope) DO UPDATE
        SET generation = memory.generations.generation + EXCLUDED.generation;
    PERFORM pg_notify('engram_projected', h.seq || ' ' || h.stream_id)
    FROM unnest(p_streams, p_heads) AS h(stream_id, seq)
    WHERE octet_length(h.stream_id) < 7900;
END
$$;

-- True when applied; false, with nothing written, when a stream of the batch does not go
-- on from its head (p_firsts: each stream's first seq in the batch, p_lasts: its last).
-- The offsets row is engram/tracking.py's, for the projector's table.
CREATE FUNCTION projector.apply_new_items(
    p_audit projector.audit_row[], p_items projector.item_row[],
    p_revisions projector.revision_row[], p_streams text[], p_firsts bigint[],
    p_lasts bigint[], p_orgs text[], p_scopes text[], p_bumps bigint[],
    p_consumers text[], p_topics text[], p_partitions integer[], p_offsets bigint[])
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1
               FROM unnest(p_streams, p_firsts) AS s(stream_id, first)
               LEFT JOIN projector.stream_heads h ON h.stream_id = s.stream_id
               WHERE coalesce(h.seq, 0) <> s.first - 1) THEN
        RETURN false;
    END IF;
    IF (SELECT count(*) FROM projector.insert_audit(p_audit)) <> cardinality(p_audit) THEN
        RAISE unique_violation USING MESSAGE = 'an event of the batch is recorded already';
    END IF;
    PERFORM projector.insert_items(p_items);
    PERFORM projector.insert_revisions(p_revisions);
    PERFORM projector.advance(p_streams, p_lasts, p_orgs, p_scopes, p_bumps);
    INSERT INTO projector.offsets (consumer, topic, partition, next_offset)
    SELECT * FROM unnest(p_consumers, p_topics, p_partitions, p_offsets)
    ON CONFLICT (consumer, topic, partition)
        DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = now();
    RETURN true;
END
$$;
