-- What each run was given: ids and revisions, so a reply can show later
-- whether each memory has changed or been forgotten since.
CREATE SCHEMA IF NOT EXISTS recall;
CREATE TABLE recall.memory_contexts (
    context_id  uuid PRIMARY KEY,
    org         text NOT NULL,
    member      text NOT NULL,
    run_id      text,
    query       text NOT NULL,
    policy      text NOT NULL,
    generation  text NOT NULL,
    entries     jsonb NOT NULL,            -- [{"item_id": …, "revision": …, "why": […]}]
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_contexts_run ON recall.memory_contexts (org, run_id);
