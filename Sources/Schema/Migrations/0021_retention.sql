-- Bounded growth (issue 17): `jobs`, `outbox` and the gateway's records grew forever. The
-- `maintenance` task (its own executable, run by cron or a Kubernetes CronJob) deletes what is
-- finished and old, in small batches, as its own role. What that role may delete is decided
-- here, not in its code:
--   * it may delete a `jobs` row only once the job is finished (terminal status, finished_at
--     set) and an `outbox` row only once it is sent: row-level security hides nothing from its
--     reads but refuses every other delete, whatever the statement says;
--   * it has no right at all on the ledger, the purchases, the credits, the reports, the users
--     or the stories: money records and people's data are never deleted by retention;
--   * it reads only the columns its statements need (never a job's result or a message's body).

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'astro_maintenance') THEN
        BEGIN
            CREATE ROLE astro_maintenance NOLOGIN;
        EXCEPTION
        WHEN unique_violation OR duplicate_object THEN
            NULL;
        WHEN insufficient_privilege THEN
            RAISE EXCEPTION 'role astro_maintenance does not exist and % may not create roles', current_user
                USING HINT = 'create the maintenance role first (e.g. CloudNativePG managed roles) '
                    'or migrate as a user with CREATEROLE';
        END;
    END IF;
END
$$;

-- Finished jobs oldest first. jobs.id is a random uuid, so without this index every retention
-- batch would scan the table. Partial: running jobs are not in it.
CREATE INDEX jobs_finished_idx ON jobs (finished_at) WHERE finished_at IS NOT NULL;

-- Retention deletes about a seventh of `jobs` a day (and all but the last day of `outbox`):
-- vacuum them after 5 % of dead rows rather than the default 20 %, so the space of deleted rows
-- is reused before the files grow.
ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);
ALTER TABLE outbox SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);

-- One row per maintenance run: what it deleted per table and which dead letters it dropped, so
-- an operator (and a metrics exporter) can read the history of a task that is not running.
CREATE TABLE maintenance_runs (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at           timestamptz NOT NULL,
    finished_at          timestamptz NOT NULL,
    dry_run              boolean NOT NULL,
    -- {"jobs": 1200, "outbox": 3400, …}: rows deleted (or, for a dry run, that would be).
    deleted              jsonb NOT NULL CHECK (jsonb_typeof(deleted) = 'object'),
    -- {"chart.calculate.dead": {"max-age": 3}}: dead letters dropped per queue and reason.
    dead_letters_dropped jsonb NOT NULL CHECK (jsonb_typeof(dead_letters_dropped) = 'object'),
    -- completed: everything due was done; partial: stopped by its time budget or a lock;
    -- failed: an error ended it (error says which).
    outcome              text NOT NULL CHECK (outcome IN ('completed', 'partial', 'failed')),
    error                text CHECK (char_length(error) <= 2000),
    CHECK (finished_at >= started_at)
);
CREATE INDEX maintenance_runs_started_idx ON maintenance_runs (started_at);

GRANT SELECT ON schema_migrations TO astro_maintenance;
GRANT SELECT, INSERT, DELETE ON maintenance_runs TO astro_maintenance;

GRANT SELECT (id, status, finished_at) ON jobs TO astro_maintenance;
GRANT DELETE ON jobs TO astro_maintenance;
CREATE POLICY jobs_maintenance_read ON jobs FOR SELECT TO astro_maintenance USING (true);
CREATE POLICY jobs_maintenance_delete_finished ON jobs FOR DELETE TO astro_maintenance
    USING (finished_at IS NOT NULL AND status IN ('succeeded', 'failed', 'dead', 'cancelled'));

GRANT SELECT (id, created_at, sent_at) ON outbox TO astro_maintenance;
GRANT DELETE ON outbox TO astro_maintenance;
CREATE POLICY outbox_maintenance_read ON outbox FOR SELECT TO astro_maintenance USING (true);
CREATE POLICY outbox_maintenance_delete_sent ON outbox FOR DELETE TO astro_maintenance
    USING (sent_at IS NOT NULL);

GRANT SELECT (digest, last_delivered_at) ON delivery_counts TO astro_maintenance;
GRANT DELETE ON delivery_counts TO astro_maintenance;
CREATE POLICY delivery_counts_maintenance ON delivery_counts FOR ALL TO astro_maintenance USING (true);

-- The gateway's records: a job's record goes with its job (the gateway then answers 404 for it,
-- and its Idempotency-Key may be used again); refresh tokens and App Attest challenges once
-- expired. These tables have no row-level security.
GRANT SELECT (job_id, created_at, published_at), DELETE ON gateway_jobs TO astro_maintenance;
GRANT SELECT (token_hash, expires_at), DELETE ON gateway_refresh_tokens TO astro_maintenance;
GRANT SELECT (challenge_hash, expires_at), DELETE ON gateway_attest_challenges TO astro_maintenance;

-- Expired refresh tokens are found by their expiry (a device that never comes back leaves one).
CREATE INDEX gateway_refresh_tokens_expiry ON gateway_refresh_tokens (expires_at);
