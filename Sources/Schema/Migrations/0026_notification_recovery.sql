-- Missed App Store notifications (issue 18, part 4).
--
-- A billing.recover-notifications job reads Apple's notification history for a window and
-- applies the notifications never received (deduplicated by notification_uuid in
-- store_notifications, as live ones are). Each finished window is recorded here: the newest
-- window_end is the high-water mark the billing-worker starts the next recovery from after a
-- restart. Policies are added beside the existing ones (permissive policies are OR'ed), so the
-- job types of other migrations stay as they are.

CREATE TABLE store_notification_recoveries (
    job_id        uuid PRIMARY KEY,
    trigger       text NOT NULL CHECK (trigger IN ('start-up', 'operator')),
    window_start  timestamptz NOT NULL,
    window_end    timestamptz NOT NULL,
    pages         integer NOT NULL CHECK (pages >= 0),
    fetched       integer NOT NULL CHECK (fetched >= 0),
    applied       integer NOT NULL CHECK (applied >= 0),
    already_seen  integer NOT NULL CHECK (already_seen >= 0),
    rejected      integer NOT NULL CHECK (rejected >= 0),
    finished_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT store_notification_recoveries_window CHECK (window_start < window_end),
    CONSTRAINT store_notification_recoveries_counts CHECK (applied + already_seen + rejected = fetched)
);
CREATE INDEX store_notification_recoveries_end_idx ON store_notification_recoveries (window_end);

GRANT SELECT, INSERT ON store_notification_recoveries TO astro_billing_worker;

CREATE POLICY jobs_billing_worker_recovery ON jobs TO astro_billing_worker
    USING (kind = 'billing.recover-notifications') WITH CHECK (kind = 'billing.recover-notifications');
CREATE POLICY delivery_counts_billing_worker_recovery ON delivery_counts TO astro_billing_worker
    USING (queue = 'billing.recover-notifications') WITH CHECK (queue = 'billing.recover-notifications');
-- The start-up recovery it schedules, and the job's own dead letters.
CREATE POLICY outbox_billing_worker_recovery ON outbox FOR INSERT TO astro_billing_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.jobs' AND routing_key = 'billing.recover-notifications')
        OR (exchange = 'astro.retry' AND routing_key = 'billing.recover-notifications.dead')));
