-- Seed 004's entity aliases: an org's entities and the other names each goes by. Admins
-- set them (PUT /v1/aliases/{entity}); a search naming one name also looks for the
-- others. `names` holds every name of the entity, folded (lower case, single spaces),
-- so a name belongs to one entity of an org at most.
CREATE TABLE recall.entity_aliases (
    org        text NOT NULL,
    entity     text NOT NULL,
    aliases    text[] NOT NULL,
    names      text[] NOT NULL,
    updated_by text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, entity)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON recall.entity_aliases TO engram_recall;
ALTER TABLE recall.entity_aliases ENABLE ROW LEVEL SECURITY;
CREATE POLICY recall_entity_aliases ON recall.entity_aliases FOR ALL TO engram_recall
    USING (org = recall.org()) WITH CHECK (org = recall.org());
