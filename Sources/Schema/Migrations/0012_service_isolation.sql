-- Each worker's role writes only its own service's jobs and messages (issue 14).
--
-- Every worker role could insert or rewrite any row of jobs and outbox, and any worker's relay
-- published whatever the outbox held: a compromised chart-worker could have queued a
-- billing.refund-credit for another worker's relay to publish. Now:
--   * an outbox row records its producer (the inserting role), and a worker's relay reads and
--     updates only its own rows (and those written before this migration, which have none), so
--     each service publishes under its own broker user exactly what that user may publish;
--   * a worker may insert only the messages its service produces (its events, follow-up jobs
--     and dead letters), and may not change where a message goes once written;
--   * a worker sees and writes only the jobs rows of its own job types, and counts deliveries
--     only of its own queues.
-- The owner (migrations, astroctl, a development stack where workers run as the owner) is not
-- bound by row-level security.

ALTER TABLE outbox ADD COLUMN producer name;
ALTER TABLE outbox ALTER COLUMN producer SET DEFAULT current_user;

-- Where a message goes and what it says stay as inserted; a relay changes only its progress.
REVOKE UPDATE ON jobs, outbox FROM astro_chart_worker, astro_report_worker, astro_billing_worker, astro_story_worker;
GRANT UPDATE (status, attempts, result, error, user_id, updated_at, finished_at) ON jobs
    TO astro_chart_worker, astro_report_worker, astro_billing_worker, astro_story_worker;
GRANT UPDATE (claimed_until, claimed_by_pid, sent_at, attempts, last_error) ON outbox
    TO astro_chart_worker, astro_report_worker, astro_billing_worker, astro_story_worker;

ALTER TABLE outbox ENABLE ROW LEVEL SECURITY;
CREATE POLICY outbox_own_rows_read ON outbox FOR SELECT
    TO astro_chart_worker, astro_report_worker, astro_billing_worker, astro_story_worker
    USING (producer IS NULL OR producer = current_user);
CREATE POLICY outbox_own_rows_relayed ON outbox FOR UPDATE
    TO astro_chart_worker, astro_report_worker, astro_billing_worker, astro_story_worker
    USING (producer IS NULL OR producer = current_user);
CREATE POLICY outbox_chart_worker_messages ON outbox FOR INSERT TO astro_chart_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.events' AND routing_key LIKE 'chart.%')
        OR (exchange = 'astro.dlx' AND routing_key = 'chart.calculate.dead')));
CREATE POLICY outbox_billing_worker_messages ON outbox FOR INSERT TO astro_billing_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.events' AND (routing_key LIKE 'billing.%' OR routing_key LIKE 'report.%'))
        OR (exchange = 'astro.jobs' AND routing_key = 'report.generate')
        OR (exchange = 'astro.dlx' AND routing_key IN ('billing.verify-purchase.dead', 'report.request.dead',
            'billing.refund-credit.dead', 'billing.store-notification.dead'))));
CREATE POLICY outbox_report_worker_messages ON outbox FOR INSERT TO astro_report_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.events' AND routing_key LIKE 'report.%')
        OR (exchange = 'astro.jobs' AND routing_key = 'billing.refund-credit')
        OR (exchange = 'astro.dlx' AND routing_key = 'report.generate.dead')));
CREATE POLICY outbox_story_worker_messages ON outbox FOR INSERT TO astro_story_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.events' AND (routing_key LIKE 'story.%' OR routing_key LIKE 'achievement.%'))
        OR (exchange = 'astro.dlx' AND routing_key IN ('story.generate.dead', 'story.illustrate.dead',
            'story.read.dead'))));

ALTER TABLE jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY jobs_chart_worker ON jobs TO astro_chart_worker
    USING (kind = 'chart.calculate') WITH CHECK (kind = 'chart.calculate');
CREATE POLICY jobs_billing_worker ON jobs TO astro_billing_worker
    USING (kind IN ('billing.verify-purchase', 'report.request', 'billing.refund-credit', 'billing.store-notification'))
    WITH CHECK (kind IN ('billing.verify-purchase', 'report.request', 'billing.refund-credit',
        'billing.store-notification'));
CREATE POLICY jobs_report_worker ON jobs TO astro_report_worker
    USING (kind = 'report.generate') WITH CHECK (kind = 'report.generate');
CREATE POLICY jobs_story_worker ON jobs TO astro_story_worker
    USING (kind IN ('story.generate', 'story.illustrate', 'story.read'))
    WITH CHECK (kind IN ('story.generate', 'story.illustrate', 'story.read'));

ALTER TABLE delivery_counts ENABLE ROW LEVEL SECURITY;
CREATE POLICY delivery_counts_chart_worker ON delivery_counts TO astro_chart_worker
    USING (queue = 'chart.calculate') WITH CHECK (queue = 'chart.calculate');
CREATE POLICY delivery_counts_billing_worker ON delivery_counts TO astro_billing_worker
    USING (queue IN ('billing.verify-purchase', 'report.request', 'billing.refund-credit', 'billing.store-notification'))
    WITH CHECK (queue IN ('billing.verify-purchase', 'report.request', 'billing.refund-credit',
        'billing.store-notification'));
CREATE POLICY delivery_counts_report_worker ON delivery_counts TO astro_report_worker
    USING (queue = 'report.generate') WITH CHECK (queue = 'report.generate');
CREATE POLICY delivery_counts_story_worker ON delivery_counts TO astro_story_worker
    USING (queue IN ('story.generate', 'story.illustrate', 'story.read'))
    WITH CHECK (queue IN ('story.generate', 'story.illustrate', 'story.read'));
