#!/usr/bin/env bash
# The simulated week of issue 17: how big the database gets at 500 jobs/s with and without
# retention. Not run by CI (minutes of inserts and gigabytes of disk). Run it on the local stack:
#
#   swift build --product astroctl
#   bash scripts/stack.sh run -- bash scripts/retention-sim.sh [SCALE] [DAYS_WITH_RETENTION] [RUNS_PER_DAY]
#
# SCALE (default 100) divides the rate: 500/SCALE jobs per simulated second, i.e. 43.2 M / SCALE
# jobs a day, each with its outbox rows (one event, and one follow-up job for one job in 20),
# of the sizes the workers write (a chart.calculate result and its chart.calculated event). Row
# and index sizes grow linearly with the row count, so the figures at full rate are the measured
# table sizes times SCALE (said so in the output); a week at full rate without retention is
# about 300 M jobs and would not fit on this machine's disk.
#
# 1. Without retention: seven simulated days, the size after each.
# 2. With retention (JOB_RETENTION 7d, OUTBOX_RETENTION 1d): DAYS_WITH_RETENTION simulated days
#    (default 14) in a second database, each in RUNS_PER_DAY slices (default 4: a CronJob every
#    6 hours); after each slice `astroctl retention run --as-of <end of the slice>` deletes what
#    is due, then VACUUM (what autovacuum does many times in a real day at this rate; it makes the
#    space of deleted rows reusable, it does not shrink the files). The sizes are measured at the
#    end of each day: they level off once the oldest day falls out.
set -euo pipefail

SCALE=${1:-100}
RETENTION_DAYS=${2:-14}
RUNS_PER_DAY=${3:-4}
BIN=${ASTRO_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.build/debug}
: "${DATABASE_URL:?run through scripts/stack.sh run --}"
PER_DAY=$((43200000 / SCALE))
log() { printf 'retention-sim: %s\n' "$*" >&2; }

