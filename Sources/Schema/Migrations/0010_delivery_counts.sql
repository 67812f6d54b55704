-- Poison messages (issue 14): a message the broker hands out again had no outcome the last
-- time, because its worker died or lost its connection before acknowledging it. Counting such
-- deliveries per message lets a worker quarantine a message that kills every worker that reads
-- it (dead-lettered with `delivery-limit` after DELIVERY_LIMIT deliveries) instead of every
-- replica crash-looping on it. Rows exist only for redelivered messages; a worker clears rows
-- untouched for a week as it counts.
CREATE TABLE delivery_counts (
    -- SHA-256 of the queue name, a NUL byte and the body.
    digest bytea PRIMARY KEY CHECK (octet_length(digest) = 32),
    queue text NOT NULL,
    deliveries integer NOT NULL CHECK (deliveries > 0),
    first_delivered_at timestamptz NOT NULL DEFAULT now(),
    last_delivered_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX delivery_counts_last_delivered ON delivery_counts (last_delivered_at);

GRANT SELECT, INSERT, UPDATE, DELETE ON delivery_counts
    TO astro_chart_worker, astro_report_worker, astro_billing_worker, astro_story_worker;
