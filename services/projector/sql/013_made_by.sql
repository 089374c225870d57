-- What made each change (seed 002's memory log: "consolidation, person or promotion"): the
-- event header's made_by, NULL for events written before the command service recorded it.
ALTER TABLE memory.audit ADD COLUMN made_by text;
ALTER TYPE projector.audit_row ADD ATTRIBUTE made_by text;

CREATE OR REPLACE FUNCTION projector.insert_audit(p_rows projector.audit_row[])
RETURNS SETOF text LANGUAGE sql AS $$
    INSERT INTO memory.audit (stream_id, seq, event_id, type, item_id, org, scope, revision,
                              actor, command_id, occurred_at, made_by)
    SELECT * FROM unnest(p_rows)
    ON CONFLICT DO NOTHING
    RETURNING event_id
$$;
