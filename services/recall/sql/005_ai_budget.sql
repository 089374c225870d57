-- Recall embeds queries; with a remote model each request takes one unit of the shared
-- daily AI budget (engram/sql/002_ai_budget.sql). The recall role may only reserve
-- through the function, never read or rewrite the count itself.
GRANT USAGE ON SCHEMA ai TO engram_recall;
GRANT EXECUTE ON FUNCTION ai.reserve_request(date, integer) TO engram_recall;
