-- Stored chart results (issue 20, part 8; CONTRACT.md "Chart results"): what the chart-worker's
-- `chart.synastry`, `chart.transits`, `chart.return` and `chart.render` jobs computed, one row per
-- content-derived id. The id is a UUID built from SHA-256 over the user, the kind, the canonical
-- parameters, the input charts' input digests and the engine (and wheel renderer) versions, so
-- the same request on unchanged charts finds its row and computes nothing (it only touches
-- `last_used_at`, which retention reads). Rows go with their user's profiles (user.delete
-- deletes the profiles; the foreign keys cascade as the tables' owner).

CREATE TABLE chart_results (
    id                  uuid PRIMARY KEY,
    user_id             uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    profile_id          uuid NOT NULL REFERENCES user_profiles (id) ON DELETE CASCADE,
    -- The second chart of a synastry (result or wheel).
    partner_profile_id  uuid REFERENCES user_profiles (id) ON DELETE CASCADE,
    kind                text NOT NULL CHECK (kind IN ('synastry', 'transits', 'solar-return', 'progressed', 'wheel')),
    parameters          jsonb NOT NULL CHECK (jsonb_typeof(parameters) = 'object'),
    -- JSON kinds: the result document; wheels: the SVG. Exactly one of the two.
    result              jsonb,
    svg                 text,
    -- Size of the stored result (the JSON text or the SVG), in bytes.
    bytes               integer NOT NULL CHECK (bytes >= 0),
    engine_version      text NOT NULL CHECK (char_length(engine_version) BETWEEN 1 AND 100),
    created_at          timestamptz NOT NULL DEFAULT now(),
    last_used_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT chart_results_one_body CHECK ((kind = 'wheel') = (svg IS NOT NULL) AND (svg IS NULL) = (result IS NOT NULL)),
    CONSTRAINT chart_results_partner_differs CHECK (partner_profile_id IS DISTINCT FROM profile_id)
);
CREATE INDEX chart_results_user_idx ON chart_results (user_id, created_at);
CREATE INDEX chart_results_profile_idx ON chart_results (profile_id);
CREATE INDEX chart_results_partner_idx ON chart_results (partner_profile_id) WHERE partner_profile_id IS NOT NULL;
CREATE INDEX chart_results_last_used_idx ON chart_results (last_used_at);

-- The chart-worker: its new job rows, deliveries and dead letters (permissive policies next to
-- those of 0012/0013; its events are `chart.%`, allowed there), and the results.
CREATE POLICY jobs_chart_worker_results ON jobs TO astro_chart_worker
    USING (kind IN ('chart.synastry', 'chart.transits', 'chart.return', 'chart.render'))
    WITH CHECK (kind IN ('chart.synastry', 'chart.transits', 'chart.return', 'chart.render'));
CREATE POLICY delivery_counts_chart_worker_results ON delivery_counts TO astro_chart_worker
    USING (queue IN ('chart.synastry', 'chart.transits', 'chart.return', 'chart.render'))
    WITH CHECK (queue IN ('chart.synastry', 'chart.transits', 'chart.return', 'chart.render'));
CREATE POLICY outbox_chart_worker_results ON outbox FOR INSERT TO astro_chart_worker
    WITH CHECK (producer = current_user AND exchange = 'astro.retry' AND routing_key IN
        ('chart.synastry.dead', 'chart.transits.dead', 'chart.return.dead', 'chart.render.dead'));
GRANT SELECT, INSERT ON chart_results TO astro_chart_worker;
GRANT UPDATE (last_used_at) ON chart_results TO astro_chart_worker;

-- The gateway: its requests of these jobs read back like the other writes (GET /v1/jobs/{id}),
-- and it serves the stored results to their user (touching last_used_at when it does).
CREATE POLICY jobs_gateway_read_chart_results ON jobs FOR SELECT TO astro_gateway
    USING (kind IN ('chart.synastry', 'chart.transits', 'chart.return', 'chart.render'));
GRANT SELECT ON chart_results TO astro_gateway;
GRANT UPDATE (last_used_at) ON chart_results TO astro_gateway;

-- user.delete (billing-worker) erases the user's results by user_id (they would also go with the
-- profiles it deletes).
GRANT SELECT (id, user_id), DELETE ON chart_results TO astro_billing_worker;

-- The maintenance task deletes results unused for CHART_RESULT_RETENTION.
GRANT SELECT (id, last_used_at), DELETE ON chart_results TO astro_maintenance;

-- `astroctl chart results show`: the operator reads a stored result.
GRANT SELECT ON chart_results TO astro_operator;

-- The user export gains the table (the function of 0028 with one more section).
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
            ORDER BY t.created_at, t.id')
    ) AS v (n, q) LOOP
        EXECUTE 'SELECT coalesce(jsonb_agg(s.x), ''[]'') FROM (' || query || ') AS s (x)' INTO section USING u;
        sections := sections || jsonb_build_object(name, section);
        manifest := manifest || jsonb_build_array(jsonb_build_object('table', name, 'rows', jsonb_array_length(section)));
    END LOOP;
    RETURN jsonb_build_object('schemaVersion', 1, 'userId', u, 'exportedAt', now(),
        'manifest', manifest, 'tables', sections);
END
$$;
