-- The gateway (issue 16): the app's front door. Its own least-privilege role, like the workers';
-- refresh tokens (only their SHA-256, rotated on every use); and the jobs it published on a
-- user's behalf, which say whose job is whose and make a retried POST with the same
-- Idempotency-Key answer with the first job instead of publishing a second one.
--
-- The role starts without LOGIN, like the workers' roles: the platform gives it a password
-- (CloudNativePG managed roles) or an administrator does (ALTER ROLE astro_gateway LOGIN
-- PASSWORD …); a development stack may run the gateway as the owner.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'astro_gateway') THEN
        BEGIN
            CREATE ROLE astro_gateway NOLOGIN;
        EXCEPTION
        WHEN unique_violation OR duplicate_object THEN
            NULL;
        WHEN insufficient_privilege THEN
            RAISE EXCEPTION 'role astro_gateway does not exist and % may not create roles', current_user
                USING HINT = 'create the gateway role first (e.g. CloudNativePG managed roles) '
                    'or migrate as a user with CREATEROLE';
        END;
    END IF;
END
$$;

CREATE TABLE gateway_refresh_tokens (
    -- SHA-256 of the token, lowercase hex: the token itself is never stored.
    token_hash  text PRIMARY KEY CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX gateway_refresh_tokens_user ON gateway_refresh_tokens (user_id);

CREATE TABLE gateway_jobs (
    job_id           uuid PRIMARY KEY,
    user_id          uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind             text NOT NULL CHECK (kind <> ''),
    -- The client's Idempotency-Key; NULL when the request had none.
    idempotency_key  text CHECK (char_length(idempotency_key) BETWEEN 1 AND 255),
    -- SHA-256 of the request body: the same key with another body is refused.
    request_hash     text NOT NULL CHECK (request_hash ~ '^[0-9a-f]{64}$'),
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- When the broker confirmed the publish; NULL until then (a retry publishes it again).
    published_at     timestamptz,
    CONSTRAINT gateway_jobs_one_per_key UNIQUE (user_id, idempotency_key)
);
CREATE INDEX gateway_jobs_user ON gateway_jobs (user_id, created_at);

GRANT SELECT ON schema_migrations TO astro_gateway;
GRANT SELECT, INSERT ON users TO astro_gateway;
GRANT SELECT, INSERT, DELETE ON gateway_refresh_tokens TO astro_gateway;
GRANT SELECT, INSERT ON gateway_jobs TO astro_gateway;
GRANT UPDATE (published_at) ON gateway_jobs TO astro_gateway;
-- The gateway reads the outcome of the jobs clients may ask for; row-level security on jobs
-- (0012) shows it nothing else.
GRANT SELECT ON jobs TO astro_gateway;
CREATE POLICY jobs_gateway_read ON jobs FOR SELECT TO astro_gateway
    USING (kind IN ('chart.calculate', 'billing.verify-purchase', 'report.request', 'billing.store-notification',
        'story.generate', 'story.illustrate', 'story.read'));
