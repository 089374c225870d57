-- Recall reads its caller's org's holds only, and the charges of the scopes the caller
-- sees (a review: billing.holds took any orgs from its caller, and the charges' policy
-- let a member see the item ids and callers charged in another member's scope).
REVOKE EXECUTE ON FUNCTION billing.holds(text[]) FROM engram_recall;
CREATE FUNCTION recall.org_holds()
RETURNS TABLE (org text, suspended boolean, balance bigint, monthly_cap integer,
               spent jsonb)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM billing.holds(ARRAY[current_setting('engram.org', true)])
$$;
REVOKE ALL ON FUNCTION recall.org_holds() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION recall.org_holds() TO engram_recall;

DROP POLICY recall_charges ON billing.charges;
CREATE POLICY recall_charges ON billing.charges FOR SELECT TO engram_recall
    USING (org = recall.org()
           AND substr(stream_id, length(org) + 2) = ANY (recall.visible_scopes()));
