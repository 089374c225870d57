-- The daily AI budget is one count for all memory AI requests now (ai.daily_requests,
-- engram/sql/002_ai_budget.sql, applied before any service's migrations): what the
-- extractor already spent moves there, so the switch grants nothing twice.
INSERT INTO ai.daily_requests AS b (day, used)
SELECT day, used FROM extractor.ai_budget
ON CONFLICT (day) DO UPDATE SET used = b.used + EXCLUDED.used;
DROP TABLE extractor.ai_budget;
