-- Schema v1 of the AstroSvitla backend (CONTRACT.md, the seed data models).
-- Applied by `astroctl migrate` and by every worker at start-up, inside one transaction,
-- under an advisory lock. Invariants live here, not only in code.

-- An app user: anonymous device user of the seed model.
CREATE TABLE users (
    id              uuid PRIMARY KEY,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_active_at  timestamptz NOT NULL DEFAULT now()
);

-- A person whose chart is computed. The seed's validation rules are constraints.
CREATE TABLE user_profiles (
    id             uuid PRIMARY KEY,
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name           text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 50),
    birth_date     date NOT NULL CHECK (birth_date BETWEEN DATE '1900-01-01' AND DATE '2100-12-31'),
    -- HH:mm, minute precision (seed rule)
    birth_time     time NOT NULL CHECK (extract(second FROM birth_time) = 0),
    timezone       text NOT NULL CHECK (timezone <> ''),
    latitude       double precision NOT NULL CHECK (latitude BETWEEN -90 AND 90),
    longitude      double precision NOT NULL CHECK (longitude BETWEEN -180 AND 180),
    location_name  text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT user_profiles_name_unique_per_user UNIQUE (user_id, name)
);

-- One computed chart per profile; deleting the profile deletes it.
CREATE TABLE birth_charts (
    id              uuid PRIMARY KEY,
    profile_id      uuid NOT NULL REFERENCES user_profiles (id) ON DELETE CASCADE,
    chart_data      jsonb NOT NULL CHECK (jsonb_typeof(chart_data) = 'object'),
    house_system    text NOT NULL,
    -- Digest of the birth data and options the chart was computed from: a recomputation with
    -- the same input and engine version changes nothing.
    input_digest    text NOT NULL,
    engine_version  text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT birth_charts_one_per_profile UNIQUE (profile_id)
);

-- A verified App Store transaction. transaction_id is unique: one transaction grants once.
-- Purchases are money records: deleting a user who has any is refused (RESTRICT) rather than
-- silently erasing the ledger.
CREATE TABLE purchase_records (
    id                       uuid PRIMARY KEY,
    user_id                  uuid NOT NULL REFERENCES users (id) ON DELETE RESTRICT,
    transaction_id           text NOT NULL CHECK (transaction_id <> ''),
    original_transaction_id  text NOT NULL CHECK (original_transaction_id <> ''),
    product_id               text NOT NULL CHECK (product_id <> ''),
    purchase_date            timestamptz NOT NULL,
    price_usd                numeric(10, 2) NOT NULL CHECK (price_usd >= 0),
    localized_price          text NOT NULL DEFAULT '',
    currency_code            text NOT NULL CHECK (currency_code ~ '^[A-Z]{3}$'),
    credit_amount            integer NOT NULL CHECK (credit_amount > 0),
    environment              text NOT NULL CHECK (environment IN ('Sandbox', 'Production', 'Xcode', 'LocalTesting')),
    -- Set when the transaction is a restore of an earlier one (same original transaction).
    restored_date            timestamptz,
    revoked_at               timestamptz,
    revocation_reason        text,
    created_at               timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT purchase_records_transaction_id_unique UNIQUE (transaction_id),
    CONSTRAINT purchase_records_revocation_consistent CHECK ((revoked_at IS NULL) = (revocation_reason IS NULL))
);
CREATE INDEX purchase_records_user_idx ON purchase_records (user_id, purchase_date);
CREATE INDEX purchase_records_original_idx ON purchase_records (original_transaction_id);

