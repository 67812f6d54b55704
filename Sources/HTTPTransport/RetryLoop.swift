import Foundation
import RetryBackoff

/// The clock, sleep and randomness a retry loop uses; the defaults are real. Tests inject a
/// virtual clock and a sleep that returns at once.
public struct RetryClock: Sendable {
    /// Monotonic time, for the deadline.
    public var now: @Sendable () -> ContinuousClock.Instant
    /// Waits between attempts; throws when the task is cancelled.
    public var sleep: @Sendable (Duration) async throws -> Void
    /// A uniform draw from `0..<1`, for the jitter.
    public var random: @Sendable () -> Double

    public init(
        now: @escaping @Sendable () -> ContinuousClock.Instant,
        sleep: @escaping @Sendable (Duration) async throws -> Void,
        random: @escaping @Sendable () -> Double
    ) {
        self.now = now
        self.sleep = sleep
        self.random = random
    }

    /// The system clock, `Task.sleep` and the system random generator.
    public static let system = RetryClock(
        now: { ContinuousClock.now },
        sleep: { try await Task.sleep(for: $0) },
        random: { Double.random(in: 0..<1) }
    )
}

/// How patiently a call is retried: attempts and capped exponential backoff with full jitter
/// (the package's one `Backoff`), and a deadline for the whole call.
public struct RetrySchedule: Sendable, Hashable {
    /// Attempts per call (the first included; 1 turns retries off) and the waits between them:
    /// full jitter, uniform in `0...min(maxDelay, baseDelay × 2^(attempt-1))` (a `Retry-After`
    /// may wait longer).
    public var backoff: Backoff
    /// The whole call, every attempt and wait included, ends within this.
    public var deadline: Duration
    /// One attempt's timeout (the deadline may cut the last one short).
    public var requestTimeout: Duration

    /// - Parameters:
    ///   - maxAttempts: requests per call at most, the first included.
    ///   - baseDelay: the backoff before the second attempt is drawn from `0...baseDelay`, then doubles.
    ///   - maxDelay: the backoff never exceeds this.
    public init(maxAttempts: Int, baseDelay: Duration, maxDelay: Duration, deadline: Duration, requestTimeout: Duration)
    {
        self.backoff = Backoff(maxAttempts: maxAttempts, initialDelay: baseDelay, maxDelay: maxDelay, jitter: 1)
        self.deadline = deadline
        self.requestTimeout = requestTimeout
    }
}

/// What one attempt came to, as the client's API rules read the exchange.
public enum AttemptVerdict<Failure: Error>: Sendable where Failure: Sendable {
    /// The answer the call wanted.
    case success(Data)
    /// A failure no retry mends: the call ends with it.
    case final(Failure)
    /// A failure a later attempt may not meet (rate limit, 5xx, timeout, network).
    case retryable(Failure)
}

/// The error of a client whose calls `RetryLoop` repeats.
public protocol RetriedFailure: Error, Sendable {
    /// How long the server asked to wait before the next attempt (`Retry-After`), if it did.
    var retryAfter: Duration? { get }
    /// The calling task was cancelled: no further attempt.
    var isCancellation: Bool { get }
    /// No complete answer within the attempt's own timeout (not an HTTP status meaning timeout).
    var isExchangeTimeout: Bool { get }
    /// This failure, as the call's outcome when cancelled while waiting for the next attempt.
    func cancelledWhileWaiting(attempts: Int) -> Self
    /// This failure, as the call's outcome when the deadline left no room for another attempt.
    func deadlineExceeded(deadline: Duration, attempts: Int) -> Self
}

/// The retry loop of the HTTP clients (App Store Server API, OpenAI-compatible chat and images):
/// attempts until a success or a final failure, waiting `Retry-After` or the schedule's backoff
/// between them, within the attempts and the deadline.
public enum RetryLoop {
    /// Runs `attempt` until it succeeds or a failure ends the call.
    /// - Parameters:
    ///   - schedule: attempts, backoff, deadline and request timeout (used as given: validate first).
    ///   - clock: real time unless a test injects its own.
    ///   - attempt: one attempt, given its number (from 1) and its timeout; it may throw to end the
    ///     call at once (e.g. a request it cannot build).
    /// - Returns: the successful answer and the attempts made.
    /// - Throws: the final failure; the last retryable one once attempts run out; the last one as
    ///   `deadlineExceeded` when the deadline cuts the call short, or as `cancelledWhileWaiting`.
    public static func run<Failure: RetriedFailure>(
        schedule: RetrySchedule,
        clock: RetryClock,
        attempt body: (_ number: Int, _ timeout: Duration) async throws(Failure) -> AttemptVerdict<Failure>
    ) async throws(Failure) -> (body: Data, attempts: Int) {
        let requestTimeout = schedule.requestTimeout.clamped(to: .milliseconds(1)...(.seconds(3_600)))
        let deadline = clock.now() + schedule.deadline
        var attempt = 0
        var lastFailure: Failure?
        while true {
            let remaining = deadline - clock.now()
            if let lastFailure, remaining <= .zero {
                throw lastFailure.deadlineExceeded(deadline: schedule.deadline, attempts: attempt)
            }
            attempt += 1
            let attemptTimeout = min(requestTimeout, max(remaining, .milliseconds(1)))
            let failure: Failure
            switch try await body(attempt, attemptTimeout) {
            case .success(let answer): return (answer, attempt)
            case .final(let error): throw error
            case .retryable(let error): failure = error
            }
            lastFailure = failure
            if failure.isCancellation { throw failure }
            if failure.isExchangeTimeout && attemptTimeout < requestTimeout {
                // The deadline, not the request timeout, cut this attempt short.
                throw failure.deadlineExceeded(deadline: schedule.deadline, attempts: attempt)
            }
            guard schedule.backoff.allowsAttempt(after: attempt) else { throw failure }

            let delay = failure.retryAfter ?? schedule.backoff.delay(afterAttempt: attempt, random: clock.random())
            if clock.now() + delay >= deadline {
                throw failure.deadlineExceeded(deadline: schedule.deadline, attempts: attempt)
            }
            do {
                try await clock.sleep(delay)
            } catch {
                throw failure.cancelledWhileWaiting(attempts: attempt)
            }
        }
    }
}
