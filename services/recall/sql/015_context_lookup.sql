-- Which runs were given a memory (seed 001: "each entry shows the tasks that used it"):
-- GET /v1/memories/{id}/contexts finds a member's contexts by an item of their entries.
CREATE INDEX memory_contexts_entries ON recall.memory_contexts USING gin (entries jsonb_path_ops);
