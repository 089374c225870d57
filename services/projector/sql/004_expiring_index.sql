-- The generation's "expired" count reads only the items that have an expiry, instead
-- of every active item of the caller's scope (tens of milliseconds at 100,000 items).
CREATE INDEX items_expiring ON memory.items (org, scope, expires_at)
    WHERE status = 'active' AND expires_at IS NOT NULL;
