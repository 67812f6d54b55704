-- Erasure of a user (issue 19, part 2): the `user.delete` job, run by the billing-worker because
-- the money records it keeps are its own (the ledger, purchases, credits). What it erases and
-- what it keeps is listed in CONTRACT.md ("User deletion"); here are the records that make the
-- erasure resumable and race-free, and exactly the grants it needs.
--
-- The order, each step its own transaction (a crash resumes at the first unfinished one):
--   1. `user_deletions` gets the user's row, under an exclusive advisory lock on the user: from
--      its commit on, every worker refuses the user's jobs (`users_being_deleted`, called in each
--      job's transaction under the same lock taken shared, so a job either committed before the
--      mark — its rows are then erased below — or sees it) and the gateway refuses the user's
--      access tokens;
--   2. the user's rows are deleted in batches;
--   3. the unspent credits are forfeited in the ledger, the row is marked finished and
--      `user.deleted` is published, with the job's own transaction.
-- The users row stays as a tombstone: the kept purchases, credits and ledger entries reference
-- it, and its id is a random uuid that no longer links to anything personal.

CREATE TABLE user_deletions (
    user_id      uuid PRIMARY KEY REFERENCES users (id) ON DELETE RESTRICT,
    -- The user.delete job that started it (a second job for the same user finds this row).
    job_id       uuid NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    -- Stories whose illustration files the story-worker still has to erase (its storage root is
    -- not reachable from the billing-worker): recorded at step 1, handed over at step 3.
    story_ids    uuid[] NOT NULL DEFAULT '{}',
    -- Credits forfeited at step 3.
    forfeited    integer NOT NULL DEFAULT 0 CHECK (forfeited >= 0)
);

CREATE FUNCTION user_lock_key(u uuid) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN hashtextextended('user:' || u::text, 11);

-- Which of `users` are being (or have been) deleted, after taking each one's advisory lock
-- shared. PL/pgSQL and VOLATILE so that the look-up is a statement of its own, with a snapshot
-- taken after the locks: a deletion marked while this waited is seen.
CREATE FUNCTION users_being_deleted(users uuid[]) RETURNS SETOF uuid
    LANGUAGE plpgsql VOLATILE STRICT AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(user_lock_key(u)) FROM (SELECT DISTINCT unnest(users) AS u ORDER BY 1) AS s;
    RETURN QUERY SELECT d.user_id FROM user_deletions AS d WHERE d.user_id = ANY (users);
END
$$;

-- A profile deleted through the gateway is remembered, so a chart.calculate update of it that
-- was already queued (PUT racing DELETE) is refused instead of creating the profile again.
CREATE TABLE deleted_profiles (
    id          uuid PRIMARY KEY,
    deleted_at  timestamptz NOT NULL DEFAULT now()
);

-- Forfeited credits: a credit of a deleted user that was never spent. It is marked revoked in
-- purchase_credits (so nothing can spend, revoke or restore it again) with forfeited_at saying
-- why, and the ledger records a `forfeited` entry. The entry list is extended from whatever it
-- is now (other migrations may add kinds too).
ALTER TABLE purchase_credits ADD COLUMN forfeited_at timestamptz;
ALTER TABLE purchase_credits ADD CONSTRAINT purchase_credits_forfeited_revoked
    CHECK (forfeited_at IS NULL OR (revoked AND NOT consumed));
DO $$
DECLARE
    definition text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO definition FROM pg_constraint
    WHERE conrelid = 'credit_ledger'::regclass AND conname = 'credit_ledger_entry_check';
    IF definition IS NULL OR definition NOT LIKE '%ARRAY[%' THEN
        RAISE EXCEPTION 'credit_ledger_entry_check has an unexpected form: %', definition;
    END IF;
    IF definition NOT LIKE '%''forfeited''%' THEN
        ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_entry_check;
        EXECUTE 'ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_entry_check '
            || replace(definition, 'ARRAY[', 'ARRAY[''forfeited''::text, ');
    END IF;
END
$$;

