-- Seed 004's pricing and holds. An org with an account here is metered: saving a memory
-- costs 1 credit, and when its credit runs out, when a caller reaches the monthly cap, or
-- when the org is suspended, its calls are refused. An org without one (the default, as
-- the other seeds have no billing) is never charged nor held.
--
-- Operators set accounts (`engram billing`); the command service's writer decides what a
-- command charges and records it in its events (`charged`); the projector records each
-- charge here, once per event; the writer and recall read the holds.
CREATE SCHEMA IF NOT EXISTS billing;

CREATE TABLE IF NOT EXISTS billing.accounts (
    org         text PRIMARY KEY,
    credits     bigint NOT NULL DEFAULT 0 CHECK (credits >= 0),  -- granted, in all
    -- Credits one caller (an agent's token, else a member's: seed 004's API key) may
    -- spend in a calendar month (UTC); NULL: no cap.
    monthly_cap integer CHECK (monthly_cap BETWEEN 1 AND 1000000000),
    suspended   boolean NOT NULL DEFAULT false,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Each charge, from the log: the activity log shows it beside its change.
CREATE TABLE IF NOT EXISTS billing.charges (
    stream_id   text NOT NULL,
    seq         bigint NOT NULL,
    org         text NOT NULL,
    caller      text NOT NULL,
    item_id     text NOT NULL,
    credits     integer NOT NULL CHECK (credits > 0),
    occurred_at timestamptz NOT NULL,
    PRIMARY KEY (stream_id, seq)
);

-- What each caller spent each month; the org's balance is its credits less their sum.
CREATE TABLE IF NOT EXISTS billing.usage (
    org     text NOT NULL,
    month   date NOT NULL,
    caller  text NOT NULL,
    credits bigint NOT NULL,
    PRIMARY KEY (org, month, caller)
);

-- Record a batch of charges: each event's once (a replayed batch adds nothing), and the
-- month's usage with them, in the caller's transaction.
CREATE OR REPLACE FUNCTION billing.record(p_streams text[], p_seqs bigint[], p_orgs text[],
                                          p_callers text[], p_items text[],
                                          p_credits integer[], p_at timestamptz[])
RETURNS integer LANGUAGE sql AS $$
    WITH added AS (
        INSERT INTO billing.charges (stream_id, seq, org, caller, item_id, credits,
                                     occurred_at)
        SELECT * FROM unnest(p_streams, p_seqs, p_orgs, p_callers, p_items, p_credits, p_at)
        ON CONFLICT (stream_id, seq) DO NOTHING
        RETURNING org, caller, credits, occurred_at
    ), summed AS (
        INSERT INTO billing.usage AS u (org, month, caller, credits)
        SELECT org, date_trunc('month', occurred_at AT TIME ZONE 'UTC')::date, caller,
               sum(credits)
        FROM added GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (org, month, caller) DO UPDATE SET credits = u.credits + EXCLUDED.credits
        RETURNING 1
    )
    SELECT count(*)::integer FROM added
$$;

-- The holds of some orgs, as the writer and recall read them: one row per metered org,
-- with its balance and what each of its callers spent this month.
CREATE OR REPLACE FUNCTION billing.holds(p_orgs text[])
RETURNS TABLE (org text, suspended boolean, balance bigint, monthly_cap integer,
               spent jsonb)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT a.org, a.suspended,
           a.credits - coalesce((SELECT sum(u.credits) FROM billing.usage u
                                 WHERE u.org = a.org), 0)::bigint,
           a.monthly_cap,
           coalesce((SELECT jsonb_object_agg(u.caller, u.credits) FROM billing.usage u
                     WHERE u.org = a.org
                       AND u.month = date_trunc('month', now() AT TIME ZONE 'UTC')::date),
                    '{}'::jsonb)
    FROM billing.accounts a WHERE a.org = ANY (p_orgs)
$$;
REVOKE ALL ON FUNCTION billing.holds(text[]) FROM PUBLIC;
