-- The agent that made a proposal, when an agent did (its member is the proposer): its
-- member reviews it, so it is listed under the member's "review", not only "mine" (QA: an
-- agent's proposal on its member's shared fact never reached the member's review).
ALTER TABLE memory.proposals ADD COLUMN proposer_agent text;
