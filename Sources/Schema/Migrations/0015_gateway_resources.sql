-- The gateway's resources (issue 16): the app reads its profiles, charts, credits, ledger and
-- reports through the gateway, and deletes its profiles. The role astro_gateway gets exactly the
-- reads those routes make (column by column where a table holds more than the app may see: what
-- a report cost us, the App Store's payloads, the jobs behind a credit) and one delete. Every
-- statement of the gateway names the caller's user id; no table here has row-level security
-- (0012 put it on jobs, outbox and delivery_counts only).

-- Profiles: the list, one profile, and the profile's existence and owner before a PUT or a
-- report request. DELETE: the gateway deletes a profile itself (a single row whose dependents
-- the schema already names; no worker logic is involved, and the app expects it gone when the
-- answer comes). The foreign keys then delete its chart (birth_charts) and its reports
-- (report_purchases, ON DELETE CASCADE since 0001): a report is the profile's personal data.
-- Those cascades run as the referencing tables' owner, so the gateway needs no DELETE on them.
-- The money records keep the profile as a plain id (purchase_credits.user_profile_id,
-- credit_ledger.profile_id): a deleted profile never unbalances the ledger.
GRANT SELECT, DELETE ON user_profiles TO astro_gateway;

-- The stored chart (GET /v1/profiles/{id}/chart) and what a profile shows of it.
GRANT SELECT (id, profile_id, chart_data, house_system, engine_version, updated_at) ON birth_charts TO astro_gateway;

-- Reports: the text and what describes it; not the price, the transaction, the credit, nor the
-- LLM usage and its cost.
GRANT SELECT (id, user_id, profile_id, area, language, report_text, word_count, writer, generated_at, created_at)
    ON report_purchases TO astro_gateway;

-- Available credits by area (GET /v1/credits).
GRANT SELECT (user_id, report_area, consumed, revoked) ON purchase_credits TO astro_gateway;

-- The caller's ledger (GET /v1/ledger): every movement, without the notification it came from.
GRANT SELECT (id, user_id, credit_id, transaction_id, entry, job_id, profile_id, report_area, report_language,
    reason, created_at) ON credit_ledger TO astro_gateway;

-- GET /v1/reports lists a user's reports newest first, page by page: an index in that order
-- (rows of a user are few, but a sort per page would read all of them). It leads with user_id,
-- so it serves everything the single-column index of 0001 did.
CREATE INDEX report_purchases_user_created_idx ON report_purchases (user_id, created_at, id);
DROP INDEX report_purchases_user_idx;
