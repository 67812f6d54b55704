#!/usr/bin/env bash
# What migration 0032 (jobs_user_idx) changes, measured: fills `jobs` with JOBS rows (default
# 200,000: USERS users × the rest, plus one outbox message per job) on a throwaway stack and
# prints EXPLAIN ANALYZE of the statements that look jobs up by user — the user.delete erasure
# of jobs and of their outbox messages (as the billing-worker, under its row-level policies) and
# the user export's `jobs` section — without the index and with it. Not run by CI.
#
#   bash scripts/stack.sh run -- bash scripts/jobs-user-index-bench.sh [JOBS] [USERS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
jobs=${1:-200000}
users=${2:-2000}
: "${DATABASE_URL:?run under scripts/stack.sh run --}"
[ -x .build/debug/astroctl ] || { echo "build first: swift build" >&2; exit 1; }
.build/debug/astroctl migrate >/dev/null
psql() { command psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 "$@"; }

echo "== filling: $jobs jobs of $users users, one outbox message each"
psql <<SQL
TRUNCATE jobs, outbox, user_deletions CASCADE;
INSERT INTO jobs (id, kind, status, attempts, user_id, created_at, updated_at, finished_at, result)
SELECT gen_random_uuid(), (ARRAY['chart.calculate','report.request','billing.verify-purchase'])[1 + i % 3],
       'succeeded', 1,
       ('00000000-0000-4000-8000-' || lpad(to_hex(i % $users), 12, '0'))::uuid,
       now() - (i || ' seconds')::interval, now(), now(), '{"ok": true}'::jsonb
FROM generate_series(1, $jobs) AS i;
INSERT INTO outbox (exchange, routing_key, body, job_id, sent_at)
SELECT 'astro.events', 'chart.calculated', convert_to('{"x":1}', 'UTF8'), id, now() FROM jobs;
-- The user being deleted: the billing-worker's erase policies see the users in user_deletions.
INSERT INTO users (id) VALUES ('00000000-0000-4000-8000-000000000007') ON CONFLICT DO NOTHING;
INSERT INTO user_deletions (user_id, job_id) VALUES ('00000000-0000-4000-8000-000000000007', gen_random_uuid());
ANALYZE jobs; ANALYZE outbox; ANALYZE user_deletions;
SQL
psql -c "SELECT count(*) AS jobs, count(DISTINCT user_id) AS users, (SELECT count(*) FROM outbox) AS outbox FROM jobs"

user=00000000-0000-4000-8000-000000000007
statements=(
    # The erasure's order: the outbox messages of the user's jobs, then the jobs (as the
    # billing-worker, so that its row-level policies are part of the plan).
    "SET LOCAL ROLE astro_billing_worker;
     EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) DELETE FROM outbox WHERE id IN (SELECT o.id FROM outbox AS o
         JOIN jobs AS j ON j.id = o.job_id WHERE j.user_id = '$user' AND j.kind <> 'user.delete' LIMIT 500);"
    "SET LOCAL ROLE astro_billing_worker;
     EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) DELETE FROM jobs WHERE id IN
         (SELECT id FROM jobs WHERE user_id = '$user' AND kind <> 'user.delete' LIMIT 500);"
    # The user export's jobs section (user_export_document runs it as its owner).
    "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT to_jsonb(t) FROM jobs t WHERE t.user_id = '$user'
         ORDER BY t.created_at, t.id;"
)
names=("erase outbox (billing-worker)" "erase jobs (billing-worker)" "export jobs section")
measure() {
    # $1: a title, $2: what to do first. Each statement runs 5 times, each in a transaction that
    # is rolled back (the DELETEs too); the plan of the last run and every run's time are shown.
    echo "== $1"
    for k in "${!statements[@]}"; do
        local times=()
        for _ in 1 2 3 4 5; do
            out=$(psql -c "BEGIN;" -c "$2" -c "${statements[$k]}" -c "ROLLBACK;" 2>&1)
            times+=("$(grep -o 'Execution Time: [0-9.]*' <<<"$out" | grep -o '[0-9.]*$')")
        done
        echo "-- ${names[$k]}: execution ms ${times[*]}"
        grep -E "Scan|Execution Time|rows=" <<<"$out" | grep -E "Scan|Execution" | sed 's/^ */   /' | cut -c1-140
    done
}
measure "without jobs_user_idx" "DROP INDEX jobs_user_idx;"
measure "with jobs_user_idx" "SELECT 1;"
echo "== building the index (CREATE INDEX, as in 0032)"
psql <<SQL
BEGIN;
DROP INDEX jobs_user_idx;
\timing on
CREATE INDEX jobs_user_idx ON jobs (user_id) WHERE user_id IS NOT NULL;
\timing off
ROLLBACK;
SQL
