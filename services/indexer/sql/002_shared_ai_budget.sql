-- The daily AI budget is one count for all memory AI requests now (ai.daily_requests,
-- engram/sql/002_ai_budget.sql, applied before any service's migrations): what the
-- indexer already spent moves there, so the switch grants nothing twice.
INSERT INTO ai.daily_requests AS b (day, used)
SELECT day, used FROM indexer.ai_budget
ON CONFLICT (day) DO UPDATE SET used = b.used + EXCLUDED.used;
DROP TABLE indexer.ai_budget;
