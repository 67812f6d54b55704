/// Every metric the workers and the gateway export, named once.
///
/// Dashboards and alert rules (deploy/observability) may query only these (and the broker's own
/// metrics): `ObservabilityTests` parses their PromQL and compares. Names follow Prometheus
/// conventions: the unit in the name (`_seconds`, `_usd`, `_tokens`), `_total` on counters, and
/// label values from a closed set (`MetricLabel.bounded`), so no input can grow the series count.
public enum MetricName: String, Sendable, CaseIterable, Hashable {
    // The runtime (WorkerMetrics), every worker.
    case jobs = "astro_jobs_total"
    case jobRetries = "astro_job_retries_total"
    case deadLetters = "astro_dead_letters_total"
    case jobDuration = "astro_job_duration_seconds"
    case jobsInFlight = "astro_jobs_in_flight"
    case commitBatches = "astro_commit_batches_total"
    case commitBatchJobs = "astro_commit_batch_jobs_total"
    case outboxPublished = "astro_outbox_published_total"
    case outboxFailures = "astro_outbox_failures_total"
    /// Age of this worker's oldest unsent outbox row (0 when none), refreshed periodically.
    case outboxOldestUnsentAge = "astro_outbox_oldest_unsent_age_seconds"
    /// When a periodic probe last succeeded (Unix time), by probe.
    case probeLastSuccess = "astro_probe_last_success_timestamp_seconds"
    /// 1 while the worker is ready (its `/readyz` answers 200), else 0; read at each scrape.
    case workerReady = "astro_worker_ready"

    // Billing (billing-worker), counted once the job's transaction committed.
    case creditsIssued = "astro_credits_issued_total"
    case creditsConsumed = "astro_credits_consumed_total"
    case creditsRefunded = "astro_credits_refunded_total"
    case creditsRevoked = "astro_credits_revoked_total"
    case creditsRestored = "astro_credits_restored_total"
    case purchasesVerified = "astro_purchases_verified_total"
    case purchasesRejected = "astro_purchases_rejected_total"
    /// Users whose ledger and credits disagree, from the billing-worker's periodic audit.
    case ledgerUnbalancedUsers = "astro_ledger_unbalanced_users"

    // Reports (report-worker) and stories (story-worker).
    case reports = "astro_reports_total"
    case stories = "astro_stories_total"
    case storyPages = "astro_story_pages_total"
    case storyIllustrations = "astro_story_illustrations_total"
    case llmTokens = "astro_llm_tokens_total"
    case llmCost = "astro_llm_cost_usd_total"
    /// Pictures from the images API at `IMAGE_PRICE_PER_IMAGE_USD` (its answers carry no usage).
    case imageCost = "astro_image_cost_usd_total"
    // Paid calls (PaidCallLedger), counted when the provider answered, whatever the job's outcome.
    case paidCalls = "astro_paid_calls_total"
    case paidCallsRefused = "astro_paid_calls_refused_total"
    case paidSpendToday = "astro_paid_spend_today_usd"
    case paidDailyBudget = "astro_paid_daily_budget_usd"

    // The gateway (GatewayMetrics).
    case gatewayRequests = "gateway_requests_total"
    case gatewayRequestDuration = "gateway_request_duration_seconds"
    case gatewayPublishes = "gateway_publishes_total"
    case gatewayRateLimited = "gateway_rate_limited_total"
    case gatewayEventStreamsOpen = "gateway_event_streams_open"
    case gatewayEventStreamsClosed = "gateway_event_streams_closed_total"
    case gatewayEventsDelivered = "gateway_events_delivered_total"
    case gatewayEventsDropped = "gateway_events_dropped_total"
    case gatewayAppStoreNotifications = "gateway_appstore_notifications_total"
    case gatewayConnectionsOpen = "gateway_connections_open"
    case gatewayConnectionsRefused = "gateway_connections_refused_total"

    // Traces (OTLPTracing), in every process that exports spans.
    case traceSpansExported = "astro_trace_spans_exported_total"
    case traceSpansDropped = "astro_trace_spans_dropped_total"
    case traceSpansFailed = "astro_trace_spans_failed_total"

