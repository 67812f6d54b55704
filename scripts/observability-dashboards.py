#!/usr/bin/env python3
"""Writes the Grafana dashboards of deploy/observability/dashboards/ (one JSON file per concern).

The dashboards are data: edit the panel lists below and run
    python3 scripts/observability-dashboards.py [FOLDER]
then commit the JSON (scripts/test.sh fails when the committed files differ from what this writes). ObservabilityTests checks that every metric their queries name is one the
code exports (AstroDomain's MetricName) or the broker's exporter's (listed there), so a renamed
metric cannot leave a dashboard silently empty.
"""
import json
import os

OUT = os.path.join(os.path.dirname(__file__), "..", "deploy", "observability", "dashboards")
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
JOB_QUEUES = 'queue=~"(chart|billing|report|story)\\\\..+", queue!~".+\\\\.(dead|retry\\\\..+)"'


def panel(title, targets, unit="short", kind="timeseries", description="", stack=False):
    """One panel: `targets` are (PromQL, legend) pairs."""
    p = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]}},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend, "datasource": DATASOURCE}
            for i, (expr, legend) in enumerate(targets)
        ],
    }
    if kind == "timeseries" and stack:
        p["fieldConfig"]["defaults"]["custom"] = {"stacking": {"mode": "normal"}, "fillOpacity": 20}
    if kind == "stat":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"}
    return p


def dashboard(uid, title, description, panels):
    width, height = 12, 8
    for i, p in enumerate(panels):
        p["id"] = i + 1
        p["gridPos"] = {"x": (i % 2) * width, "y": (i // 2) * height, "w": width, "h": height}
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["astrosvitla"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}
            ]
        },
        "annotations": {"list": []},
        "panels": panels,
    }