base_url=${DATABASE_URL%/*}
psql_admin() { psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -qAt "$@"; }

# $3 jobs (default a day's) of traffic over $4 seconds (default a day) from $2 (epoch seconds)
# into database $1.
insert_day() {
    local url=$1 start=$2 n=${3:-$PER_DAY} span=${4:-86400}
    psql "$url" -v ON_ERROR_STOP=1 -qAt -v n="$n" -v t0="$start" -v span="$span" <<'SQL'
BEGIN;
CREATE TEMP TABLE day ON COMMIT DROP AS
SELECT i, gen_random_uuid() AS job, gen_random_uuid() AS usr, gen_random_uuid() AS profile,
       gen_random_uuid() AS chart,
       to_timestamp(:t0 + i * :span::float8 / :n) AS t,
       CASE WHEN i % 1000 = 0 THEN 'dead' WHEN i % 100 = 0 THEN 'failed' ELSE 'succeeded' END AS status
FROM generate_series(0, :n - 1) AS i;
INSERT INTO jobs (id, kind, status, attempts, result, error, user_id, created_at, updated_at, finished_at)
SELECT job, CASE WHEN i % 20 = 0 THEN 'report.request' ELSE 'chart.calculate' END, status,
       CASE WHEN status = 'succeeded' THEN 1 ELSE 3 END,
       CASE WHEN status = 'succeeded' THEN jsonb_build_object('userId', usr, 'profileId', profile,
           'chartId', chart, 'unchanged', false) END,
       CASE WHEN status <> 'succeeded' THEN jsonb_build_object('code', 'invalid-input',
           'message', 'birth date 1899-12-31 is before 1900-01-01') END,
       usr, t, t + interval '40 ms', t + interval '40 ms'
FROM day ORDER BY i;
-- One event per job, and a follow-up job for one in twenty (report.request → report.generate),
-- with the headers a relayed row carries.
INSERT INTO outbox (exchange, routing_key, body, headers, mandatory, job_id, created_at, claimed_until,
    claimed_by_pid, sent_at, attempts, producer)
SELECT e.exchange, e.routing_key, convert_to(e.body, 'UTF8'),
       jsonb_build_object('traceparent', '00-' || md5(job::text) || '-' || left(md5(usr::text), 16) || '-01'),
       e.mandatory, job, t + interval '40 ms', t + interval '30 s', 4242, t + interval '90 ms', 1,
       'astro_chart_worker'
FROM day,
LATERAL (
    SELECT 'astro.events' AS exchange, 'chart.calculated' AS routing_key, false AS mandatory,
           jsonb_build_object('jobId', job, 'type', 'chart.calculated', 'occurredAt', t, 'userId', usr,
               'profileId', profile, 'chartId', chart, 'unchanged', false)::text AS body
    UNION ALL
    SELECT 'astro.jobs', 'report.generate', true,
           jsonb_build_object('jobId', gen_random_uuid(), 'requestJobId', job, 'userId', usr,
               'profileId', profile, 'area', 'career', 'language', 'en', 'creditId', chart)::text
    WHERE i % 20 = 0
) AS e
ORDER BY i;
COMMIT;
SQL
}

sizes() {
    psql "$1" -qAt -F ' ' -c "SELECT pg_database_size(current_database()), pg_total_relation_size('jobs'),
        pg_total_relation_size('outbox'), (SELECT count(*) FROM jobs), (SELECT count(*) FROM outbox)"
}
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
gb_full() { awk -v b="$1" -v s="$SCALE" 'BEGIN { printf "%.1f", b * s / 1073741824 }'; }

migrate() { DATABASE_URL=$1 "$BIN/astroctl" migrate --skip-broker >/dev/null 2>&1 || DATABASE_URL=$1 "$BIN/astroctl" migrate >/dev/null; }

log "scale 1/$SCALE: $PER_DAY jobs per simulated day ($((500 / SCALE)) jobs/s; full rate is 500/s)"
start0=$(( $(date +%s) - 15 * 86400 ))
start0=$(( start0 - start0 % 86400 ))

for db in sim_without sim_with; do
    psql_admin -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
    migrate "$base_url/$db"
done
empty=$(sizes "$base_url/sim_without" | cut -d' ' -f1)

echo "## Without retention (scale 1/$SCALE; full-rate column = measured jobs+outbox bytes × $SCALE)"
echo
echo "| day | jobs rows | outbox rows | jobs MB | outbox MB | database MB | jobs+outbox at 500/s, GB |"
echo "|---|---|---|---|---|---|---|"
for day in 1 2 3 4 5 6 7; do
    t=$(date +%s.%N)
    insert_day "$base_url/sim_without" $((start0 + (day - 1) * 86400))
    read -r dbsize jobs outbox jrows orows < <(sizes "$base_url/sim_without")
    log "without retention: day $day inserted in $(awk -v a="$t" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}')s"
    echo "| $day | $jrows | $orows | $(mb "$jobs") | $(mb "$outbox") | $(mb "$dbsize") | $(gb_full $((jobs + outbox))) |"
done
psql_admin -c "DROP DATABASE sim_without"

echo
echo "## With retention (JOB_RETENTION 7d, OUTBOX_RETENTION 1d, batches of 5000, $RUNS_PER_DAY runs a day, VACUUM after each)"
echo
echo "| day | deleted jobs (day) | deleted outbox (day) | retention s (day) | rows/s deleted | jobs rows | outbox rows | jobs MB | outbox MB | database MB | jobs+outbox at 500/s, GB |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for day in $(seq 1 "$RETENTION_DAYS"); do
    dj=0 do_=0 elapsed=0
    slice=$((86400 / RUNS_PER_DAY))
    for run in $(seq 0 $((RUNS_PER_DAY - 1))); do
        from=$((start0 + (day - 1) * 86400 + run * slice))
        insert_day "$base_url/sim_with" "$from" $((PER_DAY / RUNS_PER_DAY)) "$slice"
        as_of=$(date -u -d "@$((from + slice))" +%Y-%m-%dT%H:%M:%SZ)
        t=$(date +%s.%N)
        out=$(DATABASE_URL="$base_url/sim_with" "$BIN/astroctl" retention run --as-of "$as_of" --no-dead-letters \
            --batch-size 5000 --json)
        elapsed=$(awk -v e="$elapsed" -v a="$t" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", e + b - a }')
        dj=$((dj + $(printf '%s' "$out" | sed -n 's/.*"jobs":\([0-9]*\).*/\1/p')))
        do_=$((do_ + $(printf '%s' "$out" | sed -n 's/.*"outbox":\([0-9]*\).*/\1/p')))
        psql "$base_url/sim_with" -qAt -c "VACUUM (ANALYZE) jobs" -c "VACUUM (ANALYZE) outbox"
    done
    read -r dbsize jobs outbox jrows orows < <(sizes "$base_url/sim_with")
    rate=$(awk -v d="$((dj + do_))" -v s="$elapsed" 'BEGIN { printf "%.0f", (s > 0 ? d / s : 0) }')
    echo "| $day | $dj | $do_ | $elapsed | $rate | $jrows | $orows | $(mb "$jobs") | $(mb "$outbox") | $(mb "$dbsize") | $(gb_full $((jobs + outbox))) |"
done
echo
echo "Empty migrated database: $(mb "$empty") MB. Full-rate figures scale the measured bytes of jobs and outbox (rows, TOAST and indexes) by $SCALE."