    // Retention and the dead-letter bound (the maintenance task), exported by the billing-worker
    // from what the task recorded (maintenance_totals, maintenance_runs): the task itself is a
    // short CronJob run that no scrape could reliably catch.
    /// Rows retention deleted, by table, since the database was created (never reset).
    case retentionDeletedRows = "astro_retention_deleted_rows_total"
    /// Dead letters dropped, by dead-letter queue and reason (max-length, max-age,
    /// broker-max-length), each also logged by job id.
    case deadLettersDropped = "astro_dead_letters_dropped_total"
    /// Maintenance runs recorded, by outcome (completed, partial, failed).
    case maintenanceRuns = "astro_maintenance_runs_total"
    /// When the last maintenance run that was not a failure (nor a dry run) finished (Unix time).
    case maintenanceLastSuccess = "astro_maintenance_last_success_timestamp_seconds"

    // Chart results (chart-worker), counted once the job's transaction committed.
    /// Chart results stored (`computed`) or found already stored (`cached`), by kind.
    case chartResults = "astro_chart_results_total"

    /// How Prometheus sees the metric.
    public enum Kind: Sendable, Hashable {
        case counter, gauge, histogram
    }

    /// The metric's type; a histogram is exported as `<name>_bucket`, `_sum` and `_count`.
    public var kind: Kind {
        switch self {
        case .jobDuration, .gatewayRequestDuration: .histogram
        case .jobsInFlight, .outboxOldestUnsentAge, .probeLastSuccess, .workerReady, .ledgerUnbalancedUsers,
            .gatewayEventStreamsOpen, .maintenanceLastSuccess, .paidSpendToday, .paidDailyBudget,
            .gatewayConnectionsOpen:
            .gauge
        default: .counter
        }
    }

    /// The metric's label names, always these and in this order.
    public var labelNames: [String] {
        switch self {
        case .jobs: ["queue", "outcome"]
        case .jobRetries, .jobDuration, .jobsInFlight: ["queue"]
        case .deadLetters: ["queue", "reason"]
        case .commitBatches, .commitBatchJobs, .outboxPublished, .outboxFailures, .outboxOldestUnsentAge, .workerReady:
            []
        case .probeLastSuccess: ["probe"]
        case .creditsIssued, .creditsConsumed, .creditsRefunded: ["area"]
        case .creditsRevoked, .creditsRestored, .purchasesVerified, .ledgerUnbalancedUsers, .imageCost: []
        case .purchasesRejected: ["reason"]
        case .reports: ["area", "language", "writer"]
        case .stories: ["language", "writer"]
        case .storyPages: ["language"]
        case .storyIllustrations: ["illustrator"]
        case .llmTokens: ["purpose", "kind"]
        case .llmCost: ["purpose"]
        case .gatewayRequests: ["route", "status"]
        case .gatewayRequestDuration, .gatewayEventStreamsOpen, .gatewayEventsDelivered: []
        case .traceSpansExported, .traceSpansDropped, .traceSpansFailed: []
        case .gatewayPublishes: ["outcome"]
        case .gatewayRateLimited: ["limit"]
        case .gatewayAppStoreNotifications: ["outcome"]
        case .gatewayConnectionsOpen, .gatewayConnectionsRefused: []
        case .gatewayEventStreamsClosed, .gatewayEventsDropped: ["reason"]
        case .retentionDeletedRows: ["table"]
        case .deadLettersDropped: ["queue", "reason"]
        case .maintenanceRuns: ["outcome"]
        case .maintenanceLastSuccess: []
        case .chartResults: ["kind", "outcome"]
        case .paidCalls: ["api", "purpose"]
        case .paidCallsRefused: ["api", "reason"]
        case .paidSpendToday, .paidDailyBudget: ["api"]
        }
    }

