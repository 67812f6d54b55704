/// Capped exponential backoff with jitter for transiently failing jobs.
///
/// Retries go through per-queue delay queues (a message TTL, then dead-lettered back to the
/// work queue), so a waiting retry holds no worker and survives a worker crash. Each delay queue
/// has a fixed TTL, one per step of the exponential sequence up to the cap; a message's own
/// expiration adds jitter below that TTL so retries of a burst of failures spread out.
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts in all, the first one included; after the last one the job is dead-lettered.
    public var maxAttempts: Int
    public var initialDelay: Duration
    public var maxDelay: Duration
    /// The share of a delay that jitter may take off (0.2: a 10 s step waits 8–10 s).
    public var jitter: Double = 0.2

    public init(maxAttempts: Int, initialDelay: Duration, maxDelay: Duration) {
        self.maxAttempts = maxAttempts
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
    }

    /// The delay steps, one delay queue each: initial, 2×, 4×, … up to and including the cap.
    public var steps: [Duration] {
        var steps: [Duration] = []
        var delay = initialDelay
        while delay < maxDelay, steps.count < 32 {
            steps.append(delay)
            delay = delay * 2
        }
        steps.append(maxDelay)
        return steps
    }

    /// The delay step after the given failed attempt (attempt 1 is the first delivery).
    public func step(afterAttempt attempt: Int) -> Duration {
        let steps = self.steps
        return steps[min(max(attempt - 1, 0), steps.count - 1)]
    }

    /// Whether a job that failed on `attempt` gets another one.
    public func shouldRetry(afterAttempt attempt: Int) -> Bool { attempt < maxAttempts }

    /// The message expiration for a retry after `attempt`: the step minus up to `jitter` of it.
    /// - Parameter random: a number in 0..<1 (injected so tests are deterministic).
    public func jitteredDelay(afterAttempt attempt: Int, random: Double) -> Duration {
        let step = step(afterAttempt: attempt)
        let cut = step * (jitter * min(max(random, 0), 1))
        return step - cut
    }

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

    /// Seconds as a floating-point number.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
