import Metrics
import Prometheus
import RetryBackoff
import Synchronization

/// The worker's metrics, exposed in the Prometheus text format on `/metrics`.
///
/// Each worker owns its registry (no process-global bootstrap), so tests and tools can run
/// several runtimes in one process without their figures mixing.
public final class WorkerMetrics: Sendable {
    /// Where every metric of this worker is registered.
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let inFlightValues = Mutex<[String: Int]>([:])

    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // Job durations span sub-millisecond duplicates to multi-second LLM calls.
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
            .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
            .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
        ]
        self.factory = factory
    }

    /// How a job's delivery ended.
    public enum Outcome: String, Sendable, CaseIterable {
        /// Committed with status succeeded.
        case succeeded
        /// Committed with status failed (a business outcome such as no credit left).
        case failed
        /// Invalid input: dead-lettered at once.
        case rejected
        /// A transient failure, sent to a delay queue for another attempt.
        case retried
        /// Out of attempts: dead-lettered.
        case exhausted
        /// The jobId was already done: acknowledged without running again.
        case duplicate
        /// Cancelled by an operator before it started: acknowledged without running.
        case cancelled
    }

    /// Counts a finished delivery (`astro_jobs_total{queue, outcome}`).
    public func recordJob(queue: String, outcome: Outcome) {
        JobTrace.noteOutcome(outcome.rawValue)
        Counter(
            label: "astro_jobs_total",
            dimensions: [("queue", queue), ("outcome", outcome.rawValue)],
            factory: factory
        )
        .increment()
    }

    /// Counts a retry scheduled through a delay queue (`astro_job_retries_total{queue}`).
    public func recordRetry(queue: String) {
        Counter(label: "astro_job_retries_total", dimensions: [("queue", queue)], factory: factory).increment()
    }

    /// Counts a dead letter (`astro_dead_letters_total{queue, reason}`).
    public func recordDeadLetter(queue: String, reason: String) {
        Counter(
            label: "astro_dead_letters_total",
            dimensions: [("queue", queue), ("reason", reason)],
            factory: factory
        )
        .increment()
    }

    /// Records how long a job took from delivery to acknowledgement
    /// (`astro_job_duration_seconds{queue}` histogram).
    public func recordDuration(queue: String, _ duration: Duration) {
        Timer(label: "astro_job_duration_seconds", dimensions: [("queue", queue)], factory: factory)
            .recordNanoseconds(Int64(duration.seconds * 1e9))
    }

    /// Adjusts the number of jobs being processed (`astro_jobs_in_flight{queue}` gauge).
    public func adjustInFlight(queue: String, by delta: Int) {
        let value = inFlightValues.withLock { values in
            values[queue, default: 0] += delta
            return values[queue, default: 0]
        }
        Gauge(label: "astro_jobs_in_flight", dimensions: [("queue", queue)], factory: factory).record(value)
    }

    /// Counts a shared job transaction and the jobs in it (`astro_commit_batches_total`,
    /// `astro_commit_batch_jobs_total`: their ratio is the mean batch size).
    public func recordCommitBatch(jobs: Int) {
        Counter(label: "astro_commit_batches_total", factory: factory).increment()
        Counter(label: "astro_commit_batch_jobs_total", factory: factory).increment(by: jobs)
    }

    /// Counts outbox messages published (`astro_outbox_published_total`) and failures.
    public func recordOutbox(published: Int, failed: Int) {
        if published > 0 {
            Counter(label: "astro_outbox_published_total", factory: factory).increment(by: published)
        }
        if failed > 0 {
            Counter(label: "astro_outbox_failures_total", factory: factory).increment(by: failed)
        }
    }

    /// The Prometheus text exposition of every metric.
    public func render() -> String { registry.emitToString() }
}
