import Synchronization

/// A wake-up that coalesces: any number of `notify()` calls before the consumer looks wake it
/// once. Used to nudge the outbox relay right after a commit instead of waiting for its poll.
package final class WakeSignal: Sendable {
    /// The wake-ups; one consumer only.
    let notifications: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    /// Outbox rows this process committed already claimed for its relay (see `handOff`).
    private let handedOff = Mutex<[PendingOutboxMessage]>([])

    package init() {
        (notifications, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    package func notify() { continuation.yield() }

    /// Gives the relay rows that were inserted claimed (and are committed): it publishes them
    /// without claiming them again. Call `notify()` after.
    func handOff(_ rows: [PendingOutboxMessage]) {
        guard !rows.isEmpty else { return }
        handedOff.withLock { $0.append(contentsOf: rows) }
    }

    /// Up to `limit` handed-off rows, oldest first.
    func takeHandedOff(limit: Int) -> [PendingOutboxMessage] {
        handedOff.withLock { rows in
            let taken = Array(rows.prefix(limit))
            rows.removeFirst(taken.count)
            return taken
        }
    }
}

/// Counts work in progress.
final class InFlightTracker: Sendable {
    private let value = Mutex(0)

    var count: Int { value.withLock { $0 } }

    func enter() { value.withLock { $0 += 1 } }

    func leave() { value.withLock { $0 -= 1 } }
}
