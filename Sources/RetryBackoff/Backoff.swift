import Foundation

/// The one retry schedule of the package: capped exponential backoff with jitter, and how many
/// attempts. Used by the HTTP clients' `RetryLoop` (full jitter), the AMQP reconnects (half
/// jitter), the workers' job retries through delay queues (a fifth off at most) and the start-up
/// waits for the broker and the database (no jitter); each keeps its own values.
///
/// Attempt `n` (from 1) is followed by a wait of at most
/// `ceiling(n) = min(maxDelay, initialDelay × multiplier^(n-1))`; the jitter takes up to
/// `jitter × ceiling(n)` off it, so that clients failing together do not retry in lockstep.
public struct Backoff: Sendable, Hashable {
    /// Attempts in all, the first included (`Int.max`: no bound).
    public var maxAttempts: Int
    /// The ceiling of the wait after the first attempt.
    public var initialDelay: Duration
    /// No wait is longer (a larger `initialDelay` raises it to that).
    public var maxDelay: Duration
    /// How much the ceiling grows after each attempt (below 1 counts as 1).
    public var multiplier: Double
    /// The share of a wait that jitter may take off, 0 (none) to 1 (full jitter: anything from
    /// zero to the ceiling).
    public var jitter: Double

    /// A schedule; nothing is checked here (the arithmetic forces odd values into range).
    public init(
        maxAttempts: Int = .max,
        initialDelay: Duration,
        maxDelay: Duration,
        multiplier: Double = 2,
        jitter: Double
    ) {
        self.maxAttempts = maxAttempts
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
        self.multiplier = multiplier
        self.jitter = jitter
    }

    /// Whether an attempt may follow attempt `attempt` (1 is the first).
    public func allowsAttempt(after attempt: Int) -> Bool { attempt < maxAttempts }

    /// The longest wait after attempt `attempt` (from 1): `min(maxDelay, initialDelay ×
    /// multiplier^(attempt-1))`, never below zero.
    public func ceiling(afterAttempt attempt: Int) -> Duration {
        .seconds(double: ceilingSeconds(afterAttempt: attempt))
    }

    /// The wait after attempt `attempt` (from 1): the ceiling, less up to `jitter` of it.
    /// - Parameter random: a number in `0...1` (injected so tests are deterministic): 1 waits the
    ///   whole ceiling, 0 the shortest wait the jitter allows.
    public func delay(afterAttempt attempt: Int, random: Double) -> Duration {
        let share = jitter.clamped(to: 0...1)
        let fraction = (1 - share) + share * random.clamped(to: 0...1)
        return .seconds(double: ceilingSeconds(afterAttempt: attempt) * fraction)
    }

    /// The distinct ceilings in order, from `initialDelay` up to and including the cap (at most
    /// 33): the workers declare one delay queue per step.
    public var steps: [Duration] {
        var steps: [Duration] = []
        for attempt in 1...33 {
            let step = ceiling(afterAttempt: attempt)
            // A ceiling that stopped growing stays where it is: the cap, or no growth at all.
            guard steps.last != step else { break }
            steps.append(step)
            if step >= maxDelay { break }
        }
        return steps
    }

    private func ceilingSeconds(afterAttempt attempt: Int) -> Double {
        let initial = max(initialDelay.seconds, 0)
        let cap = max(maxDelay.seconds, initial)
        let exponent = Double(min(max(attempt - 1, 0), 1_000))
        let raw = initial * pow(max(multiplier, 1), exponent)
        return raw.isFinite ? min(raw, cap) : cap
    }
}

extension Duration {
    /// The duration in seconds, fractions included.
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// A duration of `value` seconds (to the nanosecond: waits are never finer); saturating, and
    /// zero for NaN.
    public static func seconds(double value: Double) -> Duration {
        let nanoseconds = (value * 1e9).rounded()
        guard nanoseconds.isFinite else { return nanoseconds > 0 ? .nanoseconds(Int64.max) : .zero }
        return .nanoseconds(Int64(exactly: nanoseconds) ?? (nanoseconds > 0 ? .max : .min))
    }
}

extension Comparable {
    /// The value moved into `range` if outside it.
    public func clamped(to range: ClosedRange<Self>) -> Self { min(max(self, range.lowerBound), range.upperBound) }
}
