-- Least privilege (issue 6): each worker connects as its own role with only the grants its
-- jobs need. Only the billing-worker may change the credit tables; the report-worker reads
-- charts and credits and writes reports; the chart-worker writes users, profiles and charts.
-- The roles start without LOGIN: `astroctl migrate` gives them a password from
-- CHART_WORKER_DB_PASSWORD, REPORT_WORKER_DB_PASSWORD and BILLING_WORKER_DB_PASSWORD, or the
-- platform creates them beforehand (CloudNativePG managed roles), which this script accepts.
-- Every later migration grants what it adds.

DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['astro_chart_worker', 'astro_report_worker', 'astro_billing_worker'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = name) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', name);
            EXCEPTION
            -- Roles belong to the cluster: a migration of another database may create it meanwhile.
            WHEN unique_violation OR duplicate_object THEN
                NULL;
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'role % does not exist and % may not create roles', name, current_user
                    USING HINT = 'create the three worker roles first (e.g. CloudNativePG managed roles) '
                        'or migrate as a user with CREATEROLE';
            END;
        END IF;
    END LOOP;
END
$$;

-- A refund and the writing of the report it would cancel must not interleave: the
-- report-worker holds this lock shared while it stores a report paid by the credit, the
-- billing-worker holds it exclusively while it refunds the credit. An advisory lock, not
-- SELECT … FOR SHARE, so the report-worker needs no UPDATE right on purchase_credits.
CREATE FUNCTION credit_lock_key(credit uuid) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN hashtextextended('credit:' || credit::text, 11);

-- The runtime of every worker: the job log, the outbox, and which migrations are applied.
GRANT SELECT, INSERT, UPDATE ON jobs, outbox TO astro_chart_worker, astro_report_worker, astro_billing_worker;
GRANT SELECT ON schema_migrations TO astro_chart_worker, astro_report_worker, astro_billing_worker;

GRANT SELECT, INSERT, UPDATE ON users, user_profiles, birth_charts TO astro_chart_worker;

GRANT SELECT ON birth_charts, purchase_credits, purchase_records, report_purchases TO astro_report_worker;
GRANT INSERT ON report_purchases TO astro_report_worker;

GRANT SELECT, INSERT ON users TO astro_billing_worker;
GRANT SELECT ON user_profiles, birth_charts, report_purchases, credit_audit TO astro_billing_worker;
GRANT SELECT, INSERT, UPDATE ON purchase_records, purchase_credits, store_notifications TO astro_billing_worker;
-- The ledger is append-only (a trigger refuses UPDATE and DELETE even to the owner).
GRANT SELECT, INSERT ON credit_ledger TO astro_billing_worker;
