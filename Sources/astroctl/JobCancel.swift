import ArgumentParser
import AstroCLISupport
import AstroDomain
import Billing
import Foundation
import Postgres

/// `astroctl job`: what became of a job (the default), or cancel one not yet started.
struct JobCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "job",
        abstract: "Show what became of a job, or cancel a job not yet started.",
        discussion: """
            Examples:
              astroctl job 9b2f…                      what became of a job
              astroctl job cancel 9b2f… --why "user asked by mail"
            """,
        subcommands: [JobStatusCommand.self, JobCancel.self],
        defaultSubcommand: JobStatusCommand.self
    )
}

struct JobCancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a job that has not started: its worker acknowledges it without running it.",
        discussion: """
            A job can be cancelled while its row is queued (waiting for its first attempt or for \
            a retry), or before any worker has seen it: then its type comes from the gateway's \
            record of the jobs it published, else from --type. The row becomes cancelled; the \
            worker that later receives the message acknowledges it without running the handler \
            and publishes <type>.cancelled. The cancel and a worker's claim of the row take the \
            same row lock: whichever commits first wins, so a job is never both run and cancelled.

            A report.request that already spent its credit is cancelled through its \
            report.generate, if that has not started: the report-worker then refunds the credit \
            (billing.refund-credit), as for any report that will never be written.

            Exit status: 0 when cancelled (or cancelled before), 1 when the job already started \
            or finished, 2 for invalid input. Recorded in operator_actions either way.
            """
    )

    @Argument(help: "The job id.") var jobID: String
    @Option(help: "The job's type, for a job no worker has seen and the gateway did not publish.")
    var type: String?
    @OptionGroup var actor: OperatorOptions
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard JobID(jobID) != nil else { throw ValidationError("\(jobID.debugDescription) is not a UUID") }
        if let type, !JobType.all.contains(JobType(rawValue: type)) {
            throw ValidationError("--type: \(type.debugDescription) is not a job type of the contract")
        }
    }

    func run() async throws {
        guard let id = JobID(jobID) else { throw ValidationError("not a UUID") }
        let (operatorName, reason) = try actor.resolved()
        let type = self.type.map(JobType.init(rawValue:))
        let outcome = try await connection.withPool(size: 1) { pool in
            try await pool.withTransaction { database in
                try JobCancellationSQL.cancel(
                    id,
                    type: type,
                    operator: operatorName,
                    reason: reason,
                    database: database
                )
            }
        }
        switch outcome {
        case .cancelled(let kind):
            print("cancelled \(id) (\(kind)): its worker will acknowledge it without running it")
        case .alreadyCancelled:
            print("\(id) was cancelled before")
        case .cancelledReport(let generate):
            print(
                "report.request \(id) already spent its credit; cancelled its report.generate \(generate): "
                    + "the credit is refunded when the report-worker receives it"
            )
        case .refused(let why):
            throw CommandFailure("\(id) cannot be cancelled: \(why)")
        }
    }
}

/// The SQL of a cancel, in the caller's transaction, on the `astro_operator` role.
enum JobCancellationSQL {
    enum Outcome: Sendable, Equatable {
        case cancelled(String)
        case alreadyCancelled
        case cancelledReport(JobID)
        case refused(String)
    }

