-- The recall role reads a link only when it can see both its memories (seed 004: "a link
-- to a teammate's private memory stays invisible to you, as that memory does"). The
-- subqueries read memory.items as this role, so its own policy applies to them too.
GRANT SELECT ON memory.links TO engram_recall;
ALTER TABLE memory.links ENABLE ROW LEVEL SECURITY;
CREATE POLICY recall_links ON memory.links FOR SELECT TO engram_recall
    USING (org = recall.org()
           AND EXISTS (SELECT 1 FROM memory.items s
                       WHERE s.item_id = source_id AND s.status <> 'forgotten')
           AND EXISTS (SELECT 1 FROM memory.items t
                       WHERE t.item_id = target_id AND t.status <> 'forgotten'));
