import AMQP
import AstroDomain
import Foundation

/// What the broker's length backstop dropped from a dead-letter queue, drained from
/// `astro.dead-dropped` and named one by one.
///
/// The backstop (`BrokerAccess.deadLetterBackstopLength`, far above `DEAD_LETTER_MAX_LENGTH`)
/// drops only from a queue the task stopped bounding, and its policy dead-letters each dropped
/// message into `astro.dead-dropped` (x-death reason `maxlen`) rather than discarding it. Each
/// run takes everything there, logs it (queue, job id, dead-letter code) and records it as a drop
/// of reason `broker-max-length` under the dead-letter queue it fell from, so the count is exact.
/// A message is acknowledged as it is counted, and the count is written when the run ends: a
/// task killed in between loses those counts (never counts one twice); its log lines remain.
extension DeadLetterBound {
    /// The most messages one run takes from `astro.dead-dropped`; the rest wait for the next run.
    public static let maximumBrokerDropsPerRun = 100_000

    /// Drains `astro.dead-dropped` (a dry run only looks at the first `prefetch`).
    /// - Returns: one entry per message taken (or that would be), reason `broker-max-length`.
    /// - Throws: `AMQPError` when the broker fails; a missing queue (a broker not yet migrated
    ///   to this contract) is logged and skipped.
    public func drainBrokerDrops(dryRun: Bool) async throws -> [DroppedDeadLetter] {
        let publisher = AMQPPublisher(configuration: amqp, logger: logger)
        try await publisher.connect()
        do {
            let dropped = try await drainBrokerDrops(publisher: publisher, dryRun: dryRun)
            await publisher.close()
            return dropped
        } catch {
            await publisher.close()
            throw error
        }
    }

    private func drainBrokerDrops(publisher: AMQPPublisher, dryRun: Bool) async throws -> [DroppedDeadLetter] {
        let queue = BrokerNames.deadDroppedQueue
        let length: Int
        // (A `catch where` on this typed error crashes the 6.3 compiler.)
        let state: Result<AMQPPublisher.QueueState, AMQPError>
        do {
            state = .success(try await publisher.queueState(queue))
        } catch {
            state = .failure(error)
        }
        switch state {
        case .success(let found): length = Int(found.messageCount)
        case .failure(let error) where error.kind == .notFound:
            logger.warning(
                "no \(queue) queue: what the broker's dead-letter backstop drops cannot be counted; run astroctl migrate"
            )
            return []
        case .failure(let error): throw error
        }
        guard length > 0 else { return [] }
        let consumer = AMQPConsumer(
            configuration: amqp,
            topology: Topology(),
            queues: [queue],
            prefetch: Self.prefetch,
            logger: logger
        )
        try await consumer.start()
        // The stream ends when the consumer closes: close it if the next message is late.
        let watchdog = Watchdog()
        let quiet = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.deliveryWait)
                if watchdog.expired() {
                    await consumer.close()
                    return
                }
            }
        }
        var dropped: [DroppedDeadLetter] = []
        let limit = min(length, dryRun ? Int(Self.prefetch) : Self.maximumBrokerDropsPerRun)
        for await delivery in consumer.deliveries {
            watchdog.touch()
            let drop = Self.describeBrokerDrop(delivery)
            if !dryRun { try await consumer.ack(delivery) }
            logger.notice(
                dryRun ? "dead letter dropped by the broker (would be counted)" : "dead letter dropped by the broker",
                metadata: [
                    "queue": "\(drop.queue)", "job_id": "\(drop.jobID ?? "-")", "reason": "\(drop.reason.rawValue)",
                    "dead_letter_code": "\(drop.deadLetterCode ?? "-")",
                    "job_type": "\(delivery.properties.type ?? "-")",
                    "dead_lettered_at": "\(drop.deadLetteredAt.map { ISO8601.string(from: $0) } ?? "-")",
                ]
            )
            dropped.append(drop)
            if dropped.count >= limit { break }
        }
        quiet.cancel()
        await consumer.close()
        logger.info(
            "broker-dropped dead letters drained",
            metadata: ["queue": "\(queue)", "length_before": "\(length)", "counted": "\(dropped.count)"]
        )
        return dropped
    }

    /// The dead-letter queue a message fell from (the newest `x-death` entry, the drop itself)
    /// and what it had been dead-lettered for.
    static func describeBrokerDrop(_ delivery: Delivery) -> DroppedDeadLetter {
        var queue = "unknown"
        var code: String?
        if case .array(let deaths)? = delivery.properties.headers["x-death"] {
            if case .table(let newest)? = deaths.first, case .string(let name)? = newest["queue"] {
                queue = String(name.prefix(255))
            }
            // The death before the drop, if the broker dead-lettered it into the .dead queue.
            if deaths.count > 1, case .table(let earlier) = deaths[1], case .string(let text)? = earlier["reason"] {
                code = String(text.prefix(100))
            }
        }
        if case .string(let text)? = delivery.properties.headers[BrokerNames.Header.reasonCode] {
            code = String(text.prefix(100))
        }
        return DroppedDeadLetter(
            queue: queue,
            jobID: jobID(delivery.body),
            reason: .brokerMaxLength,
            deadLetterCode: code,
            deadLetteredAt: deadLetteredAt(delivery.properties)
        )
    }
}
