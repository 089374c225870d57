-- The org's cap on the candidates one agent run proposes in a scope (seed 001: a task
-- makes at most three proposals); NULL: no cap (seed 000). The command service's writer
-- reads it as it decides, with keep_revisions.
ALTER TABLE recall.org_policies
    ADD COLUMN max_candidates_per_run integer DEFAULT 3
        CHECK (max_candidates_per_run BETWEEN 1 AND 1000);
