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

-- F8. An export's zip in chunks of at most 1 MiB (UserExport.chunkBytes), in order by `seq`,
-- instead of one bytea: the gateway reads and sends one chunk at a time (a 100 MiB download held
-- about 600–800 MiB of gateway memory, the hex text of the whole value and its copies), and no
-- value nears PostgreSQL's 1 GB field limit (the hex text of a 512 MiB zip passed it). EXTERNAL:
-- a zip does not compress, so PostgreSQL does not try. `user_exports.bytes` is the sum of the
-- chunks' lengths; the chunks are written with it, in the pack's transaction.
CREATE TABLE user_export_chunks (
    export_id  uuid NOT NULL REFERENCES user_exports (id) ON DELETE CASCADE,
    seq        integer NOT NULL CHECK (seq >= 0),
    data       bytea NOT NULL CHECK (octet_length(data) BETWEEN 1 AND 1048576),
    PRIMARY KEY (export_id, seq)
);
ALTER TABLE user_export_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
INSERT INTO user_export_chunks (export_id, seq, data)
SELECT e.id, s.seq, substring(e.zip FROM s.seq * 1048576 + 1 FOR 1048576)
FROM user_exports AS e, generate_series(0, (octet_length(e.zip) - 1) / 1048576) AS s (seq)
WHERE octet_length(e.zip) > 0;
ALTER TABLE user_exports DROP CONSTRAINT user_exports_ready_together;
ALTER TABLE user_exports DROP COLUMN zip;
ALTER TABLE user_exports ADD CONSTRAINT user_exports_ready_together
    CHECK ((ready_at IS NULL) = (expires_at IS NULL) AND (ready_at IS NULL) = (bytes IS NULL));

-- The billing-worker writes the chunks (user.delete and retention remove them with their
-- export); the gateway and the operator (astroctl user export) read them.
GRANT SELECT, INSERT ON user_export_chunks TO astro_billing_worker;
GRANT SELECT ON user_export_chunks TO astro_gateway, astro_operator;

-- The user's chunks are in the export document as the other tables holding a user's rows are
-- (sizes, not the bytes). Patched into the current definition rather than restated, so that a
-- section another migration added is kept.
DO $$
DECLARE
    definition text := pg_get_functiondef('user_export_document(uuid)'::regprocedure);
    anchor text := '(''user_export_files'', ';
BEGIN
    IF position(anchor IN definition) = 0 THEN
        RAISE EXCEPTION 'user_export_document has no user_export_files section to add user_export_chunks before';
    END IF;
    IF position('user_export_chunks' IN definition) = 0 THEN
        EXECUTE replace(definition, anchor,
            '(''user_export_chunks'', ''SELECT jsonb_build_object(''''export_id'''', t.export_id, ''''seq'''', t.seq,
            ''''bytes'''', octet_length(t.data)) FROM user_export_chunks t
            JOIN user_exports e ON e.id = t.export_id WHERE e.user_id = $1 ORDER BY t.export_id, t.seq''),
        ' || anchor);
    END IF;
END
$$;
