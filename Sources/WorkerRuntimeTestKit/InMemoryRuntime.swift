import AMQP
import Logging
import WorkerRuntime

/// A handler whose commit writes through the in-memory store's transaction.
package typealias InMemoryJobHandler = AnyJobHandler<InMemoryJobStore.Transaction>

/// The runtime's processor and outbox relay wired to an in-memory store, publisher and
/// acknowledger, as `Worker` wires them to PostgreSQL and RabbitMQ.
package final class InMemoryRuntime: Sendable {
    package let store: InMemoryJobStore
    package let publisher: InMemoryPublisher
    package let acknowledger: InMemoryAcknowledger
    package let metrics: WorkerMetrics
    package let signal: WakeSignal
    package let processor: JobProcessor<InMemoryJobStore, InMemoryPublisher>
    package let relay: OutboxRelay<InMemoryJobStore, InMemoryPublisher>

    /// - Parameters:
    ///   - handlers: one per queue, as a worker's.
    ///   - retry: attempts and delays (the delays only name the delay queues: nothing waits).
    ///   - commitBatchSize: jobs per shared transaction at most.
    ///   - committers: shared transactions under way at once.
    ///   - deliveryLimit: deliveries without an outcome before a message is quarantined.
    ///   - logger: silent unless given.
    package init(
        handlers: [InMemoryJobHandler],
        retry: RetryPolicy = RetryPolicy(maxAttempts: 3, initialDelay: .seconds(1), maxDelay: .seconds(4)),
        commitBatchSize: Int = 32,
        committers: Int = 1,
        deliveryLimit: Int = 3,
        relayBatchSize: Int = 100,
        logger: Logger = Logger(label: "worker-runtime-test-kit", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        let store = InMemoryJobStore()
        let publisher = InMemoryPublisher()
        let metrics = WorkerMetrics()
        let signal = WakeSignal()
        self.store = store
        self.publisher = publisher
        self.acknowledger = InMemoryAcknowledger()
        self.metrics = metrics
        self.signal = signal
        self.processor = JobProcessor(
            handlers: handlers,
            store: store,
            publisher: publisher,
            retry: retry,
            metrics: metrics,
            logger: logger,
            outboxSignal: signal,
            commitBatchSize: commitBatchSize,
            committers: committers,
            deliveryLimit: deliveryLimit
        )
        self.relay = OutboxRelay(
            store: store,
            publisher: publisher,
            signal: signal,
            batchSize: relayBatchSize,
            pollInterval: .seconds(3600),
            metrics: metrics,
            logger: logger
        )
    }

    /// Processes one delivery to its settlement with `acknowledger`.
    package func process(_ delivery: Delivery) async {
        await processor.process(delivery, acknowledger: acknowledger)
    }

    /// Processes deliveries at once (concurrently, as a consumer with that many in flight).
    package func processConcurrently(_ deliveries: [Delivery]) async {
        await withDiscardingTaskGroup { group in
            for delivery in deliveries {
                group.addTask { await self.process(delivery) }
            }
        }
    }

    /// One round of the outbox relay: the rows commits handed over, then any left claimable.
    package func relayOutbox() async {
        await relay.drain(sweep: true)
    }
}
