import AstroDomain
import Foundation
import Postgres
import TraceContext

/// One delivery of a job, as the runtime hands it to a handler.
public struct JobEnvelope: Sendable {
    /// The idempotency key from the body's `jobId`.
    public var jobID: JobID
    /// The queue (job type) it came from.
    public var type: JobType
    /// The raw JSON body; the handler decodes its own payload from it.
    public var body: Data
    /// 1 on the first delivery, 2 on the first retry, …
    public var attempt: Int
    /// The broker redelivered it (a consumer died or its connection dropped before the ack).
    public var redelivered: Bool
    public var correlationID: String?
    public var receivedAt: Date
    /// The job span's W3C trace context: what the job publishes carries it as `traceparent`
    /// (the runtime adds it to the outcome's messages); nil outside a traced delivery.
    public var traceContext: TraceContext?

    public init(
        jobID: JobID,
        type: JobType,
        body: Data,
        attempt: Int = 1,
        redelivered: Bool = false,
        correlationID: String? = nil,
        receivedAt: Date = Date(),
        traceContext: TraceContext? = nil
    ) {
        self.jobID = jobID
        self.type = type
        self.body = body
        self.attempt = attempt
        self.redelivered = redelivered
        self.correlationID = correlationID
        self.receivedAt = receivedAt
        self.traceContext = traceContext
    }

    /// Decodes the body as the job's payload type.
    ///
    /// - Throws: `JobRejection` with code `invalid-payload` naming the field at fault.
    public func decode<Payload: Decodable>(_ type: Payload.Type) throws(JobRejection) -> Payload {
        do {
            return try JSONCoding.decoder.decode(Payload.self, from: body)
        } catch let error as DecodingError {
            throw JobRejection(code: .invalidPayload, message: DecodingErrorDescription.describe(error))
        } catch {
            throw JobRejection(code: .invalidPayload, message: "\(error)")
        }
    }
}

/// Input that can never succeed: the job is dead-lettered at once with this reason, and a
/// `<type>.failed` event is published. Never retried.
public struct JobRejection: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable, machine-readable code (e.g. `invalid-payload`, `nonexistent-local-time`).
    public var code: String
    /// What is wrong and which field, for the person who sent it. It may quote what they sent,
    /// so it is never logged at info or above (`FailureLogging`).
    public var message: String
    /// What the logs may say beyond the code: words that quote no input (the field at fault), or
    /// nil for the code alone.
    public var publicReason: String?

    /// - Parameters:
    ///   - code: the stable code.
    ///   - message: what is wrong, for the person who sent the job (their failed event, the job's
    ///     row, the dead letter); it may quote their input.
    ///   - publicReason: what the logs may say beyond the code, quoting no input.
    public init(code: String, message: String, publicReason: String? = nil) {
        self.code = code
        self.message = message
        self.publicReason = publicReason
    }

    /// A rejection with a catalogued (or family) code; see `init(code:message:publicReason:)`.
    public init(code: ErrorCode, message: String, publicReason: String? = nil) {
        self.init(code: code.rawValue, message: message, publicReason: publicReason)
    }

    public var description: String { "\(code): \(message)" }
    public var jobError: JobError { JobError(code: code, message: message) }
}

/// A message the runtime publishes after the job's transaction commits (through the outbox).
public struct OutboxMessage: Sendable, Hashable {
    public var exchange: String
    public var routingKey: String
    public var body: Data
    public var headers: [String: String]
    /// A job must reach a queue; an event may have no listener.
    public var mandatory: Bool

    public init(exchange: String, routingKey: String, body: Data, headers: [String: String] = [:], mandatory: Bool) {
        self.exchange = exchange
        self.routingKey = routingKey
        self.body = body
        self.headers = headers
        self.mandatory = mandatory
    }

    /// An event on `astro.events`, routed by its type.
    public static func event(_ event: JobEvent) throws -> OutboxMessage {
        OutboxMessage(
            exchange: BrokerNames.eventsExchange,
            routingKey: event.type.rawValue,
            body: try event.jsonData(),
            mandatory: false
        )
    }

    /// A follow-up job on `astro.jobs` (e.g. billing publishing `report.generate`).
    public static func job(_ type: JobType, body: Data) -> OutboxMessage {
        OutboxMessage(exchange: BrokerNames.jobsExchange, routingKey: type.rawValue, body: body, mandatory: true)
    }
}

/// What a job's transaction decided: the job's final status, what to store as its result and
/// what to publish once committed.
public struct JobOutcome: Sendable {
    public enum Status: Sendable, Hashable {
        /// Done: `jobs.status = succeeded`.
        case succeeded
        /// Done, but the request could not be granted (e.g. no credit left): `jobs.status =
        /// failed` with this error; not retried, not dead-lettered (nothing is wrong with the
        /// message).
        case failed(JobError)
    }

