import AMQP
import AstroDomain
import Foundation
import Logging
import Synchronization
import UUIDText

/// One dead letter the maintenance task dropped, and why.
public struct DroppedDeadLetter: Sendable, Equatable {
    /// Why a dead letter is dropped; the raw values are the stable reason codes in logs and in
    /// `maintenance_runs.dead_letters_dropped`.
    public enum Reason: String, Sendable, CaseIterable {
        /// The queue held more than `DEAD_LETTER_MAX_LENGTH`: the oldest went.
        case maxLength = "max-length"
        /// It was dead-lettered longer ago than `DEAD_LETTER_MAX_AGE`.
        case maxAge = "max-age"
        /// The broker's length backstop dropped it (the task had not bounded the queue in time);
        /// counted when the task drains `astro.dead-dropped`.
        case brokerMaxLength = "broker-max-length"
    }

    public var queue: String
    /// The job id of its body, when the body names one.
    public var jobID: String?
    public var reason: Reason
    /// Why it had been dead-lettered (`x-astro-reason-code`, or the broker's `x-death` reason).
    public var deadLetterCode: String?
    public var deadLetteredAt: Date?
}

/// Keeps every `<queue>.dead` queue within `DEAD_LETTER_MAX_LENGTH` messages and
/// `DEAD_LETTER_MAX_AGE`, dropping the oldest first and naming each one it drops (job id,
/// reason) in the log and in the run's record.
///
/// The bound is enforced here rather than by a broker policy (`max-length`, `message-ttl`)
/// because the broker drops silently: nothing would count or name what fell off. Dead-letter
/// queues are FIFO, so the head is the oldest: the task consumes from the head, acknowledges
/// (drops) while the message is beyond a bound, and closes its channel at the first message
/// within both, which returns that message and the few prefetched behind it to their places.
public struct DeadLetterBound: Sendable {
    /// Deliveries fetched ahead while walking a queue; what is not dropped goes back on close.
    public static let prefetch: UInt16 = 100
    /// A queue whose next message takes longer than this to arrive is left as it is (another
    /// consumer, such as an operator's replay, is taking them).
    public static let deliveryWait: Duration = .seconds(5)

    let amqp: AMQPConfiguration
    let maxAge: Duration
    let maxLength: Int
    let logger: Logger

    /// - Parameters:
    ///   - amqp: the broker connection (a user that may read the `.dead` queues).
    ///   - maxAge: `DEAD_LETTER_MAX_AGE`.
    ///   - maxLength: `DEAD_LETTER_MAX_LENGTH`.
    ///   - logger: one line per dropped dead letter and per queue.
    public init(amqp: AMQPConfiguration, maxAge: Duration, maxLength: Int, logger: Logger) {
        self.amqp = amqp
        self.maxAge = maxAge
        self.maxLength = maxLength
        self.logger = logger
    }

    /// The dead-letter queues of every job type of the contract.
    public static var contractQueues: [String] { JobType.all.map { BrokerNames.deadLetterQueue(of: $0.rawValue) } }

    /// Bounds each queue in turn.
    ///
    /// - Parameters:
    ///   - queues: the dead-letter queues.
    ///   - now: the moment ages are counted from.
    ///   - dryRun: count what would be dropped (within the first `prefetch` messages past the
    ///     length bound) and drop nothing.
    /// - Returns: the dead letters dropped (or that would be).
    /// - Throws: `AMQPError` when the broker cannot be reached or a queue does not exist.
    public func run(queues: [String], now: Date, dryRun: Bool) async throws -> [DroppedDeadLetter] {
        let publisher = AMQPPublisher(configuration: amqp, logger: logger)
        try await publisher.connect()
        var dropped: [DroppedDeadLetter] = []
        do {
            for queue in queues {
                let length = Int(try await publisher.queueState(queue).messageCount)
                let here = try await bound(queue: queue, length: length, now: now, dryRun: dryRun)
                logger.info(
                    "dead-letter queue bounded",
                    metadata: [
                        "queue": "\(queue)", "length_before": "\(length)", "dropped": "\(here.count)",
                        "dry_run": "\(dryRun)",
                    ]
                )
                dropped += here
            }
        } catch {
            await publisher.close()
            throw error
        }
        await publisher.close()
        return dropped
    }

