import AMQP
import AstroDomain
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import UUIDText

/// Publishes committed outbox rows to the broker with publisher confirms and marks them sent.
///
/// Wakes at once when this process commits messages, and polls for rows other processes left
/// behind (a crash between commit and publish). Rows are claimed for a lease with
/// `FOR UPDATE SKIP LOCKED`, so several relays share the work without publishing a row twice
/// in the normal case; a relay that dies mid-batch only delays its rows until the lease ends,
/// after which another relay publishes them (at-least-once: consumers dedupe by jobId).
package final class OutboxRelay<Store: JobStorage, Publisher: MessagePublisher>: Service, Sendable {
    private let store: Store
    private let publisher: Publisher
    private let signal: WakeSignal
    private let batchSize: Int
    private let pollInterval: Duration
    private let lease: Duration
    private let metrics: WorkerMetrics
    private let logger: Logger
    /// When the relay last looked for rows nobody handed over.
    private let lastSweep = Mutex<ContinuousClock.Instant?>(nil)

    /// - Parameters:
    ///   - signal: wakes the relay; the processor's commits hand it their rows through it.
    ///   - batchSize: rows published (and claimed) per round at most.
    ///   - pollInterval: how often to look for rows nobody handed over (another process's).
    ///   - lease: how long a claimed row is this relay's before another may publish it.
    package init(
        store: Store,
        publisher: Publisher,
        signal: WakeSignal,
        batchSize: Int,
        pollInterval: Duration,
        metrics: WorkerMetrics,
        logger: Logger,
        lease: Duration = OutboxRelayLease.standard
    ) {
        self.store = store
        self.publisher = publisher
        self.signal = signal
        self.batchSize = batchSize
        self.pollInterval = pollInterval
        self.lease = lease
        self.metrics = metrics
        self.logger = logger
    }

    /// Relays until graceful shutdown, then flushes what is pending once more and returns.
    package func run() async throws {
        let signal = self.signal
        let pollInterval = self.pollInterval
        // A ticker task turns the poll interval into wake-ups, so one loop serves both.
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: pollInterval)
                signal.notify()
            }
        }
        defer { ticker.cancel() }
        await cancelWhenGracefulShutdown {
            for await _ in signal.notifications {
                if Task.isCancelled { break }
                await self.drain()
            }
        }
        // Shutdown: the consumers have stopped (they shut down first); publish what they committed.
        await drain(sweep: true)
    }

    /// Publishes batches until nothing is pending or an error stops this round: first the rows
    /// this process's commits handed over (claimed when inserted), then, at most once per poll
    /// interval (or when `sweep`), any rows left claimable. Failures are logged; the rows stay
    /// unsent for a later round.
    ///
    /// The look for left rows is rationed because it was the costliest statement of a busy
    /// database: done after every commit's hand-over, it took 9.2 s of statement time (1,989
    /// calls, 5 rows found) while PostgreSQL used 20 CPU seconds, in a 1,200 journeys/s run of
    /// the gateway benchmark (pg_stat_statements).
    /// Left rows only come from a crash or a failed publish, so the poll interval is soon enough.
    package func drain(sweep: Bool = false) async {
        while true {
            let handedOff = signal.takeHandedOff(limit: batchSize)
            if !handedOff.isEmpty {
                do {
                    try await publish(handedOff)
                } catch {
                    logger.warning("outbox relay round failed; will retry", metadata: [LogKey.reason: "\(error)"])
                }
                continue
            }
            let now = ContinuousClock.now
            let due = lastSweep.withLock { last -> Bool in
                // Half the interval: the ticker's wake-up always finds a look due.
                guard sweep || last.map({ now - $0 >= pollInterval / 2 }) ?? true else { return false }
                last = now
                return true
            }
            guard due else { return }
            do {
                let published = try await relayOnce()
                if published < batchSize { return }
                // A full batch: more may be left; the next look is due at once.
                lastSweep.withLock { $0 = nil }
            } catch {
                logger.warning("outbox relay round failed; will retry", metadata: [LogKey.reason: "\(error)"])
                return
            }
        }
    }

    /// Claims one batch, publishes it, records the outcome. Returns how many rows it claimed.
    /// - Throws: the store's errors; the publisher's when nothing is known to be confirmed (the
    ///   rows are then released for a later round).
    func relayOnce() async throws -> Int {
        let (store, batchSize, lease) = (self.store, self.batchSize, self.lease)
        let pending = try await store.withConnection { transaction in
            try store.claimPending(limit: batchSize, lease: lease, in: transaction)
        }
        guard !pending.isEmpty else { return 0 }
        try await publish(pending)
        return pending.count
    }

    /// Publishes claimed rows with confirms and records which were sent; rows the broker did
    /// not confirm are released for a later retry.
    func publish(_ pending: [PendingOutboxMessage]) async throws {
        let messages = pending.map { row in
            var properties = MessageProperties()
            properties.contentType = row.contentType
            properties.persistent = true
            properties.messageID = row.messageID.lowercasedText
            properties.timestamp = Date()
            if let jobID = row.jobID { properties.correlationID = jobID.lowercasedText }
            for (key, value) in row.message.headers { properties.headers[key] = .string(value) }
            return OutgoingMessage(
                exchange: row.message.exchange,
                routingKey: row.message.routingKey,
                body: row.message.body,
                properties: properties,
                mandatory: row.message.mandatory
            )
        }
        var failedIndices: [Int: AMQPError] = [:]
        let spans = pending.map { OutboxTrace.startPublish($0.message) }
        do {
            try await publisher.publish(messages, timeout: .seconds(30))
        } catch let error as AMQPBatchError {
            failedIndices = error.failures
        } catch {
            OutboxTrace.end(spans, failed: { _ in true })
            // Nothing is known to be confirmed: leave every row to be retried.
            let ids = pending.map(\.id)
            let message = "\(error)"
            let store = self.store
            _ = try? await store.withConnection { try store.markFailed(ids: ids, error: message, in: $0) }
            metrics.recordOutbox(published: 0, failed: ids.count)
            throw error
        }
        OutboxTrace.end(spans, failed: { failedIndices[$0] != nil })
        let sent = pending.enumerated().filter { failedIndices[$0.offset] == nil }.map(\.element.id)
        let failed = pending.enumerated().filter { failedIndices[$0.offset] != nil }
        let store = self.store
        try await store.withConnection { try store.markSent(ids: sent, in: $0) }
        if !failed.isEmpty {
            for (index, row) in failed {
                logger.error(
                    "outbox message refused by the broker",
                    metadata: [
                        "outbox.id": "\(row.id)", "amqp.exchange": "\(row.message.exchange)",
                        "amqp.routing_key": "\(row.message.routingKey)",
                        LogKey.reason: "\(failedIndices[index].map { "\($0)" } ?? "")",
                    ]
                )
            }
            let ids = failed.map(\.element.id)
            let reason = failed.compactMap { failedIndices[$0.offset].map { "\($0)" } }.first ?? "refused"
            try await store.withConnection { try store.markFailed(ids: ids, error: reason, in: $0) }
        }
        metrics.recordOutbox(published: sent.count, failed: failed.count)
    }
}

/// How long an outbox row claimed by a relay (when inserted, or by `claimPending`) is that
/// relay's before another may publish it.
package enum OutboxRelayLease {
    package static let standard: Duration = .seconds(30)
}
