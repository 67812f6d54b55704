-- Billing: the append-only credit ledger, App Store notifications, and what consumption must
-- know to stay safe under concurrency (issue 4).

-- A purchase keeps the verified transaction it came from, for audits and for answering Apple's
-- consumption requests; a restore of an earlier purchase is recorded but grants nothing new.
ALTER TABLE purchase_records
    ADD COLUMN transaction_payload jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN product_type        text,
    ADD COLUMN verified_by_job     uuid,
    ADD COLUMN restored_from       text REFERENCES purchase_records (transaction_id);
ALTER TABLE purchase_records DROP CONSTRAINT purchase_records_credit_amount_check;
ALTER TABLE purchase_records ADD CONSTRAINT purchase_records_credit_amount_check
    CHECK (credit_amount > 0 OR (credit_amount = 0 AND restored_date IS NOT NULL));
ALTER TABLE purchase_records ADD CONSTRAINT purchase_records_restore_consistent
    CHECK ((restored_from IS NULL) = (restored_date IS NULL));

-- What a credit was spent on. At most one live consumption per (profile, area, language): a
-- double tap on "buy report" can never spend two credits on one report.
ALTER TABLE purchase_credits
    ADD COLUMN consumed_area     text CHECK (consumed_area IN ('finances', 'career', 'relationships', 'health', 'general')),
    ADD COLUMN consumed_language text CHECK (consumed_language IN ('en', 'uk'));
ALTER TABLE purchase_credits ADD CONSTRAINT purchase_credits_consumed_for_consistent CHECK (
    (consumed AND consumed_area IS NOT NULL AND consumed_language IS NOT NULL AND consumed_by_job IS NOT NULL)
    OR (NOT consumed AND consumed_area IS NULL AND consumed_language IS NULL)
);
-- An area credit can only be spent on its own area.
ALTER TABLE purchase_credits ADD CONSTRAINT purchase_credits_area_respected
    CHECK (NOT consumed OR report_area IS NULL OR report_area = consumed_area);
-- A revoked credit cannot be spent; a spent one is never revoked (it becomes a debt instead).
ALTER TABLE purchase_credits ADD CONSTRAINT purchase_credits_not_both_revoked_and_consumed
    CHECK (NOT (revoked AND consumed));
CREATE UNIQUE INDEX purchase_credits_one_live_consumption_per_report
    ON purchase_credits (user_profile_id, consumed_area, consumed_language) WHERE consumed;
-- Any-area credits in spending order. `report_area IS NULL` gives the planner no order on the
-- v1 index, so without this one each request sorted all of a user's any-area credits.
CREATE INDEX purchase_credits_available_any_area_idx ON purchase_credits (user_id, purchase_date, id)
    WHERE NOT consumed AND NOT revoked AND report_area IS NULL;

-- Every movement of every credit, appended, never changed: issued − consumed + refunded −
-- revoked + restored = available, per user, at any time (the credit_audit view checks it).
CREATE TABLE credit_ledger (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id           uuid NOT NULL REFERENCES users (id) ON DELETE RESTRICT,
    credit_id         uuid NOT NULL REFERENCES purchase_credits (id) ON DELETE RESTRICT,
    transaction_id    text NOT NULL,
    entry             text NOT NULL CHECK (entry IN (
        'issued', 'consumed', 'refunded', 'revoked', 'restored', 'debt', 'debt-cleared'
    )),
    -- The job that caused the movement (verify, request, refund or notification job).
    job_id            uuid NOT NULL,
    -- For 'consumed' and 'refunded': the consumption (the report.request job) concerned.
    consumption_job   uuid,
    profile_id        uuid,
    report_area       text,
    report_language   text,
    notification_uuid uuid,
    reason            text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT credit_ledger_consumption_named CHECK (
        entry NOT IN ('consumed', 'refunded') OR consumption_job IS NOT NULL
    )
);
CREATE INDEX credit_ledger_user_idx ON credit_ledger (user_id, id);
CREATE INDEX credit_ledger_credit_idx ON credit_ledger (credit_id, id);
-- Each consumption is consumed once and refunded at most once, whatever redeliveries happen.
CREATE UNIQUE INDEX credit_ledger_one_entry_per_consumption
    ON credit_ledger (consumption_job, entry) WHERE consumption_job IS NOT NULL;
CREATE UNIQUE INDEX credit_ledger_one_issue_per_credit ON credit_ledger (credit_id) WHERE entry = 'issued';

CREATE FUNCTION credit_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'credit_ledger is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER credit_ledger_no_update_or_delete
    BEFORE UPDATE OR DELETE ON credit_ledger
    FOR EACH ROW EXECUTE FUNCTION credit_ledger_append_only();

-- Per user: what the ledger says is available next to what the credits table says.
CREATE VIEW credit_audit AS
SELECT u.id AS user_id,
       coalesce(l.issued, 0) AS issued,
       coalesce(l.consumed, 0) AS consumed,
       coalesce(l.refunded, 0) AS refunded,
       coalesce(l.revoked, 0) AS revoked,
       coalesce(l.restored, 0) AS restored,
       coalesce(l.debts, 0) - coalesce(l.debts_cleared, 0) AS open_debts,
       coalesce(l.issued, 0) - coalesce(l.consumed, 0) + coalesce(l.refunded, 0)
           - coalesce(l.revoked, 0) + coalesce(l.restored, 0) AS ledger_available,
       coalesce(c.available, 0) AS available
FROM users u
LEFT JOIN (
    SELECT user_id,
           count(*) FILTER (WHERE entry = 'issued') AS issued,
           count(*) FILTER (WHERE entry = 'consumed') AS consumed,
           count(*) FILTER (WHERE entry = 'refunded') AS refunded,
           count(*) FILTER (WHERE entry = 'revoked') AS revoked,
           count(*) FILTER (WHERE entry = 'restored') AS restored,
           count(*) FILTER (WHERE entry = 'debt') AS debts,
           count(*) FILTER (WHERE entry = 'debt-cleared') AS debts_cleared
    FROM credit_ledger GROUP BY user_id
) l ON l.user_id = u.id
LEFT JOIN (
    SELECT user_id, count(*) AS available
    FROM purchase_credits WHERE NOT consumed AND NOT revoked GROUP BY user_id
) c ON c.user_id = u.id;

-- App Store Server Notifications V2, once each (Apple retries until it gets a 200).
CREATE TABLE store_notifications (
    notification_uuid       uuid PRIMARY KEY,
    notification_type       text NOT NULL CHECK (notification_type <> ''),
    subtype                 text,
    transaction_id          text,
    original_transaction_id text,
    environment             text,
    signed_date             timestamptz,
    -- The verified, decoded notification and its transaction.
    payload                 jsonb NOT NULL,
    transaction_payload     jsonb,
    -- What this service did about it (revoked/restored credit ids, debts, or why nothing).
    outcome                 jsonb NOT NULL,
    -- For CONSUMPTION_REQUEST: the body of Apple's Send Consumption Information request.
    consumption_info        jsonb,
    consumption_sent_at     timestamptz,
    job_id                  uuid NOT NULL,
    received_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX store_notifications_transaction_idx ON store_notifications (transaction_id);
