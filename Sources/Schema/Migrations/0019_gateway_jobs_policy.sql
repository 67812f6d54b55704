-- The gateway reads only the jobs it records for a user (gateway_jobs): App Store notifications
-- are not among them (Apple's endpoint answers with the job id but never reads the job back), so
-- the row-level policy of 0014 stops showing the gateway's role those rows.
ALTER POLICY jobs_gateway_read ON jobs
    USING (kind IN ('chart.calculate', 'billing.verify-purchase', 'report.request', 'story.generate',
        'story.illustrate', 'story.read'));