    /// The `# HELP` line of the metrics this package registers by name (the business metrics and
    /// the probes' gauges); empty for those whose exporter words its own.
    public var help: String {
        switch self {
        case .outboxOldestUnsentAge: "Age of this worker's oldest unsent outbox row (0 when none)"
        case .probeLastSuccess: "When a periodic metrics probe last succeeded (Unix time)"
        case .workerReady: "1 while the worker is ready (its /readyz answers 200), else 0"
        case .creditsIssued: "Credits issued by verified purchases, by area (any: any area)"
        case .creditsConsumed: "Credits spent on reports, by report area"
        case .creditsRefunded: "Credits given back for reports that could not be written, by area"
        case .creditsRevoked: "Credits revoked because the App Store refunded or revoked their purchase"
        case .creditsRestored: "Credits given back because the App Store reversed a refund"
        case .purchasesVerified: "Purchases verified and recorded for the first time"
        case .purchasesRejected: "Purchases refused, by reason"
        case .ledgerUnbalancedUsers: "Users whose credit ledger and credits disagree, at the last audit"
        case .reports: "Reports written and stored, by area, language and writer"
        case .stories: "Stories written and stored, by language and writer"
        case .storyPages: "Story pages written, by language"
        case .storyIllustrations: "Story pages given a picture, by illustrator"
        case .llmTokens: "LLM tokens paid for, by purpose and kind (prompt, completion)"
        case .llmCost: "LLM cost in USD at the configured token prices, by purpose"
        case .imageCost: "Images API cost in USD at the configured price per picture"
        case .retentionDeletedRows: "Rows the maintenance task's retention deleted, by table"
        case .deadLettersDropped: "Dead letters dropped from their queue, by queue and reason"
        case .maintenanceRuns: "Maintenance runs recorded, by outcome"
        case .maintenanceLastSuccess: "When the last maintenance run that did not fail finished (Unix time)"
        case .chartResults: "Chart results stored (computed) or already stored (cached), by kind"
        case .paidCalls: "Paid API calls the provider answered, by API and purpose, whatever became of the job"
        case .paidCallsRefused:
            "Paid calls not made (the built-in writer or illustrator took over), by API and reason (budget, user-limit)"
        case .paidSpendToday: "Spend in USD on the API today (UTC), as the database records it for the daily budget"
        case .paidDailyBudget: "The API's daily budget in USD (its *_DAILY_BUDGET_USD)"
        default: ""
        }
    }

    /// The series names Prometheus stores for this metric (a histogram's three).
    public var seriesNames: [String] {
        switch kind {
        case .histogram: ["\(rawValue)_bucket", "\(rawValue)_sum", "\(rawValue)_count"]
        case .counter, .gauge: [rawValue]
        }
    }
}

/// Label values of the business metrics, each from a closed set.
public enum MetricLabel {
    /// What a label takes when the value is outside its set.
    public static let other = "other"

    /// `value` when `allowed` contains it, else `other`: a label can never take an unplanned value.
    public static func bounded(_ value: String, among allowed: some Sequence<String>) -> String {
        allowed.contains(value) ? value : other
    }

    /// A report's or story's writer: `built-in` or `llm` (the model is configuration, not a label).
    public static func writer(_ writer: String) -> String {
        if writer == "built-in" { return "built-in" }
        return writer.hasPrefix("llm:") || writer == "llm" ? "llm" : other
    }

    /// A story page's illustrator: `built-in` or `images-api`.
    public static func illustrator(_ name: String) -> String {
        name == "built-in" ? "built-in" : (name.isEmpty ? other : "images-api")
    }

    /// The areas a credit is for: the report areas and `any`.
    public static let creditAreas: [String] = ReportArea.allCases.map(\.rawValue) + ["any"]
    /// The report and story languages.
    public static let languages: [String] = ReportLanguage.allCases.map(\.rawValue)
    /// The kinds of stored chart results (`astro_chart_results_total{kind}`).
    public static let chartResultKinds: [String] = ChartResultKind.allCases.map(\.rawValue)
    /// How a chart result job ended (`astro_chart_results_total{outcome}`).
    public static let chartResultOutcomes: [String] = ["computed", "cached"]
    /// What spent LLM tokens: `report` or `story`.
    public static let llmPurposes: [String] = ["report", "story"]
    /// The paid APIs (`llm`, `images`) and what a paid call was for.
    public static let paidAPIs: [String] = PaidAPI.allCases.map(\.rawValue)
    public static let paidPurposes: [String] = PaidPurpose.allCases.map(\.rawValue)
    /// Why a paid call was not made (`PaidCallAdmission.refusalReason`).
    public static let paidRefusalReasons: [String] = ["budget", "user-limit"]
    /// The two kinds of tokens an LLM bills: `prompt` (input) and `completion` (output).
    public static let tokenKinds: [String] = ["prompt", "completion"]

    /// Why a purchase was rejected: the codes the billing-worker's verification and ledger give
    /// (StoreKit verification failures are grouped under `verification`, App Store Server API
    /// failures under `appstore`).
    public static let purchaseRejectionReasons: [String] =
        [
            ErrorCode.invalidPayload.rawValue, "verification", ErrorCode.verificationByIDUnavailable.rawValue,
            ErrorCode.transactionIDMismatch.rawValue, ErrorCode.unknownProduct.rawValue,
            ErrorCode.transactionRevoked.rawValue, ErrorCode.accountTokenMissing.rawValue,
            ErrorCode.accountMismatch.rawValue, ErrorCode.invalidQuantity.rawValue,
            ErrorCode.transactionOwnedByAnotherUser.rawValue, ErrorCode.Family.appStore.rawValue,
        ] + RestoreCode.allCases.map(\.rawValue)
}