    /// Walks one queue from its head.
    func bound(queue: String, length: Int, now: Date, dryRun: Bool) async throws -> [DroppedDeadLetter] {
        guard length > 0 else { return [] }
        let excess = max(0, length - maxLength)
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
        let timer = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.deliveryWait)
                if watchdog.expired() {
                    await consumer.close()
                    return
                }
            }
        }
        var dropped: [DroppedDeadLetter] = []
        var seen = 0
        for await delivery in consumer.deliveries {
            watchdog.touch()
            let reason = Self.reason(index: seen, excess: excess, delivery: delivery, now: now, maxAge: maxAge)
            seen += 1
            guard let reason else { break }
            let drop = Self.describe(delivery, queue: queue, reason: reason)
            if !dryRun {
                try await consumer.ack(delivery)
            }
            logger.notice(
                dryRun ? "dead letter would be dropped" : "dead letter dropped",
                metadata: [
                    "queue": "\(queue)", "job_id": "\(drop.jobID ?? "-")", "reason": "\(reason.rawValue)",
                    "dead_letter_code": "\(drop.deadLetterCode ?? "-")",
                    "dead_lettered_at": "\(drop.deadLetteredAt.map { ISO8601.string(from: $0) } ?? "-")",
                ]
            )
            dropped.append(drop)
            // A dry run cannot see past what it holds unacknowledged.
            if seen >= length || (dryRun && seen >= Int(Self.prefetch)) { break }
        }
        timer.cancel()
        await consumer.close()
        return dropped
    }

    /// Why the `index`-th message from the head goes, or nil when it stays (and so does every
    /// message behind it).
    static func reason(
        index: Int,
        excess: Int,
        delivery: Delivery,
        now: Date,
        maxAge: Duration
    ) -> DroppedDeadLetter.Reason? {
        if index < excess { return .maxLength }
        if let at = deadLetteredAt(delivery.properties),
            now.timeIntervalSince(at) > TimeInterval(maxAge.components.seconds)
        {
            return .maxAge
        }
        return nil
    }

    /// When a message was dead-lettered: the runtime's `x-astro-dead-lettered-at`, else the
    /// broker's newest `x-death` time, else the message's own timestamp; nil when none is there
    /// (such a message is kept until the length bound reaches it).
    static func deadLetteredAt(_ properties: MessageProperties) -> Date? {
        if case .string(let text)? = properties.headers[BrokerNames.Header.deadLetteredAt],
            let date = ISO8601.date(from: text)
        {
            return date
        }
        if case .array(let deaths)? = properties.headers["x-death"], case .table(let first)? = deaths.first,
            case .int(let seconds)? = first["time"]
        {
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }
        return properties.timestamp
    }

    static func describe(_ delivery: Delivery, queue: String, reason: DroppedDeadLetter.Reason) -> DroppedDeadLetter {
        var code: String?
        if case .string(let text)? = delivery.properties.headers[BrokerNames.Header.reasonCode] {
            code = String(text.prefix(100))
        } else if case .array(let deaths)? = delivery.properties.headers["x-death"],
            case .table(let first)? = deaths.first, case .string(let text)? = first["reason"]
        {
            code = String(text.prefix(100))
        }
        return DroppedDeadLetter(
            queue: queue,
            jobID: jobID(delivery.body),
            reason: reason,
            deadLetterCode: code,
            deadLetteredAt: deadLetteredAt(delivery.properties)
        )
    }

    /// The body's `jobId`, when it is a JSON object naming one in the shape of a UUID.
    static func jobID(_ body: Data) -> String? {
        guard body.count <= 1 << 20,
            let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let text = object["jobId"] as? String, UUID(text: text) != nil
        else { return nil }
        return text.lowercased()
    }
}

/// Whether a delivery arrived since the last check.
final class Watchdog: Sendable {
    private let touched = Mutex(true)

    func touch() { touched.withLock { $0 = true } }

    /// True when nothing arrived since the previous call.
    func expired() -> Bool {
        touched.withLock { value in
            defer { value = false }
            return !value
        }
    }
}
