-- MEMORY_AI_DAILY_REQUEST_LIMIT caps all memory AI requests per day (seed 000):
-- extraction, item embeddings and query embeddings, from every service and replica,
-- are counted in one row per UTC day.
CREATE SCHEMA IF NOT EXISTS ai;
CREATE TABLE IF NOT EXISTS ai.daily_requests (
    day  date PRIMARY KEY,
    used integer NOT NULL
);

-- One request from the day's budget: the row lock of the upsert makes it atomic across
-- replicas. NULL when the budget is spent (or the limit is 0: AI off, nothing written).
-- Security definer, so a restricted role (recall's) is granted this and not the table:
-- it can take one request within the limit, never rewrite the count.
CREATE OR REPLACE FUNCTION ai.reserve_request(p_day date, p_limit integer) RETURNS integer
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO ai.daily_requests AS b (day, used) SELECT p_day, 1 WHERE p_limit > 0
    ON CONFLICT (day) DO UPDATE SET used = b.used + 1 WHERE b.used < p_limit
    RETURNING used
$$;
REVOKE ALL ON FUNCTION ai.reserve_request(date, integer) FROM PUBLIC;
