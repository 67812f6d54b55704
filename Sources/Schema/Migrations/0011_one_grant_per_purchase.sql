-- One purchase, one grant (issue 14). A restore of a non-consumable (a new transaction id with
-- the original's id in original_transaction_id) that reached us before the original purchase
-- granted credits, and so did the original when it came: two grants for one payment. The
-- billing-worker now serializes the transactions of one original purchase on an advisory lock
-- and records every one but the first as a restore; this index makes a second grant impossible
-- whatever the code does.
DO $$
DECLARE
    doubled text;
BEGIN
    SELECT string_agg(original_transaction_id, ', ') INTO doubled FROM (
        SELECT original_transaction_id FROM purchase_records
        WHERE restored_from IS NULL GROUP BY original_transaction_id HAVING count(*) > 1 LIMIT 20
    ) AS d;
    IF doubled IS NOT NULL THEN
        RAISE EXCEPTION 'these original transactions were granted more than once: %', doubled
            USING HINT = 'review them (astroctl billing ledger --user …), revoke the extra credits and set '
                'restored_from on the later record, then migrate again';
    END IF;
END
$$;

CREATE UNIQUE INDEX purchase_records_one_grant_per_original
    ON purchase_records (original_transaction_id) WHERE restored_from IS NULL;
