import AMQP
import AstroCLISupport
import AstroDomain
import Foundation
import Postgres
import Synchronization
import UUIDText

/// One message in a `<queue>.dead` queue, read but not settled, with what its headers and the
/// job's row say about it.
///
/// Where the facts come from: the message (body, `x-astro-*` headers a worker wrote, `x-death`
/// the broker wrote when it dead-lettered the message itself) is the dead letter — only it can be
/// replayed; the `jobs` row (status, error, attempts, user) says what became of the job, and
/// may be newer than the message (a job replayed and finished since, or dead-lettered again).
struct DeadLetter: Sendable {
    var delivery: Delivery
    /// The `<queue>.dead` queue it was read from.
    var deadQueue: String
    /// The work queue it came from (its job type).
    var workQueue: String
    /// The body's `jobId`, when the body names one.
    var jobID: JobID?
    var reasonCode: String
    var reason: String
    /// The attempt header (attempts before the dead letter), when present.
    var attempt: Int?
    /// When it was dead-lettered: a worker's `x-astro-dead-lettered-at`, else the broker's
    /// `x-death` time.
    var failedAt: Date?

    init(_ delivery: Delivery) {
        self.delivery = delivery
        deadQueue = delivery.queue
        let headers = delivery.properties.headers
        func text(_ key: String) -> String? {
            if case .string(let value)? = headers[key] { return value }
            return nil
        }
        // The broker's record of its own dead-lettering (a rejected or over-limit message): the
        // first entry is the latest.
        var death: [String: AMQPFieldValue] = [:]
        if case .array(let entries)? = headers["x-death"], case .table(let latest)? = entries.first { death = latest }
        func deathText(_ key: String) -> String? {
            if case .string(let value)? = death[key] { return value }
            return nil
        }
        let fallbackQueue =
            deadQueue.hasSuffix(".dead") ? String(deadQueue.dropLast(".dead".count)) : deadQueue
        workQueue = text(BrokerNames.Header.originalQueue) ?? deathText("queue") ?? fallbackQueue
        reasonCode = text(BrokerNames.Header.reasonCode) ?? deathText("reason").map { "broker-\($0)" } ?? "unknown"
        reason =
            text(BrokerNames.Header.reasonMessage)
            ?? deathText("reason").map { "dead-lettered by the broker (\($0))" } ?? "no reason recorded"
        switch headers[BrokerNames.Header.attempt] {
        case .int(let number)?: attempt = Int(clamping: number)
        case .string(let value)?: attempt = Int(value)
        default: attempt = nil
        }
        var failedAt = text(BrokerNames.Header.deadLetteredAt).flatMap(ISO8601.date(from:))
        if failedAt == nil, case .int(let seconds)? = death["time"] {
            failedAt = Date(timeIntervalSince1970: Double(seconds))
        }
        self.failedAt = failedAt
        jobID = Self.jobID(in: delivery.body)
    }

    /// The `jobId` of a JSON object body.
    static func jobID(in body: Data) -> JobID? {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let text = object["jobId"] as? String
        else { return nil }
        return JobID(text)
    }
}

/// A job's row, as the dead-letter commands show it.
struct DeadJobRow: Sendable {
    var kind: String
    var status: String
    var attempts: Int
    var errorCode: String?
    var errorMessage: String?
    var userID: UUID?
    var finishedAt: Date?
    /// When the job first died, if it was replayed since (recorded with the replay).
    var firstFailedBeforeReplay: Date?
}

