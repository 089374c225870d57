-- Links between memories (seed 004): a directed edge from a memory (source_id, in the
-- stream that wrote it: org and scope) to any memory its writer could see, of one kind,
-- with an optional weight. "supersedes" edges come from archiving with superseded_by
-- (source: the memory that replaces, target: the archived one) and go when it is
-- restored. A forget removes the memory's links and its own stream's links to it; a
-- link from another stream to a forgotten memory stays, id only, and no reader sees it
-- (recall's row-level security shows a link only when both its memories are visible).
CREATE TABLE memory.links (
    source_id  text NOT NULL,
    target_id  text NOT NULL,
    kind       text NOT NULL,
    org        text NOT NULL,
    scope      text NOT NULL,
    weight     double precision,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (source_id, target_id, kind)
);
CREATE INDEX links_target ON memory.links (target_id);
