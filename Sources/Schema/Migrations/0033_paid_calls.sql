-- Paid outside calls (issue 29, F1 and F2): every call an LLM or the images API answered is
-- recorded the moment it answered, in its own short transaction, whatever becomes of the job
-- that made it (a failure, a retry, a refund, a dead letter, a crash after the call). The same
-- rows bound the spend: a global daily budget per API (shared by every replica) and a daily bound
-- of paid calls per user; and they tell the billing-worker which refunds give back paid work.

-- One row per answered call. user_id is the job's user (no foreign key: like the ledger, the
-- cost record outlives an erased user, who is then only this id); consumption_job names the
-- report.request a report's calls were made for, so its refund can be recognised as one of
-- already-paid work.
CREATE TABLE paid_calls (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    called_at         timestamptz NOT NULL DEFAULT now(),
    api               text NOT NULL CHECK (api IN ('llm', 'images')),
    purpose           text NOT NULL CHECK (purpose IN ('report', 'story', 'illustration')),
    user_id           uuid NOT NULL,
    job_id            uuid NOT NULL,
    consumption_job   uuid,
    model             text NOT NULL CHECK (char_length(model) BETWEEN 1 AND 256),
    prompt_tokens     bigint NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens bigint NOT NULL DEFAULT 0 CHECK (completion_tokens >= 0),
    images            integer NOT NULL DEFAULT 0 CHECK (images >= 0),
    cost_usd          numeric(14, 6) NOT NULL CHECK (cost_usd >= 0)
);
-- A user's calls of one purpose today (the per-user bound): a few rows per user and day.
CREATE INDEX paid_calls_user_idx ON paid_calls (user_id, purpose, called_at);
CREATE INDEX paid_calls_consumption_idx ON paid_calls (consumption_job) WHERE consumption_job IS NOT NULL;

-- The day's totals per API (UTC days), updated in the same transaction as each paid_calls row:
-- the budget check reads one row instead of summing the day's calls.
CREATE TABLE paid_call_days (
    day       date NOT NULL,
    api       text NOT NULL CHECK (api IN ('llm', 'images')),
    calls     bigint NOT NULL DEFAULT 0,
    cost_usd  numeric(16, 6) NOT NULL DEFAULT 0,
    PRIMARY KEY (day, api)
);

GRANT SELECT, INSERT ON paid_calls TO astro_report_worker, astro_story_worker;
GRANT SELECT, INSERT, UPDATE ON paid_call_days TO astro_report_worker, astro_story_worker;
-- A refund of a report whose LLM calls were paid is bounded (billing.refund-credit).
GRANT SELECT ON paid_calls TO astro_billing_worker;
GRANT SELECT ON paid_calls, paid_call_days TO astro_operator;

-- A refund the billing-worker withheld because the user's refunds of already-paid work today
-- reached their bound: the credit stays spent, and the ledger says so (at most once per
-- consumption, by credit_ledger_one_entry_per_consumption). The entry list is extended from
-- whatever it is now, as 0027 does.
DO $$
DECLARE
    definition text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO definition FROM pg_constraint
    WHERE conrelid = 'credit_ledger'::regclass AND conname = 'credit_ledger_entry_check';
    IF definition IS NULL OR definition NOT LIKE '%ARRAY[%' THEN
        RAISE EXCEPTION 'credit_ledger_entry_check has an unexpected form: %', definition;
    END IF;
    IF definition NOT LIKE '%''refund-withheld''%' THEN
        ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_entry_check;
        EXECUTE 'ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_entry_check '
            || replace(definition, 'ARRAY[', 'ARRAY[''refund-withheld''::text, ');
    END IF;
END
$$;
ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_consumption_named;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_consumption_named CHECK (
    entry NOT IN ('consumed', 'refunded', 'refund-withheld') OR consumption_job IS NOT NULL
);

-- Whether a report paid for with a credit is being written for this profile (as the report's
-- profile or as the partner of a report for two): the credit is spent and not refunded, no report
-- was stored for it, the refund was not withheld, both of its profiles still exist (a report for
-- two whose other profile is gone cannot be written any more), and it was spent within the last
-- day (report.generate ends well within that, retries included; a job stuck longer in a dead-letter
-- queue must not keep a person from deleting their data). The gateway refuses to delete such a
-- profile (409 report-in-progress): deleting it made the report fail and refunded a credit whose
-- LLM answer was already paid (F1). SECURITY DEFINER: the gateway reads none of these columns.
CREATE FUNCTION report_in_progress(profile uuid) RETURNS boolean
    LANGUAGE sql STABLE STRICT SECURITY DEFINER
    SET search_path = pg_catalog, public