/// Reads dead-letter queues without taking anything away.
///
/// Why a consumer and not `basic.get`: a message is only read by being delivered, and AMQP has no
/// "peek". `basic.get` followed by a requeueing `nack` puts each message back at the head, so
/// reading a queue that way meets the same message again and again. Instead one consumer with
/// manual acknowledgement takes the queue's messages (up to a limit) and holds them unacknowledged
/// while the command works; what it does not acknowledge goes back to the queue, in order, when
/// it closes — or when the broker sees its connection drop, so a killed `astroctl` loses nothing.
/// A dead letter is acknowledged (removed) only after what replaces it is durable: for a replay,
/// the job's row and the operator action committed and the republished copy confirmed by the
/// broker; for a purge, the operator action committed.
final class DeadLetterReader: Sendable {
    let consumer: AMQPConsumer
    let letters: [DeadLetter]
    /// Messages the queues held beyond the limit, not read.
    let unread: Int
    private let removed = Mutex(Set<UInt64>())

    private init(consumer: AMQPConsumer, letters: [DeadLetter], unread: Int) {
        self.consumer = consumer
        self.letters = letters
        self.unread = unread
    }

    /// The largest number of messages read at once.
    static let maximumLimit = 5000

    /// Reads up to `limit` messages of the dead-letter queues (those that exist).
    /// - Throws: `AMQPError` when the broker cannot be reached or a queue cannot be consumed
    ///   (the broker user may not read it: run as the broker's administrator).
    static func open(
        queues: [String],
        limit: Int,
        connection: ConnectionOptions,
        publisher: AMQPPublisher
    ) async throws -> DeadLetterReader {
        var present: [String] = []
        var held = 0
        for queue in queues {
            let state: AMQPPublisher.QueueState
            do {
                state = try await publisher.queueState(queue)
            } catch {
                // A job type whose queues were never declared has no dead letters.
                if error.kind == .notFound { continue }
                throw error
            }
            if state.messageCount > 0 {
                present.append(queue)
                held += Int(state.messageCount)
            }
        }
        let wanted = min(held, limit)
        let consumer = AMQPConsumer(
            configuration: try connection.amqpConfiguration(),
            topology: .empty,
            queues: present,
            prefetch: UInt16(clamping: max(wanted, 1)),
            logger: connection.logger
        )
        guard wanted > 0 else { return DeadLetterReader(consumer: consumer, letters: [], unread: 0) }
        try await consumer.start()
        // Every message counted is delivered at once (the prefetch covers them); the deadline
        // only matters when another reader took some meanwhile.
        let collector = Task {
            var collected: [Delivery] = []
            for await delivery in consumer.deliveries {
                collected.append(delivery)
                if collected.count >= wanted { break }
            }
            return collected
        }
        let timer = Task {
            try await Task.sleep(for: .seconds(5))
            collector.cancel()
        }
        let deliveries = await collector.value
        timer.cancel()
        // Messages that arrived beyond `wanted` stay unacknowledged and go back on close.
        await consumer.stopConsuming()
        return DeadLetterReader(
            consumer: consumer,
            letters: deliveries.map(DeadLetter.init),
            unread: max(0, held - deliveries.count)
        )
    }

    /// Removes a dead letter from its queue.
    /// - Throws: `AMQPError` (the connection dropped: the message is back in its queue).
    func remove(_ letter: DeadLetter) async throws {
        try await consumer.ack(letter.delivery, multiple: false)
        removed.withLock { _ = $0.insert(letter.delivery.deliveryTag) }
    }

    /// The delivery tags acknowledged so far.
    var removedTags: Set<UInt64> { removed.withLock { $0 } }

    /// Quorum queues count every return of a message to the queue (before RabbitMQ 4.3 even a
    /// return on close), and RabbitMQ 4 drops a message past the queue's delivery limit (20 by
    /// default; `.dead` queues have no dead-letter exchange of their own). A dead letter read this
    /// often is therefore moved instead of returned: a copy with every header but the count is
    /// published to the same queue and confirmed, and only then the original acknowledged.
    static let refreshAfterDeliveries = 10

