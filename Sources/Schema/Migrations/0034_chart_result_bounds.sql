-- Bounds on stored chart results (issue 29, F7; CONTRACT.md "Chart results"). One user at the
-- request rate limit could have the chart-worker compute and store a new transit result (~412 KB,
-- 0.36 CPU-s) many times a second, kept 180 days.
--
-- 1. A per-user quota on computed results: `chart_results_computed` counts the user's chart
--    result jobs that succeeded without the cache within a window, from `jobs` (which stay when a
--    profile or a result is deleted, so deleting cannot reset the count). The gateway runs it
--    before publishing, the chart-worker before computing and before storing: one query, here.
--    SECURITY INVOKER: each role sees the rows its own policies on `jobs` let it see (the
--    gateway's and the chart-worker's both include these kinds, 0030).
CREATE FUNCTION chart_results_computed(u uuid, window_seconds double precision)
    RETURNS TABLE (computed integer, oldest timestamptz)
    LANGUAGE sql STABLE SECURITY INVOKER
    SET search_path = pg_catalog, public
AS $$
    SELECT count(*)::integer, min(finished_at) FROM jobs
    WHERE user_id = u
        AND kind IN ('chart.synastry', 'chart.transits', 'chart.return', 'chart.render')
        AND status = 'succeeded'
        AND finished_at > now() - make_interval(secs => window_seconds)
        AND result ->> 'cached' = 'false'
$$;
REVOKE EXECUTE ON FUNCTION chart_results_computed(uuid, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION chart_results_computed(uuid, double precision)
    TO astro_gateway, astro_chart_worker, astro_operator;

-- 2. Results nobody reads go sooner: `read_at` is set when `GET /v1/chart-results/{id}` first
--    serves a result (or answers 304 for it); the maintenance task deletes rows still unread
--    after CHART_RESULT_UNREAD_RETENTION (default 2 days), besides those unused for
--    CHART_RESULT_RETENTION. A nullable column without a default: no table rewrite.
ALTER TABLE chart_results ADD COLUMN read_at timestamptz;
CREATE INDEX chart_results_unread_idx ON chart_results (created_at) WHERE read_at IS NULL;
GRANT UPDATE (read_at) ON chart_results TO astro_gateway;
GRANT SELECT (created_at, read_at) ON chart_results TO astro_maintenance;
