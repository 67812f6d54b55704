import AstroDomain
import Foundation
import Postgres
import WorkerRuntime

/// A synthetic job for exercising the runtime end to end (tests, demos of retries and dead
/// letters, load): it can sleep, fail transiently for its first attempts, or be rejected, and
/// its effect is one row in `sample_effects`, so "exactly one effect" is countable.
///
/// Body: `{"jobId": uuid, "note": string, "sleepMs"?: int, "failUntilAttempt"?: int, "reject"?: code,
/// "rejectInCommit"?: code, "violateConstraint"?: bool, "crash"?: bool}`. `rejectInCommit`
/// rejects from inside the job's transaction, as a handler does when a constraint shows the input
/// is invalid; `violateConstraint` makes the insert break a NOT NULL constraint (a failure no
/// retry mends); `crash` kills the process while the job is in flight (a poison message), only
/// where the worker was started with crashes allowed.
public struct SampleJobHandler: JobHandler {
    public let jobType: JobType
    private let allowCrash: Bool

    /// - Parameter allowCrash: honour `"crash": true` (the sample-worker's SAMPLE_ALLOW_CRASH).
    public init(queue: String = "sample.work", allowCrash: Bool = false) {
        jobType = JobType(rawValue: queue)
        self.allowCrash = allowCrash
    }

    /// The table the handler writes; create it once before starting workers.
    public static let createTableSQL: SQL = """
        CREATE TABLE IF NOT EXISTS sample_effects (
            job_id uuid PRIMARY KEY,
            queue text NOT NULL,
            note text NOT NULL,
            attempt integer NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        )
        """

    public struct Payload: Decodable, Sendable {
        public var jobId: String
        public var note: String
        public var sleepMs: Int?
        public var failUntilAttempt: Int?
        public var reject: String?
        public var rejectInCommit: String?
        public var violateConstraint: Bool?
        public var crash: Bool?
    }

    /// A failure the handler pretends is transient (like a timeout of a remote service).
    public struct TransientFailure: Error, CustomStringConvertible {
        public var attempt: Int
        public var description: String { "simulated transient failure on attempt \(attempt)" }
    }

    public func prepare(_ job: JobEnvelope) async throws -> Payload {
        let payload = try job.decode(Payload.self)
        if payload.crash == true {
            guard allowCrash else {
                throw JobRejection(
                    code: .crashNotAllowed,
                    message: "this worker was started without SAMPLE_ALLOW_CRASH"
                )
            }
            // What a poison message does to a worker: the process dies with the job in flight.
            abort()
        }
        if let code = payload.reject {
            throw JobRejection(code: code, message: "rejected on request (\"reject\": \(InputQuote.short(code)))")
        }
        guard payload.note.count <= 1000 else {
            throw JobRejection(code: .invalidNote, message: "note: at most 1000 characters")
        }
        if let sleep = payload.sleepMs, sleep > 0 { try await Task.sleep(for: .milliseconds(sleep)) }
        if let failUntil = payload.failUntilAttempt, job.attempt <= failUntil {
            throw TransientFailure(attempt: job.attempt)
        }
        return payload
    }

    public func commit(_ payload: Payload, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        if let code = payload.rejectInCommit {
            throw JobRejection(code: code, message: "rejected inside the transaction on request")
        }
        try database.execute(
            "INSERT INTO sample_effects (job_id, queue, note, attempt) VALUES ($1, $2, $3, $4)",
            [job.jobID.uuid, jobType.rawValue, payload.violateConstraint == true ? nil : payload.note, job.attempt]
        )
        let event = JobEvent(jobID: job.jobID, type: "sample.done", fields: ["note": .string(payload.note)])
        return JobOutcome(result: ["note": .string(payload.note)], messages: [try .event(event)])
    }
}