    /// Gives back every message not removed; one read `refreshAfterDeliveries` times is moved
    /// (copied, confirmed, then acknowledged), so reading never wears a dead letter out.
    func close(publisher: AMQPPublisher) async {
        let removed = removedTags
        for letter in letters where !removed.contains(letter.delivery.deliveryTag) {
            let headers = letter.delivery.properties.headers
            guard case .int(let count)? = headers[BrokerNames.Header.deliveryCount],
                count >= Self.refreshAfterDeliveries, !letter.delivery.isBodyWithheld
            else { continue }
            var properties = letter.delivery.properties
            properties.headers[BrokerNames.Header.deliveryCount] = nil
            properties.persistent = true
            let copy = OutgoingMessage(
                exchange: BrokerNames.retryExchange,
                routingKey: letter.deadQueue,
                body: letter.delivery.body,
                properties: properties,
                mandatory: true
            )
            do {
                try await publisher.publish(copy, timeout: .seconds(10))
                try await consumer.ack(letter.delivery, multiple: false)
            } catch {
                // Not moved: returned as it is, which loses nothing today.
                continue
            }
        }
        await consumer.close()
    }

    /// Gives back every message not removed (without moving any: the broker is unreachable).
    func close() async { await consumer.close() }
}

/// The SQL of the operator commands, on astroctl's role (`astro_operator`, migration 0020).
enum OperatorStore {
    /// The rows of these jobs, by id.
    static func rows(_ ids: [JobID], database: PostgresConnection) throws -> [JobID: DeadJobRow] {
        guard !ids.isEmpty else { return [:] }
        let list = "{" + Set(ids.map { $0.uuid.lowercasedText }).sorted().joined(separator: ",") + "}"
        let rows = try database.query(
            """
            SELECT id, kind, status, attempts, error->>'code' AS code, error->>'message' AS message, user_id,
                finished_at,
                -- A replay removes the dead letter of the first failure; its action kept the time.
                (SELECT min((a.detail->>'previousFinishedAt')::timestamptz) FROM operator_actions a
                 WHERE a.job_id = jobs.id AND a.action = 'dead.replay') AS first_failed_at
            FROM jobs WHERE id = ANY($1::uuid[])
            """,
            [list]
        )
        var found: [JobID: DeadJobRow] = [:]
        for row in rows {
            found[JobID(try row.decode(UUID.self, "id"))] = DeadJobRow(
                kind: try row.decode(String.self, "kind"),
                status: try row.decode(String.self, "status"),
                attempts: try row.decode(Int.self, "attempts"),
                errorCode: try row.decode(String?.self, "code"),
                errorMessage: try row.decode(String?.self, "message"),
                userID: try row.decode(UUID?.self, "user_id"),
                finishedAt: try row.decode(Date?.self, "finished_at"),
                firstFailedBeforeReplay: try row.decode(Date?.self, "first_failed_at")
            )
        }
        return found
    }

    /// Records an operator action.
    /// - Returns: its id.
    static func record(
        _ action: String,
        operator name: String,
        jobID: JobID?,
        queue: String?,
        reason: String?,
        outcome: String,
        detail: JSONValue = [:],
        database: PostgresConnection
    ) throws -> Int64 {
        let rows = try database.query(
            """
            INSERT INTO operator_actions (operator, action, job_id, queue, reason, outcome, detail, completed_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, CASE WHEN $6 = 'pending' THEN NULL ELSE now() END)
            RETURNING id
            """,
            [name, action, jobID?.uuid, queue, reason, outcome, detail.jsonString()]
        )
        return try rows.first?.decode(Int64.self, "id") ?? 0
    }

    /// Marks a pending action done (and, for a replay, every earlier replay of the same job left
    /// pending by an interrupted run).
    static func complete(_ id: Int64, jobID: JobID?, detail: JSONValue, database: PostgresConnection) throws {
        try database.execute(
            """
            UPDATE operator_actions SET outcome = 'done', completed_at = now(), detail = detail || $2::jsonb
            WHERE id = $1 OR ($3::uuid IS NOT NULL AND job_id = $3 AND action = 'dead.replay' AND outcome = 'pending'
                AND id < $1)
            """,
            [id, detail.jsonString(), jobID?.uuid]
        )
    }
}
