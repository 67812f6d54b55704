-- Operator actions on jobs (issue 17): dead letters re-driven or purged, jobs cancelled before
-- they start. Every such action is recorded, and astroctl does them through a role of its own
-- with only the grants they need (not the schema owner).

-- A job cancelled before it started. Terminal, like succeeded/failed/dead: a worker that later
-- receives the job's message acknowledges it without running the handler.
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
    CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'dead', 'cancelled'));
ALTER TABLE jobs DROP CONSTRAINT jobs_finished_when_terminal;
ALTER TABLE jobs ADD CONSTRAINT jobs_finished_when_terminal CHECK (
    (status IN ('succeeded', 'failed', 'dead', 'cancelled')) = (finished_at IS NOT NULL)
);

-- Who did what to which job or queue, when, why and with what outcome. Append-only except for
-- the outcome of an action that is carried out in steps (a replay: recorded `pending` before the
-- job is republished, then `done`), so an action interrupted halfway is visible and resumable.
CREATE TABLE operator_actions (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    operator      text NOT NULL CHECK (char_length(operator) BETWEEN 1 AND 100),
    action        text NOT NULL CHECK (action IN ('dead.replay', 'dead.purge', 'job.cancel')),
    job_id        uuid,
    queue         text CHECK (char_length(queue) <= 255),
    reason        text CHECK (char_length(reason) <= 500),
    outcome       text NOT NULL CHECK (outcome IN ('pending', 'done', 'skipped', 'refused')),
    detail        jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    completed_at  timestamptz
);
CREATE INDEX operator_actions_job ON operator_actions (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX operator_actions_created ON operator_actions (created_at);

-- astroctl's role for operator actions. NOLOGIN until `astroctl migrate` is given
-- OPERATOR_DB_PASSWORD (or the platform creates it).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'astro_operator') THEN
        BEGIN
            CREATE ROLE astro_operator NOLOGIN;
        EXCEPTION
        WHEN unique_violation OR duplicate_object THEN
            NULL;
        END;
    END IF;
END
$$;

GRANT SELECT ON schema_migrations TO astro_operator;
-- Read every job; insert a cancelled job's row when none exists yet; change only the status
-- fields (never kind or id), for a replay (dead → queued) and a cancel (queued → cancelled).
GRANT SELECT, INSERT ON jobs TO astro_operator;
GRANT UPDATE (status, attempts, result, error, updated_at, finished_at) ON jobs TO astro_operator;
CREATE POLICY jobs_operator ON jobs TO astro_operator USING (true) WITH CHECK (true);
-- The kind of a job the gateway published but no worker has claimed yet.
GRANT SELECT (job_id, kind, user_id) ON gateway_jobs TO astro_operator;
-- A replayed job starts its delivery count afresh.
GRANT SELECT, DELETE ON delivery_counts TO astro_operator;
CREATE POLICY delivery_counts_operator ON delivery_counts TO astro_operator USING (true);
GRANT SELECT, INSERT ON operator_actions TO astro_operator;
GRANT UPDATE (outcome, detail, completed_at) ON operator_actions TO astro_operator;
