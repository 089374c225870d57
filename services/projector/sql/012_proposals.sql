-- Proposed changes to a teammate's shared memory (seed 004): one row per proposal, its
-- text in plain like every read model's (NULL once the memory is forgotten), its status
-- as the log last said (a pending proposal past 30 days reads as expired: recall).
CREATE TABLE memory.proposals (
    proposal_id       text PRIMARY KEY,
    item_id           text NOT NULL,
    org               text NOT NULL,
    scope             text NOT NULL,
    change            text NOT NULL,          -- correct | archive | unarchive
    base_revision     integer NOT NULL,
    title             text,
    content           text,
    superseded_by     text,
    reason            text NOT NULL,
    proposer          text NOT NULL,          -- the member
    status            text NOT NULL,          -- pending | merged | rejected | withdrawn | outdated | expired
    proposed_at       timestamptz NOT NULL,
    resolved_at       timestamptz,
    resolved_by       jsonb,
    resolution_reason text
);
CREATE INDEX proposals_item ON memory.proposals (item_id);
CREATE INDEX proposals_scope ON memory.proposals (org, scope, proposed_at DESC);