-- The audit subtracts forfeited credits from what the ledger says is available (a new column
-- at the end: CREATE OR REPLACE keeps the others, including 0025's transfers).
CREATE OR REPLACE VIEW credit_audit AS
SELECT u.id AS user_id,
       coalesce(l.issued, 0) AS issued,
       coalesce(l.consumed, 0) AS consumed,
       coalesce(l.refunded, 0) AS refunded,
       coalesce(l.revoked, 0) AS revoked,
       coalesce(l.restored, 0) AS restored,
       coalesce(l.debts, 0) - coalesce(l.debts_cleared, 0) AS open_debts,
       coalesce(l.issued, 0) - coalesce(l.consumed, 0) + coalesce(l.refunded, 0)
           - coalesce(l.revoked, 0) + coalesce(l.restored, 0)
           + coalesce(l.transferred_in, 0) - coalesce(l.transferred_out, 0)
           - coalesce(l.forfeited, 0) AS ledger_available,
       coalesce(c.available, 0) AS available,
       coalesce(l.transferred_in, 0) AS transferred_in,
       coalesce(l.transferred_out, 0) AS transferred_out,
       coalesce(l.forfeited, 0) AS forfeited
FROM users u
LEFT JOIN (
    SELECT user_id,
           count(*) FILTER (WHERE entry = 'issued') AS issued,
           count(*) FILTER (WHERE entry = 'consumed') AS consumed,
           count(*) FILTER (WHERE entry = 'refunded') AS refunded,
           count(*) FILTER (WHERE entry = 'revoked') AS revoked,
           count(*) FILTER (WHERE entry = 'restored') AS restored,
           count(*) FILTER (WHERE entry = 'debt') AS debts,
           count(*) FILTER (WHERE entry = 'debt-cleared') AS debts_cleared,
           count(*) FILTER (WHERE entry = 'transferred' AND transfer_direction = 'in') AS transferred_in,
           count(*) FILTER (WHERE entry = 'transferred' AND transfer_direction = 'out') AS transferred_out,
           count(*) FILTER (WHERE entry = 'forfeited') AS forfeited
    FROM credit_ledger GROUP BY user_id
) l ON l.user_id = u.id
LEFT JOIN (
    SELECT user_id, count(*) AS available
    FROM purchase_credits WHERE NOT consumed AND NOT revoked GROUP BY user_id
) c ON c.user_id = u.id;

-- Every worker refuses a deleted user's jobs in the job's transaction.
GRANT SELECT (user_id) ON user_deletions
    TO astro_chart_worker, astro_report_worker, astro_billing_worker, astro_story_worker, astro_gateway;
GRANT EXECUTE ON FUNCTION user_lock_key(uuid), users_being_deleted(uuid[])
    TO astro_chart_worker, astro_report_worker, astro_billing_worker, astro_story_worker;

-- The gateway: a deleting user's tokens are refused, a repeated DELETE /v1/me answers with the
-- first job; a deleted profile is remembered (the chart-worker reads that).
GRANT SELECT (job_id) ON user_deletions TO astro_gateway;
-- Each gateway replica re-reads the deletions started within the access token lifetime once a
-- second (DeletedUsers.swift) instead of asking on every request.
GRANT SELECT (started_at) ON user_deletions TO astro_gateway;
CREATE INDEX user_deletions_started_idx ON user_deletions (started_at);
GRANT INSERT ON deleted_profiles TO astro_gateway;
GRANT SELECT ON deleted_profiles TO astro_chart_worker;
CREATE POLICY jobs_gateway_read_user_delete ON jobs FOR SELECT TO astro_gateway USING (kind = 'user.delete');

-- The billing-worker's user.delete: its own job rows, messages and deliveries (permissive
-- policies next to those of 0012/0013, so they add to them).
CREATE POLICY jobs_billing_worker_user_delete ON jobs TO astro_billing_worker
    USING (kind = 'user.delete') WITH CHECK (kind = 'user.delete');
CREATE POLICY delivery_counts_billing_worker_user_delete ON delivery_counts TO astro_billing_worker
    USING (queue = 'user.delete') WITH CHECK (queue = 'user.delete');
CREATE POLICY outbox_billing_worker_user_delete ON outbox FOR INSERT TO astro_billing_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.events' AND routing_key LIKE 'user.%')
        OR (exchange = 'astro.jobs' AND routing_key = 'story.erase-illustrations')
        OR (exchange = 'astro.retry' AND routing_key = 'user.delete.dead')));
