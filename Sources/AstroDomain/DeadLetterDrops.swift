extension BrokerNames {
    /// Durable queue the dead-letter queues' length backstop dead-letters into (through
    /// `astro.dlx`, under this routing key): a dead letter the broker drops is kept here until
    /// the maintenance task drains it, logging and counting each one, so that nothing falls off
    /// a dead-letter queue unseen. Fed only when a `.dead` queue passed the backstop, i.e. when
    /// the maintenance task had stopped bounding it.
    public static let deadDroppedQueue = "astro.dead-dropped"
}

extension MetricLabel {
    /// Why a dead letter was dropped (`astro_dead_letters_dropped_total{reason}`): by the
    /// maintenance task past `DEAD_LETTER_MAX_LENGTH` or `DEAD_LETTER_MAX_AGE`, or by the broker's
    /// length backstop (counted when the task drains `astro.dead-dropped`).
    public static let deadLetterDropReasons: [String] = ["max-length", "max-age", "broker-max-length"]
    /// The tables retention deletes from (`astro_retention_deleted_rows_total{table}`).
    public static let retentionTables: [String] = [
        "jobs", "gateway_jobs", "outbox", "delivery_counts", "gateway_refresh_tokens", "gateway_attest_challenges",
        "maintenance_runs", "stories.stories", "stories.pages", "stories.child_profiles",
        "user_exports",
        "chart_results",
    ]
    /// How a maintenance run ended (`astro_maintenance_runs_total{outcome}`).
    public static let maintenanceOutcomes: [String] = ["completed", "partial", "failed"]
    /// The contract's dead-letter queues (`<type>.dead`).
    public static var deadLetterQueues: [String] { JobType.all.map { BrokerNames.deadLetterQueue(of: $0.rawValue) } }
}
