-- Seed 004's pricing and holds (engram/sql/003_billing.sql): recall reads an org's holds
-- through billing.holds, and the change log shows each change's charge, from
-- billing.charges, for the scopes the principal sees.
GRANT USAGE ON SCHEMA billing TO engram_recall;
GRANT EXECUTE ON FUNCTION billing.holds(text[]) TO engram_recall;
GRANT SELECT ON billing.charges TO engram_recall;
ALTER TABLE billing.charges ENABLE ROW LEVEL SECURITY;
CREATE POLICY recall_charges ON billing.charges FOR SELECT TO engram_recall
    USING (org = recall.org());
