-- Retention's deletions and the dead letters it drops as metrics (issue 17). The maintenance task
-- is a short CronJob run that no Prometheus scrape can reliably catch, so a long-running process
-- (the billing-worker's `maintenance` probe) exports what the task recorded. Summing
-- maintenance_runs would not do for a counter: retention deletes its own history after 90 days,
-- and the sum would go down. So every recorded run also adds to running totals here, in the same
-- transaction (a trigger), which only ever grow: the exported counters are exact, survive a
-- restart of the exporter, and every replica exports the same value.

CREATE TABLE maintenance_totals (
    -- deleted_rows: subject = table; dead_letters_dropped: subject = queue, reason = why;
    -- runs: subject = outcome.
    counter     text NOT NULL CHECK (counter IN ('deleted_rows', 'dead_letters_dropped', 'runs')),
    subject     text NOT NULL CHECK (char_length(subject) BETWEEN 1 AND 255),
    reason      text NOT NULL DEFAULT '' CHECK (char_length(reason) <= 100),
    total       bigint NOT NULL DEFAULT 0 CHECK (total >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (counter, subject, reason)
);

-- Adds one run to the totals. A dry run deleted and dropped nothing: it counts nowhere. Only
-- non-negative numbers count (the task writes whole counts; anything else is ignored).
CREATE FUNCTION maintenance_runs_add_to_totals() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.dry_run THEN
        RETURN NEW;
    END IF;
    INSERT INTO maintenance_totals AS t (counter, subject, reason, total)
    SELECT 'deleted_rows', left(d.key, 255), '', trunc((d.value #>> '{}')::numeric)::bigint
    FROM jsonb_each(NEW.deleted) AS d
    WHERE jsonb_typeof(d.value) = 'number' AND (d.value #>> '{}')::numeric > 0 AND d.key <> ''
    ON CONFLICT (counter, subject, reason) DO UPDATE SET total = t.total + excluded.total, updated_at = now();
    INSERT INTO maintenance_totals AS t (counter, subject, reason, total)
    SELECT 'dead_letters_dropped', left(q.key, 255), left(r.key, 100), trunc((r.value #>> '{}')::numeric)::bigint
    FROM jsonb_each(NEW.dead_letters_dropped) AS q, jsonb_each(q.value) AS r
    WHERE jsonb_typeof(q.value) = 'object' AND jsonb_typeof(r.value) = 'number'
        AND (r.value #>> '{}')::numeric > 0 AND q.key <> ''
    ON CONFLICT (counter, subject, reason) DO UPDATE SET total = t.total + excluded.total, updated_at = now();
    INSERT INTO maintenance_totals AS t (counter, subject, reason, total)
    VALUES ('runs', NEW.outcome, '', 1)
    ON CONFLICT (counter, subject, reason) DO UPDATE SET total = t.total + 1, updated_at = now();
    RETURN NEW;
END
$$;

CREATE TRIGGER maintenance_runs_totals AFTER INSERT ON maintenance_runs
    FOR EACH ROW EXECUTE FUNCTION maintenance_runs_add_to_totals();

-- The runs recorded before this migration count too.
INSERT INTO maintenance_totals (counter, subject, reason, total)
SELECT 'deleted_rows', left(d.key, 255), '', sum(trunc((d.value #>> '{}')::numeric))::bigint
FROM maintenance_runs AS m, jsonb_each(m.deleted) AS d
WHERE NOT m.dry_run AND jsonb_typeof(d.value) = 'number' AND (d.value #>> '{}')::numeric > 0 AND d.key <> ''
GROUP BY 2;
INSERT INTO maintenance_totals (counter, subject, reason, total)
SELECT 'dead_letters_dropped', left(q.key, 255), left(r.key, 100), sum(trunc((r.value #>> '{}')::numeric))::bigint
FROM maintenance_runs AS m, jsonb_each(m.dead_letters_dropped) AS q, jsonb_each(q.value) AS r
WHERE NOT m.dry_run AND jsonb_typeof(q.value) = 'object' AND jsonb_typeof(r.value) = 'number'
    AND (r.value #>> '{}')::numeric > 0 AND q.key <> ''
GROUP BY 2, 3;
INSERT INTO maintenance_totals (counter, subject, reason, total)
SELECT 'runs', outcome, '', count(*) FROM maintenance_runs WHERE NOT dry_run GROUP BY outcome;

-- The trigger runs as the role that records the run (astro_maintenance).
GRANT SELECT, INSERT, UPDATE ON maintenance_totals TO astro_maintenance;

-- The exporter: the billing-worker reads the totals and when the last run finished, nothing else
-- of the task's history (not the errors, not which jobs were dropped).
GRANT SELECT ON maintenance_totals TO astro_billing_worker;
GRANT SELECT (finished_at, dry_run, outcome) ON maintenance_runs TO astro_billing_worker;
-- The last successful run is found by finished_at without reading the whole history.
CREATE INDEX maintenance_runs_finished_idx ON maintenance_runs (finished_at) WHERE NOT dry_run AND outcome <> 'failed';
