import Synchronization

/// A wake-up that coalesces: any number of `notify()` calls before the consumer looks wake it
/// once. Used to nudge the outbox relay right after a commit instead of waiting for its poll.
final class WakeSignal: Sendable {
    /// The wake-ups; one consumer only.
    let notifications: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (notifications, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    func notify() { continuation.yield() }
}

/// Counts work in progress.
final class InFlightTracker: Sendable {
    private let value = Mutex(0)

    var count: Int { value.withLock { $0 } }

    func enter() { value.withLock { $0 += 1 } }

    func leave() { value.withLock { $0 -= 1 } }
}
