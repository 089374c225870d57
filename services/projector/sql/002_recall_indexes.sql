-- The lists a packet always reads (pinned, preferences, newest) for one org's scopes,
-- without walking every active item of a large org.
CREATE INDEX items_pinned ON memory.items (org, scope, updated_at DESC)
    WHERE status = 'active' AND pinned;
CREATE INDEX items_preferences ON memory.items (org, scope, updated_at DESC)
    WHERE status = 'active' AND kind = 'preference';
