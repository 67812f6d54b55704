-- Reports for two (issue 20, part 7; CONTRACT.md "Reports for two"): a relationships report may
-- name a partner profile of the same user, and is then a different report from the one about
-- the profile alone. PostgreSQL 15 (docker-compose, stack.sh): NULLS NOT DISTINCT makes "no
-- partner" one value, so the old one-report rule still holds for reports without a partner.

-- The partner of a report for two. ON DELETE CASCADE, as for the profile itself: the report
-- quotes the partner's placements, which are the partner profile's personal data, so deleting
-- either profile deletes it (setting the link NULL would also turn it into a second "report
-- about the profile alone", colliding with the real one under the rule below).
ALTER TABLE report_purchases
    ADD COLUMN partner_profile_id uuid REFERENCES user_profiles (id) ON DELETE CASCADE,
    ADD CONSTRAINT report_purchases_partner_for_relationships CHECK (
        partner_profile_id IS NULL OR (area = 'relationships' AND partner_profile_id <> profile_id));
ALTER TABLE report_purchases DROP CONSTRAINT report_purchases_one_per_profile_area_language;
ALTER TABLE report_purchases ADD CONSTRAINT report_purchases_one_per_profile_partner_area_language
    UNIQUE NULLS NOT DISTINCT (profile_id, partner_profile_id, area, language);
-- Deleting a partner profile finds its reports by this index, not by a scan.
CREATE INDEX report_purchases_partner_idx ON report_purchases (partner_profile_id)
    WHERE partner_profile_id IS NOT NULL;

-- What a credit was spent on includes the partner, so a retry finds its own pending consumption
-- and a refund matches the right report. A plain id, like user_profile_id: the money record
-- outlives a deleted profile.
ALTER TABLE purchase_credits
    ADD COLUMN consumed_partner_profile_id uuid,
    ADD CONSTRAINT purchase_credits_partner_consumed CHECK (
        consumed_partner_profile_id IS NULL OR (consumed AND consumed_area = 'relationships'));
DROP INDEX purchase_credits_one_live_consumption_per_report;
CREATE UNIQUE INDEX purchase_credits_one_live_consumption_per_report
    ON purchase_credits (user_profile_id, consumed_partner_profile_id, consumed_area, consumed_language)
    NULLS NOT DISTINCT WHERE consumed;

-- The ledger's consumed and refunded entries name the partner too (NULL for one profile).
ALTER TABLE credit_ledger ADD COLUMN partner_profile_id uuid;

-- The report-worker writes the partner's name into the report: it reads names, nothing else.
GRANT SELECT (id, user_id, name) ON user_profiles TO astro_report_worker;
-- The gateway shows which reports are for two (GET /v1/reports).
GRANT SELECT (partner_profile_id) ON report_purchases TO astro_gateway;
