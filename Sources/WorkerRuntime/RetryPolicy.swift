import RetryBackoff

/// Capped exponential backoff with jitter for transiently failing jobs: the package's one
/// `Backoff`, doubling from `initialDelay` (`RETRY_INITIAL_DELAY_MS`) to `maxDelay`
/// (`RETRY_MAX_DELAY_MS`), `maxAttempts` (`MAX_ATTEMPTS`) in all, after the last of which the
/// job is dead-lettered.
///
/// Retries go through per-queue delay queues (a message TTL, then dead-lettered back to the
/// work queue), so a waiting retry holds no worker and survives a worker crash. Each delay queue
/// has a fixed TTL, one per step of the exponential sequence up to the cap (`steps`); a
/// message's own expiration (`delay(afterAttempt:random:)`) takes up to a fifth off its step so
/// retries of a burst of failures spread out.
public typealias RetryPolicy = Backoff

extension Backoff {
    /// The share of a step a job retry's jitter may take off: a 10 s step waits 8–10 s.
    public static let jobRetryJitter = 0.2

    /// A job retry policy: `maxAttempts` in all, steps doubling from `initialDelay` to `maxDelay`,
    /// jitter `jobRetryJitter`.
    public init(maxAttempts: Int, initialDelay: Duration, maxDelay: Duration) {
        self.init(
            maxAttempts: maxAttempts,
            initialDelay: initialDelay,
            maxDelay: maxDelay,
            multiplier: 2,
            jitter: Self.jobRetryJitter
        )
    }

    /// How start-up waits for a dependency that is not reachable yet (the database, the broker,
    /// the consumer's first connection): 200 ms, doubling, at most 5 s, until the start-up
    /// deadline; no jitter (one process waits, nothing to spread).
    static let startUp = Backoff(initialDelay: .milliseconds(200), maxDelay: .seconds(5), jitter: 0)
    /// How start-up waits for the broker topology that `astroctl migrate` may be declaring right
    /// now: from 500 ms, doubling, at most 5 s.
    static let topologyWait = Backoff(initialDelay: .milliseconds(500), maxDelay: .seconds(5), jitter: 0)

    /// The name of the delay queue for one step, e.g. `chart.calculate.retry.4000ms`.
    public static func delayQueueName(queue: String, step: Duration) -> String {
        "\(queue).retry.\(step.milliseconds)ms"
    }
}

extension Duration {
    /// Whole milliseconds (rounded down).
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
