-- What the extractor's learning does in an org (seeds 000 and 002 differ): 'suggest' makes
-- each learned fact a candidate a person confirms (seed 000, the default); 'apply' uses it
-- at once in a session's or an agent's memory (seed 002's learned memory). The command
-- service's writer reads it as it decides, with the org's other limits.
ALTER TABLE recall.org_policies
    ADD COLUMN learning text NOT NULL DEFAULT 'suggest'
        CHECK (learning IN ('suggest', 'apply'));