    /// Cancels the job if it has not started.
    ///
    /// The race with a worker's claim is settled by the row: the claim inserts the row or takes
    /// it over with `INSERT … ON CONFLICT DO UPDATE … WHERE status NOT IN (terminal)`, which locks
    /// it for the job's whole transaction. Here the row is read `FOR UPDATE` (waiting for a claim
    /// under way, then seeing `running` or the job's end), or, when there is none, inserted as
    /// cancelled with `ON CONFLICT DO NOTHING` (a claim inserting concurrently wins or loses on
    /// the primary key; losing, this reads the row again). A claim that comes later finds the row
    /// cancelled, a terminal status, and does not take it.
    static func cancel(
        _ id: JobID,
        type: JobType?,
        operator name: String,
        reason: String?,
        database: PostgresConnection,
        cascaded: Bool = false
    ) throws -> Outcome {
        let message = "cancelled by \(name)" + (reason.map { ": \($0)" } ?? "")
        let error = JobError(code: JobStatus.cancelledErrorCode, message: message)
        let errorJSON = String(decoding: try JSONCoding.encoder.encode(error), as: UTF8.self)
        func record(_ outcome: String, kind: String?, _ detail: JSONValue = [:]) throws {
            _ = try OperatorStore.record(
                "job.cancel",
                operator: name,
                jobID: id,
                queue: kind,
                reason: reason,
                outcome: outcome,
                detail: detail,
                database: database
            )
        }
        for _ in 0..<2 {
            guard
                let row = try database.query(
                    "SELECT status, kind, user_id FROM jobs WHERE id = $1 FOR UPDATE",
                    [id.uuid]
                ).first
            else {
                // No worker has seen the job: its type from the gateway's record, else --type.
                let published = try database.query(
                    "SELECT kind, user_id FROM gateway_jobs WHERE job_id = $1",
                    [id.uuid]
                )
                .first
                guard let kind = try published?.decode(String.self, "kind") ?? type?.rawValue else {
                    try record("refused", kind: nil, ["why": "unknown job"])
                    return .refused("no worker has seen it and the gateway did not publish it: pass --type <jobType>")
                }
                let inserted = try database.query(
                    """
                    INSERT INTO jobs (id, kind, status, attempts, error, user_id, finished_at)
                    VALUES ($1, $2, 'cancelled', 0, $3::jsonb, $4, now())
                    ON CONFLICT (id) DO NOTHING RETURNING id
                    """,
                    [id.uuid, kind, errorJSON, try published?.decode(UUID.self, "user_id")]
                )
                if inserted.isEmpty { continue }
                try record("done", kind: kind, ["previousStatus": .null])
                return .cancelled(kind)
            }
            let status = try row.decode(String.self, "status")
            let kind = try row.decode(String.self, "kind")
            switch status {
            case JobStatus.queued.rawValue:
                try database.execute(
                    """
                    UPDATE jobs SET status = 'cancelled', error = $2::jsonb, result = NULL, finished_at = now(),
                        updated_at = now()
                    WHERE id = $1 AND status = 'queued'
                    """,
                    [id.uuid, errorJSON]
                )
                try record("done", kind: kind, ["previousStatus": "queued"])
                return .cancelled(kind)
            case JobStatus.cancelled.rawValue:
                try record("skipped", kind: kind, ["why": "already cancelled"])
                return .alreadyCancelled
            case JobStatus.succeeded.rawValue where kind == JobType.reportRequest.rawValue && !cascaded:
                // The credit is spent; what is left to stop is the report it paid for.
                let generate = ReportRequestHandler.reportJobID(for: id)
                try database.execute(
                    """
                    INSERT INTO jobs (id, kind, status, attempts, user_id) VALUES ($1, 'report.generate', 'queued', 0, $2)
                    ON CONFLICT (id) DO NOTHING
                    """,
                    [generate.uuid, try row.decode(UUID?.self, "user_id")]
                )
                let outcome = try cancel(
                    generate,
                    type: .reportGenerate,
                    operator: name,
                    reason: reason,
                    database: database,
                    cascaded: true
                )
                switch outcome {
                case .cancelled, .alreadyCancelled:
                    try record("done", kind: kind, ["reportJobId": .string(generate.description)])
                    return .cancelledReport(generate)
                case .refused(let why):
                    try record("refused", kind: kind, ["reportJobId": .string(generate.description)])
                    return .refused(
                        "its credit is spent and its report.generate \(generate) cannot be cancelled: \(why)"
                    )
                case .cancelledReport:
                    return outcome
                }
            default:
                try record("refused", kind: kind, ["status": .string(status)])
                let why =
                    status == JobStatus.running.rawValue
                    ? "it is running" : "it already ended (\(status))"
                return .refused(why)
            }
        }
        try record("refused", kind: type?.rawValue, ["why": "row changed concurrently"])
        return .refused("its row changed while cancelling; try again")
    }
}