DASHBOARDS = {
    "astro-jobs.json": dashboard(
        "astro-jobs",
        "AstroSvitla: jobs, throughput and latency",
        "Per job type (queue): how many jobs finish and how, how long they take, what waits.",
        [
            panel("Jobs finished per second, by queue and outcome",
                  [("sum by (queue, outcome) (rate(astro_jobs_total[5m]))", "{{queue}} {{outcome}}")], "ops",
                  stack=True),
            panel("Job latency p50 / p95 / p99 (delivery to acknowledgement), by queue",
                  [(f"histogram_quantile({q}, sum by (queue, le) (rate(astro_job_duration_seconds_bucket[5m])))",
                    f"{{{{queue}}}} p{int(q * 100)}") for q in (0.5, 0.95, 0.99)], "s"),
            panel("Mean job duration, by queue",
                  [("sum by (queue) (rate(astro_job_duration_seconds_sum[5m])) / "
                    "sum by (queue) (rate(astro_job_duration_seconds_count[5m]))", "{{queue}}")], "s"),
            panel("Jobs in flight, by queue", [("sum by (queue) (astro_jobs_in_flight)", "{{queue}}")]),
            panel("Ready messages waiting, by job queue (broker)",
                  [(f"sum by (queue) (rabbitmq_queue_messages_ready{{{JOB_QUEUES}}})", "{{queue}}")]),
            panel("Jobs per database commit (group commit)",
                  [("sum by (service) (rate(astro_commit_batch_jobs_total[5m])) / "
                    "sum by (service) (rate(astro_commit_batches_total[5m]))", "{{service}}")]),
            panel("Gateway requests per second, by route and status",
                  [("sum by (route, status) (rate(gateway_requests_total[5m]))", "{{route}} {{status}}")], "reqps"),
            panel("Gateway latency p95 / p99",
                  [(f"histogram_quantile({q}, sum by (le) (rate(gateway_request_duration_seconds_bucket[5m])))",
                    f"p{int(q * 100)}") for q in (0.95, 0.99)], "s"),
        ],
    ),
    "astro-errors.json": dashboard(
        "astro-errors",
        "AstroSvitla: errors, retries and dead letters",
        "What fails: dead letters by queue and reason, retries, failed outcomes, undelivered events.",
        [
            panel("Dead letters per hour, by queue and reason",
                  [("sum by (queue, reason) (increase(astro_dead_letters_total[1h]))", "{{queue}} {{reason}}")],
                  stack=True),
            panel("Messages in dead-letter queues (broker)",
                  [('sum by (queue) (rabbitmq_queue_messages{queue=~".+\\\\.dead"})', "{{queue}}")]),
            panel("Retries per second, by queue (alert above 0.5/s)",
                  [("sum by (queue) (rate(astro_job_retries_total[5m]))", "{{queue}}")], "ops"),
            panel("Jobs not succeeded per second, by queue and outcome",
                  [('sum by (queue, outcome) (rate(astro_jobs_total{outcome=~"failed|rejected|exhausted"}[5m]))',
                    "{{queue}} {{outcome}}")], "ops"),
            panel("Outbox publish failures per second",
                  [("sum by (service) (rate(astro_outbox_failures_total[5m]))", "{{service}}")], "ops"),
            panel("Gateway 5xx answers and failed publishes per second",
                  [('sum by (route) (rate(gateway_requests_total{status="5xx"}[5m]))', "5xx {{route}}"),
                   ('sum(rate(gateway_publishes_total{outcome="failed"}[5m]))', "publish failed")], "ops"),
            panel("Events the gateway could not deliver, by reason",
                  [("sum by (reason) (rate(gateway_events_dropped_total[5m]))", "{{reason}}")], "ops"),
            panel("Requests refused by rate limits, by limit",
                  [("sum by (limit) (rate(gateway_rate_limited_total[5m]))", "{{limit}}")], "reqps"),
            # The maintenance totals are the database's, the same in every replica and after a
            # restart: max over replicas, and a plain difference instead of increase().
            panel("Dead letters dropped per hour, by queue and reason (broker-max-length: alert)",
                  [("max by (queue, reason) (astro_dead_letters_dropped_total) - "
                    "max by (queue, reason) (astro_dead_letters_dropped_total offset 1h)", "{{queue}} {{reason}}")],
                  stack=True,
                  description="Dropped by the maintenance task past DEAD_LETTER_MAX_LENGTH or DEAD_LETTER_MAX_AGE, "
                  "or by the broker's length backstop (counted from astro.dead-dropped); each one is also "
                  "logged with its job id."),
        ],
    ),
    "astro-billing.json": dashboard(
        "astro-billing",
        "AstroSvitla: billing and reports",
        "Credits through the ledger, purchases, the ledger audit, and the reports they pay for.",
        [
            panel("Credits per hour: issued, consumed, refunded, revoked, restored",
                  [("sum(increase(astro_credits_issued_total[1h]))", "issued"),
                   ("sum(increase(astro_credits_consumed_total[1h]))", "consumed"),
                   ("sum(increase(astro_credits_refunded_total[1h]))", "refunded"),
                   ("sum(increase(astro_credits_revoked_total[1h]))", "revoked"),
                   ("sum(increase(astro_credits_restored_total[1h]))", "restored")]),
            panel("Credits consumed per day, by area",
                  [("sum by (area) (increase(astro_credits_consumed_total[1d]))", "{{area}}")], stack=True),
            panel("Purchases per hour: verified, and rejected by reason",
                  [("sum(increase(astro_purchases_verified_total[1h]))", "verified"),
                   ("sum by (reason) (increase(astro_purchases_rejected_total[1h]))", "rejected {{reason}}")]),
            panel("Users whose ledger does not balance (must be 0)",
                  [("max(astro_ledger_unbalanced_users)", "unbalanced users")], kind="stat"),
            panel("Seconds since the last ledger audit",
                  [('time() - max(astro_probe_last_success_timestamp_seconds{probe="ledger-audit"})', "audit age")],
                  "s", kind="stat"),
            panel("Reports written per day, by area",
                  [("sum by (area) (increase(astro_reports_total[1d]))", "{{area}}")], stack=True),
            panel("Reports written per day, by language and writer",
                  [("sum by (language, writer) (increase(astro_reports_total[1d]))", "{{language}} {{writer}}")],
                  stack=True),
            panel("Refunds per consumed credit (share of paid reports not written)",
                  [("sum(rate(astro_credits_refunded_total[1d])) / sum(rate(astro_credits_consumed_total[1d]))",
                    "refunded / consumed")], "percentunit"),
        ],
    ),
    "astro-llm.json": dashboard(
        "astro-llm",
        "AstroSvitla: LLM spend, stories and pictures",
        "What the LLM costs (priced with LLM_PRICE_*_PER_1M_USD), in tokens and USD, the images API's "
        "pictures (IMAGE_PRICE_PER_IMAGE_USD), and what they made.",
        [
            panel("LLM spend over the last 24 h (alert over 50 USD)",
                  [("sum(increase(astro_llm_cost_usd_total[1d]))", "USD / 24 h")], "currencyUSD", kind="stat"),
            panel("LLM spend per hour, by purpose",
                  [("sum by (purpose) (increase(astro_llm_cost_usd_total[1h]))", "{{purpose}}")], "currencyUSD",
                  stack=True),
            panel("Tokens per second, by purpose and kind",
                  [("sum by (purpose, kind) (rate(astro_llm_tokens_total[5m]))", "{{purpose}} {{kind}}")]),
            panel("Cost per LLM-written report",
                  [('sum(rate(astro_llm_cost_usd_total{purpose="report"}[1h])) / '
                    'sum(rate(astro_reports_total{writer="llm"}[1h]))', "USD per report")], "currencyUSD"),
            panel("Stories written per day, by language and writer",
                  [("sum by (language, writer) (increase(astro_stories_total[1d]))", "{{language}} {{writer}}")],
                  stack=True),
            panel("Images API spend per hour",
                  [("sum(increase(astro_image_cost_usd_total[1h]))", "USD / hour")], "currencyUSD"),
            panel("Story pages written and illustrated per day",
                  [("sum(increase(astro_story_pages_total[1d]))", "pages written"),
                   ("sum by (illustrator) (increase(astro_story_illustrations_total[1d]))",
                    "illustrated ({{illustrator}})")]),
        ],
    ),
    "astro-infra.json": dashboard(
        "astro-infra",
        "AstroSvitla: broker and database health",
        "Targets up and ready, consumers and depth per queue (RabbitMQ's exporter), the outbox's lag "
        "and the database work the workers report. No PostgreSQL exporter is deployed: database "
        "health is seen through the workers (commits, outbox, probes, readiness).",
        [
            panel("Scrape targets up (1) or down (0)", [("up", "{{service}} {{instance}}")]),
            panel("Workers ready (readiness: database, broker, not blocked)",
                  [("astro_worker_ready", "{{service}} {{instance}}")]),
            panel("Consumers per job queue (alert at 0)",
                  [(f"sum by (queue) (rabbitmq_queue_consumers{{{JOB_QUEUES}}})", "{{queue}}")]),
            panel("Messages ready and unacknowledged, by queue",
                  [("sum by (queue) (rabbitmq_queue_messages_ready)", "{{queue}} ready"),
                   ("sum by (queue) (rabbitmq_queue_messages_unacked)", "{{queue}} unacked")]),
            panel("Oldest unsent outbox row, by service (alert over 60 s)",
                  [("max by (service) (astro_outbox_oldest_unsent_age_seconds)", "{{service}}")], "s"),
            panel("Outbox messages published per second",
                  [("sum by (service) (rate(astro_outbox_published_total[5m]))", "{{service}}")], "ops"),
            panel("Database commits per second (shared job transactions)",
                  [("sum by (service) (rate(astro_commit_batches_total[5m]))", "{{service}}")], "ops"),
            panel("Seconds since each probe last read the database",
                  [("time() - astro_probe_last_success_timestamp_seconds", "{{service}} {{probe}}")], "s"),
            panel("Rows deleted by retention per hour, by table",
                  [("max by (table) (astro_retention_deleted_rows_total) - "
                    "max by (table) (astro_retention_deleted_rows_total offset 1h)", "{{table}}")], stack=True),
            panel("Hours since the last successful maintenance run (alert over 48 h)",
                  [("(time() - max(astro_maintenance_last_success_timestamp_seconds)) / 3600", "hours")],
                  "h", kind="stat"),
            panel("Maintenance runs per day, by outcome",
                  [("max by (outcome) (astro_maintenance_runs_total) - "
                    "max by (outcome) (astro_maintenance_runs_total offset 1d)", "{{outcome}}")]),
            panel("Broker connections and channels",
                  [("sum(rabbitmq_connections)", "connections"), ("sum(rabbitmq_channels)", "channels")]),
            panel("Broker memory",
                  [("sum(rabbitmq_process_resident_memory_bytes)", "resident"),
                   ("sum(rabbitmq_resident_memory_limit_bytes)", "limit (alarm)")], "bytes"),
        ],
    ),
}

if __name__ == "__main__":
    import sys

    # A folder argument writes there instead (scripts/test.sh compares it with the committed files).
    OUT = sys.argv[1] if len(sys.argv) > 1 else OUT
    os.makedirs(OUT, exist_ok=True)
    for name, board in DASHBOARDS.items():
        with open(os.path.join(OUT, name), "w") as f:
            json.dump(board, f, indent=2, sort_keys=True)
            f.write("\n")
        print(f"wrote {name}: {len(board['panels'])} panels")
