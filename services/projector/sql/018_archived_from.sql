-- The status an archived memory had before (NULL for any other status): one archived
-- after it was disabled is a retracted fact still (seed 002), which a fork of its session
-- copies retracted, as the writer's own state tells it (``Item.archived_from``). Rows
-- archived before this column read NULL until a replay.
ALTER TABLE memory.items ADD COLUMN archived_from text;
