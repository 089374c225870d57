-- Seed 002's learned memory under the org's `learning: apply`: an active memory the
-- extractor learned and no person confirmed since (services.projector.marks folds it as
-- the writer does). A promotion or a fork reads it, to copy an inference as one.
ALTER TABLE memory.items ADD COLUMN inferred boolean NOT NULL DEFAULT false;
