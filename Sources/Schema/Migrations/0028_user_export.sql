-- Export of a user's data (issue 19, part 1; CONTRACT.md, "User export"). Two steps, each run by
-- the service that owns what it reads:
--   1. `user.export` (story-worker): copies the illustration files of the user's stories from its
--      storage root into `user_export_files` (no other service can reach that root), records
--      the export in `user_exports` and queues `user.export-pack`;
--   2. `user.export-pack` (billing-worker, the worker that already erases a user across every
--      table): writes the JSON document with `user_export_document`, packs it with the files
--      into a zip stored in `user_exports.zip`, drops the copied files and publishes
--      `user.exported`. Any gateway replica then serves the zip to its user until `expires_at`;
--      the maintenance task deletes expired exports.
-- So the story-worker never reads billing or profile data, and no worker gets SELECT on
-- another service's tables: the document is read by one SECURITY DEFINER function that only the
-- billing-worker may execute.

CREATE TABLE user_exports (
    -- The user.export job's id.
    id          uuid PRIMARY KEY,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- Set together when the zip is stored.
    ready_at    timestamptz,
    expires_at  timestamptz,
    zip         bytea,
    bytes       integer CHECK (bytes >= 0),
    -- Why there is no zip (`export-too-large`), when the pack failed for good.
    failed_code text CHECK (char_length(failed_code) <= 64),
    CONSTRAINT user_exports_ready_together CHECK (
        (ready_at IS NULL) = (zip IS NULL) AND (zip IS NULL) = (expires_at IS NULL)
        AND (zip IS NULL) = (bytes IS NULL))
);
CREATE INDEX user_exports_user_idx ON user_exports (user_id, created_at);
CREATE INDEX user_exports_expires_idx ON user_exports (expires_at) WHERE expires_at IS NOT NULL;

-- The illustration files copied by step 1, until step 2 packs (and deletes) them.
CREATE TABLE user_export_files (
    export_id  uuid NOT NULL REFERENCES user_exports (id) ON DELETE CASCADE,
    -- Inside the zip: illustrations/<story>/<file>.
    path       text NOT NULL CHECK (char_length(path) BETWEEN 1 AND 300),
    content    bytea NOT NULL,
    PRIMARY KEY (export_id, path)
);

-- Everything stored about user `u`, one section per table (CONTRACT.md lists them), and a
-- manifest naming every section with its row count. A table added later that holds a user's
-- rows must be added here (CREATE OR REPLACE in its own migration): UserExportTests fails
-- otherwise. Secrets of the user's sessions (refresh token hashes) are left out.
CREATE FUNCTION user_export_document(u uuid) RETURNS jsonb
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
            JOIN user_exports e ON e.id = t.export_id WHERE e.user_id = $1 ORDER BY t.export_id, t.path')
    ) AS v (n, q) LOOP
        EXECUTE 'SELECT coalesce(jsonb_agg(s.x), ''[]'') FROM (' || query || ') AS s (x)' INTO section USING u;
        sections := sections || jsonb_build_object(name, section);
        manifest := manifest || jsonb_build_array(jsonb_build_object('table', name, 'rows', jsonb_array_length(section)));
    END LOOP;
    RETURN jsonb_build_object('schemaVersion', 1, 'userId', u, 'exportedAt', now(),
        'manifest', manifest, 'tables', sections);
END
$$;
REVOKE ALL ON FUNCTION user_export_document(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION user_export_document(uuid) TO astro_billing_worker;

-- Step 1, the story-worker: its job rows, deliveries, messages; the export's row and files.
CREATE POLICY jobs_story_worker_export ON jobs TO astro_story_worker
    USING (kind = 'user.export') WITH CHECK (kind = 'user.export');
CREATE POLICY delivery_counts_story_worker_export ON delivery_counts TO astro_story_worker
    USING (queue = 'user.export') WITH CHECK (queue = 'user.export');
CREATE POLICY outbox_story_worker_export ON outbox FOR INSERT TO astro_story_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.events' AND routing_key = 'user.export.failed')
        OR (exchange = 'astro.jobs' AND routing_key = 'user.export-pack')
        OR (exchange = 'astro.retry' AND routing_key = 'user.export.dead')));
GRANT SELECT (id, user_id), INSERT ON user_exports TO astro_story_worker;
GRANT SELECT (export_id, path), INSERT, DELETE ON user_export_files TO astro_story_worker;

-- Step 2, the billing-worker.
CREATE POLICY jobs_billing_worker_export ON jobs TO astro_billing_worker
    USING (kind = 'user.export-pack') WITH CHECK (kind = 'user.export-pack');
CREATE POLICY delivery_counts_billing_worker_export ON delivery_counts TO astro_billing_worker
    USING (queue = 'user.export-pack') WITH CHECK (queue = 'user.export-pack');
CREATE POLICY outbox_billing_worker_export ON outbox FOR INSERT TO astro_billing_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.events' AND routing_key IN ('user.exported', 'user.export-pack.failed'))
        OR (exchange = 'astro.retry' AND routing_key = 'user.export-pack.dead')));
GRANT SELECT, UPDATE (ready_at, expires_at, zip, bytes, failed_code) ON user_exports TO astro_billing_worker;
GRANT SELECT, DELETE ON user_export_files TO astro_billing_worker;
-- user.delete erases the user's exports (their files go with them).
GRANT DELETE ON user_exports TO astro_billing_worker;

-- The gateway: POST /v1/me/export reads its job back like the other writes, and serves the zip.
CREATE POLICY jobs_gateway_read_user_export ON jobs FOR SELECT TO astro_gateway USING (kind = 'user.export');
GRANT SELECT (id, user_id, ready_at, expires_at, zip, bytes, failed_code) ON user_exports TO astro_gateway;

-- The maintenance task deletes expired exports (Retention, table user_exports).
GRANT SELECT (id, expires_at), DELETE ON user_exports TO astro_maintenance;

-- `astroctl user export`: the operator reads the finished zip (and why there is none), and the
-- action is recorded like the other operator actions (the list extended as in 0027).
GRANT SELECT (id, user_id, zip, bytes, expires_at, failed_code) ON user_exports TO astro_operator;
DO $$
DECLARE
    definition text;
BEGIN
    SELECT pg_get_constraintdef(oid) INTO definition FROM pg_constraint
    WHERE conrelid = 'operator_actions'::regclass AND conname = 'operator_actions_action_check';
    IF definition IS NULL OR definition NOT LIKE '%ARRAY[%' THEN
        RAISE EXCEPTION 'operator_actions_action_check has an unexpected form: %', definition;
    END IF;
    IF definition NOT LIKE '%''user.export''%' THEN
        ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_action_check;
        EXECUTE 'ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_action_check '
            || replace(definition, 'ARRAY[', 'ARRAY[''user.export''::text, ');
    END IF;
END
$$;
