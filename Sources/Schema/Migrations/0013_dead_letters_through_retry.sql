-- Workers send their dead letters through astro.retry, every pending outbox row has a producer,
-- and refunds queued before this release carry what the billing-worker now checks (issue 14,
-- second pass).
--
-- astro.dlx is a direct exchange, so topic permissions cannot limit its routing keys: any worker
-- allowed to publish its own dead letters there could have put a message into any service's
-- dead-letter queue, from which an operator might replay it. A worker's dead letters now go
-- through astro.retry (a topic exchange; `<queue>.dead` is bound to it with its own name, and
-- each worker may publish only its own queues' names); astro.dlx receives only what the broker
-- itself dead-letters.
--
-- Rows written before migration 0012 have no producer, and every relay claimed them, though
-- only one service's broker user may publish each: the others were refused by the broker and
-- backed off. They get the producer of the job that wrote them (or, without one, of the service
-- whose routing key they carry), and relays now take only their own rows.

UPDATE outbox SET exchange = 'astro.retry' WHERE exchange = 'astro.dlx' AND sent_at IS NULL;

-- A billing.refund-credit written by an earlier report-worker names only the credit and the
-- request; the billing-worker now refuses one that does not also name the user, profile, area
-- and language the credit was spent on. Pending ones are completed from the credit they refund,
-- while it is still spent on that request (otherwise the refund would be refused anyway).
UPDATE outbox AS o SET body = convert_to((b.message || jsonb_build_object(
        'userId', c.user_id, 'profileId', c.user_profile_id,
        'area', c.consumed_area, 'language', c.consumed_language))::text, 'UTF8')
FROM (
    SELECT id, convert_from(body, 'UTF8')::jsonb AS message FROM outbox
    WHERE sent_at IS NULL AND exchange = 'astro.jobs' AND routing_key = 'billing.refund-credit'
) AS b
JOIN purchase_credits AS c ON c.id::text = lower(b.message->>'creditId')
WHERE o.id = b.id AND NOT b.message ? 'userId'
    AND c.consumed_by_job::text = lower(b.message->>'requestJobId');

UPDATE outbox AS o SET producer = CASE
        WHEN j.kind = 'chart.calculate' THEN 'astro_chart_worker'
        WHEN j.kind IN ('billing.verify-purchase', 'report.request', 'billing.refund-credit',
            'billing.store-notification') THEN 'astro_billing_worker'
        WHEN j.kind = 'report.generate' THEN 'astro_report_worker'
        WHEN j.kind IN ('story.generate', 'story.illustrate', 'story.read') THEN 'astro_story_worker'
    END
FROM jobs AS j
WHERE o.producer IS NULL AND o.sent_at IS NULL AND o.job_id = j.id;

UPDATE outbox SET producer = CASE
        WHEN exchange = 'astro.jobs' AND routing_key = 'report.generate' THEN 'astro_billing_worker'
        WHEN exchange = 'astro.jobs' AND routing_key = 'billing.refund-credit' THEN 'astro_report_worker'
        WHEN routing_key LIKE 'chart.%' THEN 'astro_chart_worker'
        WHEN routing_key LIKE 'story.%' OR routing_key LIKE 'achievement.%' THEN 'astro_story_worker'
        WHEN routing_key LIKE 'billing.%' OR routing_key = 'report.request.dead' THEN 'astro_billing_worker'
        WHEN routing_key LIKE 'report.%' THEN 'astro_report_worker'
    END
WHERE producer IS NULL AND sent_at IS NULL;

DROP POLICY outbox_own_rows_read ON outbox;
DROP POLICY outbox_own_rows_relayed ON outbox;
CREATE POLICY outbox_own_rows_read ON outbox FOR SELECT
    TO astro_chart_worker, astro_report_worker, astro_billing_worker, astro_story_worker
    USING (producer = current_user);
CREATE POLICY outbox_own_rows_relayed ON outbox FOR UPDATE
    TO astro_chart_worker, astro_report_worker, astro_billing_worker, astro_story_worker
    USING (producer = current_user);

DROP POLICY outbox_chart_worker_messages ON outbox;
DROP POLICY outbox_billing_worker_messages ON outbox;
DROP POLICY outbox_report_worker_messages ON outbox;
DROP POLICY outbox_story_worker_messages ON outbox;
CREATE POLICY outbox_chart_worker_messages ON outbox FOR INSERT TO astro_chart_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.events' AND routing_key LIKE 'chart.%')
        OR (exchange = 'astro.retry' AND routing_key = 'chart.calculate.dead')));
CREATE POLICY outbox_billing_worker_messages ON outbox FOR INSERT TO astro_billing_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.events' AND (routing_key LIKE 'billing.%' OR routing_key LIKE 'report.%'))
        OR (exchange = 'astro.jobs' AND routing_key = 'report.generate')
        OR (exchange = 'astro.retry' AND routing_key IN ('billing.verify-purchase.dead', 'report.request.dead',
            'billing.refund-credit.dead', 'billing.store-notification.dead'))));
CREATE POLICY outbox_report_worker_messages ON outbox FOR INSERT TO astro_report_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.events' AND routing_key LIKE 'report.%')
        OR (exchange = 'astro.jobs' AND routing_key = 'billing.refund-credit')
        OR (exchange = 'astro.retry' AND routing_key = 'report.generate.dead')));
CREATE POLICY outbox_story_worker_messages ON outbox FOR INSERT TO astro_story_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.events' AND (routing_key LIKE 'story.%' OR routing_key LIKE 'achievement.%'))
        OR (exchange = 'astro.retry' AND routing_key IN ('story.generate.dead', 'story.illustrate.dead',
            'story.read.dead'))));
