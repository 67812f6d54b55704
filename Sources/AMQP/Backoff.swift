import Foundation

/// Capped exponential backoff with jitter for reconnect attempts.
///
/// Attempt `n` (from 1) waits a random time in `[base/2, base]`, where
/// `base = min(maxDelay, initialDelay * multiplier^(n-1))`: spread out so that many clients restarted
/// together do not reconnect in lockstep, never longer than `maxDelay`.
struct Backoff: Sendable {
    var policy: AMQPConfiguration.Reconnect

    /// The un-jittered delay of attempt `attempt` (1-based), capped at `maxDelay`.
    func baseDelay(attempt: Int) -> Duration {
        let initial = max(policy.initialDelay.seconds, 0.001)
        let cap = max(policy.maxDelay.seconds, initial)
        let multiplier = max(policy.multiplier, 1)
        let exponent = Double(max(attempt, 1) - 1)
        let raw = initial * pow(multiplier, min(exponent, 1000))
        let seconds = raw.isFinite ? min(raw, cap) : cap
        return .nanoseconds(Int64(seconds * 1e9))
    }

    /// The jittered delay of attempt `attempt`, with `random` in `0...1` choosing within `[base/2, base]`.
    func delay(attempt: Int, random: Double) -> Duration {
        let base = baseDelay(attempt: attempt).seconds
        let fraction = 0.5 + 0.5 * min(max(random, 0), 1)
        return .nanoseconds(Int64(base * fraction * 1e9))
    }

    /// The jittered delay of attempt `attempt`, with a fresh random number.
    func delay(attempt: Int) -> Duration {
        delay(attempt: attempt, random: Double.random(in: 0...1))
    }
}