-- What it erases: the deleted user's job rows of every service (their results and errors may
-- quote what the user sent) and the messages those jobs wrote, but never a user.delete job's.
CREATE POLICY jobs_billing_worker_erase_read ON jobs FOR SELECT TO astro_billing_worker
    USING (user_id IN (SELECT d.user_id FROM user_deletions AS d));
CREATE POLICY jobs_billing_worker_erase ON jobs FOR DELETE TO astro_billing_worker
    USING (kind <> 'user.delete' AND user_id IN (SELECT d.user_id FROM user_deletions AS d));
GRANT DELETE ON jobs TO astro_billing_worker;
CREATE POLICY outbox_billing_worker_erase_read ON outbox FOR SELECT TO astro_billing_worker
    USING (job_id IN (SELECT j.id FROM jobs AS j JOIN user_deletions AS d ON d.user_id = j.user_id
        WHERE j.kind <> 'user.delete'));
CREATE POLICY outbox_billing_worker_erase ON outbox FOR DELETE TO astro_billing_worker
    USING (job_id IN (SELECT j.id FROM jobs AS j JOIN user_deletions AS d ON d.user_id = j.user_id
        WHERE j.kind <> 'user.delete'));
GRANT DELETE ON outbox TO astro_billing_worker;

GRANT SELECT, INSERT ON user_deletions TO astro_billing_worker;
GRANT UPDATE (finished_at, story_ids, forfeited) ON user_deletions TO astro_billing_worker;
GRANT EXECUTE ON FUNCTION user_lock_key(uuid) TO astro_billing_worker;
-- Profiles (their charts and reports go by the foreign keys, run as the tables' owner).
GRANT DELETE ON user_profiles TO astro_billing_worker;
GRANT DELETE ON report_purchases TO astro_billing_worker;
-- Magical Stories: children (their readings, achievements and collections go with them), stories
-- (their pages, collection entries and readings go with them), collections.
GRANT USAGE ON SCHEMA stories TO astro_billing_worker;
GRANT SELECT (id, user_id), DELETE ON stories.child_profiles, stories.stories, stories.collections
    TO astro_billing_worker;
-- The gateway's records of the user: refresh tokens, App Attest key, published jobs.
GRANT SELECT (token_hash, user_id), DELETE ON gateway_refresh_tokens TO astro_billing_worker;
GRANT SELECT (key_id, user_id), DELETE ON gateway_device_keys TO astro_billing_worker;
GRANT SELECT (job_id, user_id), DELETE ON gateway_jobs TO astro_billing_worker;
-- Forfeiting: the credits' revocation fields (UPDATE on purchase_credits since 0004) and the
-- ledger entry (INSERT since 0004). The users row: its last activity is cleared.
GRANT UPDATE (last_active_at) ON users TO astro_billing_worker;

-- The story-worker's story.erase-illustrations: its job rows, deliveries and dead letters.
CREATE POLICY jobs_story_worker_erase ON jobs TO astro_story_worker
    USING (kind = 'story.erase-illustrations') WITH CHECK (kind = 'story.erase-illustrations');
CREATE POLICY delivery_counts_story_worker_erase ON delivery_counts TO astro_story_worker
    USING (queue = 'story.erase-illustrations') WITH CHECK (queue = 'story.erase-illustrations');
CREATE POLICY outbox_story_worker_erase ON outbox FOR INSERT TO astro_story_worker
    WITH CHECK (producer = current_user AND exchange = 'astro.retry'
        AND routing_key = 'story.erase-illustrations.dead');

-- `astroctl user delete` is an operator action like the others (extended from whatever the list
-- is now, as the ledger's entries above).
DO $$
DECLARE
    definition text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO definition FROM pg_constraint
    WHERE conrelid = 'operator_actions'::regclass AND conname = 'operator_actions_action_check';
    IF definition IS NULL OR definition NOT LIKE '%ARRAY[%' THEN
        RAISE EXCEPTION 'operator_actions_action_check has an unexpected form: %', definition;
    END IF;
    IF definition NOT LIKE '%''user.delete''%' THEN
        ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
        EXECUTE 'ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check '
            || replace(definition, 'ARRAY[', 'ARRAY[''user.delete''::text, ');
    END IF;
END
$$;

-- user.delete erases the user's consent answers (migration 0024); it already reads them.
GRANT DELETE ON consumption_consents TO astro_billing_worker;
