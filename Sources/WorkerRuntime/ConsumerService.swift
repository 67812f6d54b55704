import AMQP
import Logging
import RetryBackoff
import ServiceLifecycle
import Synchronization

/// Consumes the worker's queues and runs each delivery through the `JobProcessor`, with at
/// most `prefetch` jobs in flight.
///
/// Graceful shutdown (SIGTERM/SIGINT): stop consuming (basic.cancel), let in-flight jobs finish
/// within the drain deadline, then close the connection; deliveries not acknowledged by then go
/// back to their queues for another worker.
package final class ConsumerService<Consumer: DeliverySource, Store: JobStorage, Publisher: MessagePublisher>:
    Service, Sendable
{
    private let consumer: Consumer
    private let processor: JobProcessor<Store, Publisher>
    private let drainTimeout: Duration
    private let logger: Logger
    private let tracker = InFlightTracker()

    /// - Parameter drainTimeout: how long in-flight jobs may run on after a graceful shutdown
    ///   began; past it they are cancelled unacknowledged (the broker hands them out again).
    package init(
        consumer: Consumer,
        processor: JobProcessor<Store, Publisher>,
        drainTimeout: Duration,
        logger: Logger
    ) {
        self.consumer = consumer
        self.processor = processor
        self.drainTimeout = drainTimeout
        self.logger = logger
    }

    /// Consumes until a graceful shutdown has drained the in-flight jobs and closed the consumer.
    /// - Throws: the consumer's start error when no retry can mend it (credentials, a missing
    ///   queue, a closed consumer).
    package func run() async throws {
        guard try await startConsuming() else {
            logger.info("shutdown requested before the consumer could start")
            return
        }
        logger.info("consuming")
        let consumer = self.consumer
        let tracker = self.tracker
        let processor = self.processor
        let draining = DrainFlag()

        // A discarding group: a long-lived group that never awaits its children would otherwise
        // keep every finished child until the group ends (memory grows with every job).
        await withDiscardingTaskGroup { group in
            await withGracefulShutdownHandler {
                for await delivery in consumer.deliveries {
                    // A delivery that raced the cancel stays unacknowledged: the broker requeues
                    // it when the connection closes.
                    if draining.isSet { continue }
                    tracker.enter()
                    group.addTask {
                        await processor.process(delivery, acknowledger: consumer)
                        tracker.leave()
                    }
                }
            } onGracefulShutdown: {
                draining.set()
                Task { await self.drainThenClose() }
            }
            // Jobs still running past the drain deadline are cancelled; their deliveries were
            // never acknowledged, so the broker hands them to another worker.
            if draining.isSet { group.cancelAll() }
        }
        logger.info("consumer stopped")
    }

    /// Starts the consumer. The worker's start-up already reached the broker, but the consumer's own
    /// first connection can still meet an outage (a restart, a cut network): that is retried with
    /// backoff, as a later loss would be, instead of failing the worker. Errors no retry can mend
    /// (credentials, a missing queue, a closed consumer) end the worker with the error.
    /// - Returns: false when a graceful shutdown began before the consumer started.
    private func startConsuming() async throws -> Bool {
        var attempt = 1
        while true {
            let delay = Backoff.startUp.ceiling(afterAttempt: attempt)
            var failure: AMQPError?
            do {
                try await consumer.start()
                return true
            } catch {
                guard error.isRetriable else { throw error }
                failure = error
            }
            logger.warning(
                "AMQP consumer could not start; retrying",
                metadata: [
                    LogKey.reason: "\(failure.map { "\($0)" } ?? "")", LogKey.startAttempt: "\(attempt)",
                    LogKey.retryIn: "\(delay)",
                ]
            )
            let pause = delay
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
            if Task.isShuttingDownGracefully || Task.isCancelled {
                await consumer.close()
                return false
            }
            attempt += 1
        }
    }

    private func drainThenClose() async {
        let pending = tracker.count
        logger.info("draining in-flight jobs", metadata: ["jobs.in_flight": "\(pending)"])
        await consumer.stopConsuming()
        // Polling keeps the deadline simple and cancellation-free; shutdown is not a hot path.
        let deadline = ContinuousClock.now + drainTimeout
        while tracker.count > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        let drained = tracker.count == 0
        if drained {
            logger.info("in-flight jobs finished")
        } else {
            logger.warning(
                "drain deadline passed; unfinished jobs go back to the queue",
                metadata: ["jobs.in_flight": "\(tracker.count)"]
            )
        }
        await consumer.close()
    }
}

/// A one-way flag set when draining starts.
final class DrainFlag: Sendable {
    private let value = Mutex(false)
    var isSet: Bool { value.withLock { $0 } }
    func set() { value.withLock { $0 = true } }
}
