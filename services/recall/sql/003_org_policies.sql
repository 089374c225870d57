-- Which packet policy an org uses by default (seed 000's hybrid when absent), and its
-- limits; a request may override within the limits RecallRequest allows.
CREATE TABLE recall.org_policies (
    org        text PRIMARY KEY,
    policy     text NOT NULL CHECK (policy IN ('hybrid', 'preferences_first', 'newest_first')),
    max_items  integer CHECK (max_items BETWEEN 1 AND 50),
    max_chars  integer CHECK (max_chars BETWEEN 200 AND 32000),
    updated_by text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT, UPDATE ON recall.org_policies TO engram_recall;
ALTER TABLE recall.org_policies ENABLE ROW LEVEL SECURITY;
CREATE POLICY recall_org_policies ON recall.org_policies FOR ALL TO engram_recall
    USING (org = recall.org()) WITH CHECK (org = recall.org());