-- One consumable credit. report_area NULL means "any area" (single credits and packs).
-- The seed's invariants: not consumed -> no consumed date and no profile; consumed -> both set.
CREATE TABLE purchase_credits (
    id                  uuid PRIMARY KEY,
    purchase_record_id  uuid NOT NULL REFERENCES purchase_records (id) ON DELETE CASCADE,
    transaction_id      text NOT NULL REFERENCES purchase_records (transaction_id),
    user_id             uuid NOT NULL REFERENCES users (id) ON DELETE RESTRICT,
    report_area         text CHECK (report_area IN ('finances', 'career', 'relationships', 'health', 'general')),
    purchase_date       timestamptz NOT NULL,
    consumed            boolean NOT NULL DEFAULT false,
    consumed_date       timestamptz,
    -- The profile the credit was spent on. Not a foreign key: the money record outlives a
    -- deleted profile (the seed keeps it as a plain id too).
    user_profile_id     uuid,
    -- The job that consumed it: a job can consume at most one credit.
    consumed_by_job     uuid,
    revoked             boolean NOT NULL DEFAULT false,
    revoked_at          timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT purchase_credits_consumption_consistent CHECK (
        (NOT consumed AND consumed_date IS NULL AND user_profile_id IS NULL AND consumed_by_job IS NULL)
        OR (consumed AND consumed_date IS NOT NULL AND user_profile_id IS NOT NULL)
    ),
    CONSTRAINT purchase_credits_revocation_consistent CHECK (revoked = (revoked_at IS NOT NULL)),
    CONSTRAINT purchase_credits_consumed_by_job_unique UNIQUE (consumed_by_job)
);
-- The consumption query takes the oldest available credit of a user: keep that an index scan.
CREATE INDEX purchase_credits_available_idx ON purchase_credits (user_id, report_area, purchase_date, id)
    WHERE NOT consumed AND NOT revoked;
CREATE INDEX purchase_credits_record_idx ON purchase_credits (purchase_record_id);

-- A written report. One per (profile, area, language); deleting the profile deletes it.
CREATE TABLE report_purchases (
    id              uuid PRIMARY KEY,
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    profile_id      uuid NOT NULL REFERENCES user_profiles (id) ON DELETE CASCADE,
    area            text NOT NULL CHECK (area IN ('finances', 'career', 'relationships', 'health', 'general')),
    language        text NOT NULL CHECK (language IN ('en', 'uk')),
    report_text     text NOT NULL CHECK (report_text <> ''),
    word_count      integer NOT NULL CHECK (word_count > 0),
    price           numeric(10, 2) NOT NULL CHECK (price >= 0),
    currency        text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    transaction_id  text NOT NULL REFERENCES purchase_records (transaction_id),
    credit_id       uuid REFERENCES purchase_credits (id),
    purchase_date   timestamptz NOT NULL,
    generated_at    timestamptz NOT NULL,
    writer          text NOT NULL,
    prompt_version  text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT report_purchases_one_per_profile_area_language UNIQUE (profile_id, area, language),
    CONSTRAINT report_purchases_credit_unique UNIQUE (credit_id)
);
CREATE INDEX report_purchases_user_idx ON report_purchases (user_id);

-- What became of every job (one row per jobId), so any client can ask.
CREATE TABLE jobs (
    id           uuid PRIMARY KEY,
    kind         text NOT NULL CHECK (kind <> ''),
    status       text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'dead')),
    attempts     integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    error        jsonb CHECK (error IS NULL OR (error ? 'code' AND error ? 'message')),
    result       jsonb,
    user_id      uuid,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    CONSTRAINT jobs_finished_when_terminal CHECK (
        (status IN ('succeeded', 'failed', 'dead')) = (finished_at IS NOT NULL)
    )
);
CREATE INDEX jobs_kind_status_idx ON jobs (kind, status);

-- Messages committed together with the work and relayed to the broker afterwards
-- (publisher confirms, then marked sent), so a crash between commit and publish loses nothing.
CREATE TABLE outbox (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id    uuid NOT NULL DEFAULT gen_random_uuid(),
    exchange      text NOT NULL,
    routing_key   text NOT NULL,
    body          bytea NOT NULL,
    content_type  text NOT NULL DEFAULT 'application/json',
    headers       jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(headers) = 'object'),
    -- Jobs must reach a queue (mandatory publish); events may have no listener.
    mandatory     boolean NOT NULL DEFAULT false,
    job_id        uuid,
    created_at    timestamptz NOT NULL DEFAULT now(),
    -- A relay claims rows for a lease while it publishes them; a relay that dies mid-way
    -- leaves them claimable again once the lease is over.
    claimed_until timestamptz,
    sent_at       timestamptz,
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text,
    CONSTRAINT outbox_message_id_unique UNIQUE (message_id)
);
CREATE INDEX outbox_pending_idx ON outbox (id) WHERE sent_at IS NULL;
