-- A client's job is done when what it asked for exists (issue 31): `report.request` when its
-- `report.generate` has stored the report, `user.export` when its `user.export-pack` has stored
-- the zip. The gateway composes the job it shows from both rows, and shows a follow-up job to
-- the user it belongs to (`jobs.user_id`), so it reads these kinds too.
CREATE POLICY jobs_gateway_read_follow_ups ON jobs FOR SELECT TO astro_gateway
    USING (kind IN ('report.generate', 'user.export-pack'));
