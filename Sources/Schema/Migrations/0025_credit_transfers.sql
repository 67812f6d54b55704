-- Restore on a new device (issue 18, part 2). A user who reinstalls the app gets a new anonymous
-- id; the StoreKit transaction they restore still carries the old id as its appAccountToken. A
-- verified signed transaction, sent with an explicit restore request, moves the purchase's
-- unspent credits from whoever holds them to the caller. Spent credits, their reports and the
-- purchase record (who bought it) stay where they are.

-- One row per (purchase, receiving user): a transfer happens at most once per new owner of a
-- purchase, so any number of redeliveries or repeated restores can never move (or duplicate)
-- a credit twice. The purchase is named by its granting record's transaction id.
CREATE TABLE credit_transfers (
    id                       uuid PRIMARY KEY,
    transaction_id           text NOT NULL REFERENCES purchase_records (transaction_id),
    -- The signed transaction the caller presented (the purchase itself, or a restore of it).
    presented_transaction_id text NOT NULL CHECK (presented_transaction_id <> ''),
    to_user_id               uuid NOT NULL REFERENCES users (id) ON DELETE RESTRICT,
    -- Credits moved (a transfer that would move none is refused, not recorded).
    credits                  integer NOT NULL CHECK (credits > 0),
    job_id                   uuid NOT NULL,
    created_at               timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT credit_transfers_once_per_purchase_and_user UNIQUE (transaction_id, to_user_id)
);
CREATE INDEX credit_transfers_to_user_idx ON credit_transfers (to_user_id);

-- A transfer writes two entries per credit: `transferred` out of the old holder (a debit) and
-- `transferred` into the new one (a credit), both naming the transfer and the transaction.
ALTER TABLE credit_ledger
    ADD COLUMN transfer_id        uuid REFERENCES credit_transfers (id),
    ADD COLUMN transfer_direction text CHECK (transfer_direction IN ('out', 'in'));
ALTER TABLE credit_ledger DROP CONSTRAINT credit_ledger_entry_check;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_entry_check CHECK (entry IN (
    'issued', 'consumed', 'refunded', 'revoked', 'restored', 'debt', 'debt-cleared', 'transferred'
));
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_transfer_named CHECK (
    (entry = 'transferred') = (transfer_id IS NOT NULL)
    AND (transfer_id IS NULL) = (transfer_direction IS NULL)
);
-- Each credit leaves and enters once per transfer, whatever the code does.
CREATE UNIQUE INDEX credit_ledger_one_move_per_transfer
    ON credit_ledger (transfer_id, credit_id, transfer_direction) WHERE transfer_id IS NOT NULL;

-- The audit: issued − consumed + refunded − revoked + restored + transferred in − transferred
-- out = available, per user. The existing columns keep their names and order (CREATE OR
-- REPLACE VIEW may only append), the transfer counts come last.
CREATE OR REPLACE VIEW credit_audit AS
SELECT u.id AS user_id,
       coalesce(l.issued, 0) AS issued,
       coalesce(l.consumed, 0) AS consumed,
       coalesce(l.refunded, 0) AS refunded,
       coalesce(l.revoked, 0) AS revoked,
       coalesce(l.restored, 0) AS restored,
       coalesce(l.debts, 0) - coalesce(l.debts_cleared, 0) AS open_debts,
       coalesce(l.issued, 0) - coalesce(l.consumed, 0) + coalesce(l.refunded, 0)
           - coalesce(l.revoked, 0) + coalesce(l.restored, 0)
           + coalesce(l.transferred_in, 0) - coalesce(l.transferred_out, 0) AS ledger_available,
       coalesce(c.available, 0) AS available,
       coalesce(l.transferred_in, 0) AS transferred_in,
       coalesce(l.transferred_out, 0) AS transferred_out
FROM users u
LEFT JOIN (
    SELECT user_id,
           count(*) FILTER (WHERE entry = 'issued') AS issued,
           count(*) FILTER (WHERE entry = 'consumed') AS consumed,
           count(*) FILTER (WHERE entry = 'refunded') AS refunded,
           count(*) FILTER (WHERE entry = 'revoked') AS revoked,
           count(*) FILTER (WHERE entry = 'restored') AS restored,
           count(*) FILTER (WHERE entry = 'debt') AS debts,
           count(*) FILTER (WHERE entry = 'debt-cleared') AS debts_cleared,
           count(*) FILTER (WHERE entry = 'transferred' AND transfer_direction = 'in') AS transferred_in,
           count(*) FILTER (WHERE entry = 'transferred' AND transfer_direction = 'out') AS transferred_out
    FROM credit_ledger GROUP BY user_id
) l ON l.user_id = u.id
LEFT JOIN (
    SELECT user_id, count(*) AS available
    FROM purchase_credits WHERE NOT consumed AND NOT revoked GROUP BY user_id
) c ON c.user_id = u.id;

-- The billing-worker records transfers. The gateway's ledger (GET /v1/ledger) needs nothing new:
-- a `transferred` entry's reason says which way it went.
GRANT SELECT, INSERT ON credit_transfers TO astro_billing_worker;
