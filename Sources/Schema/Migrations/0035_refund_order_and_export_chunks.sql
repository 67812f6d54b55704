-- Issue 29: refund notifications applied by signedDate (F9), and exports stored in chunks that
-- the gateway streams (F8).

-- F9. A purchase's refund state is the latest REFUND, REVOKE or REFUND_REVERSED about any of its
-- transactions by signedDate (NotificationLedger.applyRefundState), looked up by the purchase's
-- original transaction under the purchase's lock, by every refund notification and every new
-- purchase. A transaction without an original is its own (as purchases are recorded); rows
-- stored before this migration without one get it here.
UPDATE store_notifications SET original_transaction_id = transaction_id
WHERE original_transaction_id IS NULL AND transaction_id IS NOT NULL;
CREATE INDEX store_notifications_refund_state_idx ON store_notifications (original_transaction_id)
    WHERE notification_type IN ('REFUND', 'REVOKE', 'REFUND_REVERSED');