AS $$
    SELECT EXISTS (
        SELECT 1 FROM purchase_credits c
        WHERE c.consumed
            AND (c.user_profile_id = profile OR c.consumed_partner_profile_id = profile)
            AND c.consumed_date > now() - interval '1 day'
            AND NOT EXISTS (SELECT 1 FROM report_purchases r WHERE r.credit_id = c.id)
            AND NOT EXISTS (SELECT 1 FROM credit_ledger l
                            WHERE l.consumption_job = c.consumed_by_job AND l.entry = 'refund-withheld')
            AND EXISTS (SELECT 1 FROM user_profiles p WHERE p.id = c.user_profile_id)
            AND (c.consumed_partner_profile_id IS NULL
                 OR EXISTS (SELECT 1 FROM user_profiles p WHERE p.id = c.consumed_partner_profile_id))
    )
$$;
REVOKE ALL ON FUNCTION report_in_progress(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION report_in_progress(uuid) TO astro_gateway;
-- The partner side of that look-up (the report's own profile has the live-consumption index).
CREATE INDEX purchase_credits_consumed_partner_idx ON purchase_credits (consumed_partner_profile_id)
    WHERE consumed AND consumed_partner_profile_id IS NOT NULL;

-- Daily quotas of the gateway (story generations, forced redraws): what each accepted request
-- counts against its quota (a forced redraw: its pages; anything else: 0, or 1 for a story).
ALTER TABLE gateway_jobs ADD COLUMN quota_units integer NOT NULL DEFAULT 0 CHECK (quota_units BETWEEN 0 AND 1000);

-- The user export gains the table (the function of 0030 with one more section).
CREATE OR REPLACE FUNCTION user_export_document(u uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE STRICT SECURITY DEFINER
    SET search_path = pg_catalog, public
AS $$
DECLARE
    sections jsonb := '{}';
    manifest jsonb := '[]';
    section jsonb;
    name text;
    query text;
BEGIN
    FOR name, query IN SELECT * FROM (VALUES
        ('users', 'SELECT to_jsonb(t) FROM users t WHERE t.id = $1'),
        ('user_profiles', 'SELECT to_jsonb(t) FROM user_profiles t WHERE t.user_id = $1 ORDER BY t.created_at, t.id'),
        ('birth_charts', 'SELECT to_jsonb(t) FROM birth_charts t JOIN user_profiles p ON p.id = t.profile_id
            WHERE p.user_id = $1 ORDER BY t.created_at, t.id'),
        ('report_purchases', 'SELECT to_jsonb(t) FROM report_purchases t WHERE t.user_id = $1 ORDER BY t.created_at, t.id'),
        ('purchase_records', 'SELECT to_jsonb(t) FROM purchase_records t WHERE t.user_id = $1 ORDER BY t.id'),
        ('purchase_credits', 'SELECT to_jsonb(t) FROM purchase_credits t WHERE t.user_id = $1 ORDER BY t.id'),
        ('credit_ledger', 'SELECT to_jsonb(t) FROM credit_ledger t WHERE t.user_id = $1 ORDER BY t.id'),
        ('credit_transfers', 'SELECT to_jsonb(t) FROM credit_transfers t WHERE t.to_user_id = $1
            OR t.transaction_id IN (SELECT r.transaction_id FROM purchase_records r WHERE r.user_id = $1)
            ORDER BY t.created_at, t.id'),
        ('store_notifications', 'SELECT to_jsonb(t) FROM store_notifications t WHERE t.transaction_id IN
            (SELECT r.transaction_id FROM purchase_records r WHERE r.user_id = $1) ORDER BY t.notification_uuid'),
        ('consumption_consents', 'SELECT to_jsonb(t) FROM consumption_consents t WHERE t.user_id = $1 ORDER BY t.id'),
        ('consumption_answers', 'SELECT to_jsonb(t) FROM consumption_answers t WHERE t.user_id = $1
            OR t.consent_id IN (SELECT c.id FROM consumption_consents c WHERE c.user_id = $1)
            ORDER BY t.transaction_id'),
        ('stories.child_profiles', 'SELECT to_jsonb(t) FROM stories.child_profiles t WHERE t.user_id = $1 ORDER BY t.id'),
        ('stories.stories', 'SELECT to_jsonb(t) FROM stories.stories t WHERE t.user_id = $1 ORDER BY t.id'),
        ('stories.pages', 'SELECT to_jsonb(t) FROM stories.pages t JOIN stories.stories s ON s.id = t.story_id
            WHERE s.user_id = $1 ORDER BY t.story_id, t.page_number'),
        ('stories.collections', 'SELECT to_jsonb(t) FROM stories.collections t WHERE t.user_id = $1 ORDER BY t.id'),
        ('stories.collection_stories', 'SELECT to_jsonb(t) FROM stories.collection_stories t
            JOIN stories.collections c ON c.id = t.collection_id WHERE c.user_id = $1 ORDER BY t.collection_id, t.story_id'),
        ('stories.story_reads', 'SELECT to_jsonb(t) FROM stories.story_reads t
            JOIN stories.child_profiles c ON c.id = t.child_profile_id WHERE c.user_id = $1 ORDER BY t.id'),
        ('stories.achievements', 'SELECT to_jsonb(t) FROM stories.achievements t
            JOIN stories.child_profiles c ON c.id = t.child_profile_id WHERE c.user_id = $1 ORDER BY t.id'),
        ('gateway_refresh_tokens', 'SELECT to_jsonb(t) - ''token_hash'' FROM gateway_refresh_tokens t
            WHERE t.user_id = $1 ORDER BY t.created_at'),
        ('gateway_device_keys', 'SELECT to_jsonb(t) FROM gateway_device_keys t WHERE t.user_id = $1'),
        ('gateway_jobs', 'SELECT to_jsonb(t) FROM gateway_jobs t WHERE t.user_id = $1 ORDER BY t.created_at, t.job_id'),
        ('jobs', 'SELECT to_jsonb(t) FROM jobs t WHERE t.user_id = $1 ORDER BY t.created_at, t.id'),
        -- The messages of the user's jobs not yet deleted by retention (`body`: the bytes in hex).
        ('outbox', 'SELECT to_jsonb(t) FROM outbox t JOIN jobs j ON j.id = t.job_id WHERE j.user_id = $1 ORDER BY t.id'),
        ('user_deletions', 'SELECT to_jsonb(t) FROM user_deletions t WHERE t.user_id = $1'),
        ('user_exports', 'SELECT jsonb_build_object(''id'', t.id, ''user_id'', t.user_id, ''created_at'', t.created_at,
            ''ready_at'', t.ready_at, ''expires_at'', t.expires_at, ''bytes'', t.bytes, ''failed_code'', t.failed_code)
            FROM user_exports t WHERE t.user_id = $1 ORDER BY t.created_at, t.id'),
        ('user_export_files', 'SELECT jsonb_build_object(''export_id'', t.export_id, ''path'', t.path,
            ''bytes'', octet_length(t.content)) FROM user_export_files t
            JOIN user_exports e ON e.id = t.export_id WHERE e.user_id = $1 ORDER BY t.export_id, t.path'),
        -- Stored chart results; a wheel's SVG (a drawing of charts exported above) by its size only.
        ('chart_results', 'SELECT to_jsonb(t) - ''svg'' FROM chart_results t WHERE t.user_id = $1
            ORDER BY t.created_at, t.id'),
        -- What the user's paid API calls cost (0033).
        ('paid_calls', 'SELECT to_jsonb(t) FROM paid_calls t WHERE t.user_id = $1 ORDER BY t.id')
    ) AS v (n, q) LOOP
        EXECUTE 'SELECT coalesce(jsonb_agg(s.x), ''[]'') FROM (' || query || ') AS s (x)' INTO section USING u;
        sections := sections || jsonb_build_object(name, section);
        manifest := manifest || jsonb_build_array(jsonb_build_object('table', name, 'rows', jsonb_array_length(section)));
    END LOOP;
    RETURN jsonb_build_object('schemaVersion', 1, 'userId', u, 'exportedAt', now(),
        'manifest', manifest, 'tables', sections);
END
$$;