    public var status: Status
    /// Stored in `jobs.result` (ids of what was written).
    public var result: JSONValue?
    /// Published after commit, in order.
    public var messages: [OutboxMessage]
    /// Business facts this commit wrote, counted in the worker's metrics once it committed.
    public var measurements: [BusinessMeasurement]

    public init(
        status: Status = .succeeded,
        result: JSONValue? = nil,
        messages: [OutboxMessage] = [],
        measurements: [BusinessMeasurement] = []
    ) {
        self.status = status
        self.result = result
        self.messages = messages
        self.measurements = measurements
    }
}

/// The work of one job type.
///
/// The runtime calls `prepare` outside any transaction (decode, validate, compute: the slow,
/// CPU-bound part), then `commit` inside the job's transaction on a database thread, where the
/// runtime also writes the `jobs` row and the outbox rows, so the work, the job's status and its
/// events commit together or not at all. The delivery is acknowledged only after that commit.
public protocol JobHandler: Sendable {
    associatedtype Prepared: Sendable

    /// The job type (queue) this handler consumes.
    var jobType: JobType { get }

    /// Decodes, validates and computes.
    ///
    /// - Throws: `JobRejection` for input that can never succeed (dead-lettered at once);
    ///   any other error is treated as transient and retried with backoff.
    func prepare(_ job: JobEnvelope) async throws -> Prepared

    /// Writes the job's effect inside its transaction.
    ///
    /// - Important: runs synchronously on a database connection's own thread; do no slow work
    ///   here beyond the SQL.
    /// - Throws: `JobRejection` to roll back and dead-letter (e.g. a constraint says the input
    ///   is invalid); `PostgresError` or others roll back and retry.
    func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome

    /// Writes the effects of several jobs, in this order, inside one shared transaction (group
    /// commit): one outcome per job, in the same order. The default calls `commit` for each; a
    /// handler overrides it to write many jobs' rows in fewer statements.
    ///
    /// - Important: runs synchronously on a database connection's own thread.
    /// - Throws: anything `commit` throws. The whole shared transaction then rolls back and the
    ///   runtime commits each of its jobs again on its own, through `commit`, so a batch may
    ///   simply let a constraint violation of one job's rows fail it.
    func commit(
        batch: [(prepared: Prepared, job: JobEnvelope)],
        database: PostgresConnection
    ) throws -> [JobOutcome]

    /// Messages that undo an earlier step when this job is dead-lettered (rejected, or out of
    /// retries) — e.g. a refund of the credit that paid for a report that will not be written.
    /// Published through the outbox in the transaction that records the job dead. Default: none.
    func compensation(for job: JobEnvelope, error: JobError) -> [OutboxMessage]

    /// Whether the runtime reads the job's row before a first delivery's `prepare`, so that a job
    /// an operator cancelled never runs its `prepare` (an LLM call, a charge). Default: true.
    /// A handler whose `prepare` is cheap, local and has no effects outside the process may say
    /// false: a first delivery then skips that read (one statement per job) and a cancelled job
    /// is still never committed — the claim in the job's transaction finds it cancelled under
    /// the row lock a cancel takes. Redeliveries and retries are always looked up first.
    var looksUpBeforePrepare: Bool { get }
}

extension JobHandler {
    public func compensation(for job: JobEnvelope, error: JobError) -> [OutboxMessage] { [] }

    public var looksUpBeforePrepare: Bool { true }

    public func commit(
        batch: [(prepared: Prepared, job: JobEnvelope)],
        database: PostgresConnection
    ) throws -> [JobOutcome] {
        try batch.map { try commit($0.prepared, job: $0.job, database: database) }
    }
}

/// A readable one-line description of a JSON decoding error: which field, what is wrong.
enum DecodingErrorDescription {
    static func describe(_ error: DecodingError) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            let text = codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
                .joined(separator: ".")
                .replacingOccurrences(of: ".[", with: "[")
            return text.isEmpty ? "body" : text
        }
        switch error {
        case .keyNotFound(let key, let context):
            let parent = context.codingPath.isEmpty ? "" : " in \(path(context.codingPath))"
            return "missing field \"\(key.stringValue)\"\(parent)"
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)): expected \(typeName(type))"
        case .valueNotFound(let type, let context):
            return "\(path(context.codingPath)): expected \(typeName(type)), got null"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return "body is not valid JSON" }
            // The decoder's own text can quote the whole offending value ("…from invalid String
            // value <200 KB>"): a short prefix is enough to act on.
            let detail = context.debugDescription
            return "\(path(context.codingPath)): "
                + (detail.count > 120 ? String(detail.prefix(120)) + "…" : detail)
        @unknown default:
            return "\(error)"
        }
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Int.Type, is Int64.Type, is Int32.Type: return "a whole number"
        case is Double.Type, is Float.Type: return "a number"
        case is Bool.Type: return "true or false"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Dictionary") { return "an object" }
            if name.hasPrefix("Array") { return "an array" }
            return name
        }
    }
}
