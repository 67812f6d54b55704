-- Send Consumption Information (issue 18, part 1). A CONSUMPTION_REQUEST used to be stored with
-- an answer in the retired V1 field set and never sent. Now:
--   * the user's consent is recorded through the gateway (PUT /v1/consent), one row per answer,
--     never updated, so what the user agreed to, to which text and when stays auditable; the
--     latest row of a user is their current answer;
--   * each request gets one answer row per transaction (a second request for the same
--     transaction is not answered twice), computed from the ledger's facts in the transaction
--     that records the notification, and a `billing.send-consumption` job sends it;
--   * the row moves pending -> sent | declined-no-consent | failed, never back, and keeps
--     Apple's answer (status, error code, time).

CREATE TABLE consumption_consents (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    consented     boolean NOT NULL,
    -- The version of the consent text the app showed (e.g. "2026-01"), as the app names it.
    text_version  text NOT NULL CHECK (text_version ~ '^[A-Za-z0-9._-]{1,32}$'),
    -- When the user answered, as the app reports it (checked against the server's clock).
    answered_at   timestamptz NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT now()
);
-- The current answer is the latest row of a user.
CREATE INDEX consumption_consents_user_idx ON consumption_consents (user_id, id DESC);

CREATE TABLE consumption_answers (
    -- The CONSUMPTION_REQUEST that asked.
    notification_uuid uuid PRIMARY KEY REFERENCES store_notifications (notification_uuid),
    -- One answer per transaction: a second request for it is recorded on its notification only.
    transaction_id    text NOT NULL UNIQUE CHECK (transaction_id ~ '^[0-9]{1,64}$'),
    user_id           uuid,
    state             text NOT NULL CHECK (state IN ('pending', 'sent', 'declined-no-consent', 'failed')),
    -- The ConsumptionRequest body (App Store Server API 1.19+), as computed.
    request_body      jsonb NOT NULL CHECK (jsonb_typeof(request_body) = 'object'),
    -- The ledger facts it was computed from (credits, spent, delivered, returned) and the policy.
    facts             jsonb NOT NULL CHECK (jsonb_typeof(facts) = 'object'),
    -- Why nothing was sent, or why Apple refused it.
    reason            text CHECK (char_length(reason) <= 2000),
    consent_id        bigint REFERENCES consumption_consents (id),
    job_id            uuid NOT NULL,
    apple_status      integer,
    apple_error_code  bigint,
    attempts          integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    sent_at           timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CHECK ((state = 'sent') = (sent_at IS NOT NULL)),
    CHECK (state = 'pending' OR reason IS NOT NULL OR state = 'sent')
);
CREATE INDEX consumption_answers_pending_idx ON consumption_answers (created_at) WHERE state = 'pending';

-- The gateway records and reads the caller's consent (its statements name the caller).
GRANT SELECT, INSERT ON consumption_consents TO astro_gateway;
-- The billing-worker reads consent and writes the answers.
GRANT SELECT ON consumption_consents TO astro_billing_worker;
GRANT SELECT, INSERT, UPDATE ON consumption_answers TO astro_billing_worker;

-- The billing-worker runs and publishes the new job type: its rows of jobs and delivery_counts,
-- and its outbox messages (0012, 0013), now include billing.send-consumption.
DROP POLICY jobs_billing_worker ON jobs;
CREATE POLICY jobs_billing_worker ON jobs TO astro_billing_worker
    USING (kind IN ('billing.verify-purchase', 'report.request', 'billing.refund-credit', 'billing.store-notification',
        'billing.send-consumption'))
    WITH CHECK (kind IN ('billing.verify-purchase', 'report.request', 'billing.refund-credit',
        'billing.store-notification', 'billing.send-consumption'));
DROP POLICY delivery_counts_billing_worker ON delivery_counts;
CREATE POLICY delivery_counts_billing_worker ON delivery_counts TO astro_billing_worker
    USING (queue IN ('billing.verify-purchase', 'report.request', 'billing.refund-credit', 'billing.store-notification',
        'billing.send-consumption'))
    WITH CHECK (queue IN ('billing.verify-purchase', 'report.request', 'billing.refund-credit',
        'billing.store-notification', 'billing.send-consumption'));
DROP POLICY outbox_billing_worker_messages ON outbox;
CREATE POLICY outbox_billing_worker_messages ON outbox FOR INSERT TO astro_billing_worker
    WITH CHECK (producer = current_user AND (
        (exchange = 'astro.events' AND (routing_key LIKE 'billing.%' OR routing_key LIKE 'report.%'))
        OR (exchange = 'astro.jobs' AND routing_key IN ('report.generate', 'billing.send-consumption'))
        OR (exchange = 'astro.retry' AND routing_key IN ('billing.verify-purchase.dead', 'report.request.dead',
            'billing.refund-credit.dead', 'billing.store-notification.dead', 'billing.send-consumption.dead'))));
