-- App Attest for the gateway (issue 16): single-use registration challenges and the attested
-- device keys whose assertions later requests may have to carry. The gateway's role gets only
-- what registration and assertion checks need: challenges are inserted and consumed (deleted),
-- keys inserted and read, and only a key's counter updated.

CREATE TABLE gateway_attest_challenges (
    -- SHA-256 of the challenge's text, lowercase hex.
    challenge_hash  text PRIMARY KEY CHECK (challenge_hash ~ '^[0-9a-f]{64}$'),
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL
);
CREATE INDEX gateway_attest_challenges_expiry ON gateway_attest_challenges (expires_at);

CREATE TABLE gateway_device_keys (
    -- The App Attest key identifier: SHA-256 of the public key.
    key_id       bytea PRIMARY KEY CHECK (octet_length(key_id) = 32),
    -- One attested key per user: the gateway makes a user per registered device.
    user_id      uuid NOT NULL UNIQUE REFERENCES users (id) ON DELETE CASCADE,
    -- The P-256 public key, uncompressed (X9.63).
    public_key   bytea NOT NULL CHECK (octet_length(public_key) = 65),
    -- The last assertion counter accepted (0 after the attestation); only ever raised.
    counter      bigint NOT NULL DEFAULT 0 CHECK (counter BETWEEN 0 AND 4294967295),
    -- Apple's receipt from the attestation, kept for fraud-risk checks.
    receipt      bytea NOT NULL CHECK (octet_length(receipt) <= 16384),
    environment  text NOT NULL CHECK (environment IN ('production', 'development')),
    created_at   timestamptz NOT NULL DEFAULT now()
);

GRANT SELECT, INSERT, DELETE ON gateway_attest_challenges TO astro_gateway;
GRANT SELECT, INSERT ON gateway_device_keys TO astro_gateway;
GRANT UPDATE (counter) ON gateway_device_keys TO astro_gateway;
