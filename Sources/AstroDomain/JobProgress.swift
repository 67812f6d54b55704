import Foundation

extension JobType {
    /// The member of this job's result that names the job finishing its work for the client,
    /// when the job hands the work on: `report.request` spends the credit and queues
    /// `report.generate` (`reportJobId`); `user.export` copies the files and queues
    /// `user.export-pack` (`packJobId`). A client asked for the report or the zip, so such a job
    /// is not done for it until the follow-up is (`JobProgress.composed(with:)`).
    public var followUpResultKey: String? {
        switch self {
        case .reportRequest: return "reportJobId"
        case .userExport: return "packJobId"
        default: return nil
        }
    }
}

/// A job's state as a client sees it (`GET /v1/jobs/{id}`): the `jobs` row, or, for a job that
/// hands its work on, the row composed with its follow-up's.
public struct JobProgress: Sendable, Hashable {
    /// `queued`, `running`, `succeeded`, `failed`, `dead` or `cancelled` (`JobStatus`); kept as
    /// text so that a state this build does not know still reaches the client unchanged.
    public var status: String
    /// Attempts so far.
    public var attempts: Int
    /// `{"code", "message"}` of a failed, dead or cancelled job.
    public var error: JSONValue?
    /// The outcome's fields.
    public var result: JSONValue?
    /// When the job reached a terminal state.
    public var finishedAt: Date?

    public init(status: String, attempts: Int, error: JSONValue?, result: JSONValue?, finishedAt: Date?) {
        self.status = status
        self.attempts = attempts
        self.error = error
        self.result = result
        self.finishedAt = finishedAt
    }

    /// The follow-up job this succeeded job of type `kind` named in its result, if any.
    public func followUpJobID(kind: JobType) -> JobID? {
        guard status == JobStatus.succeeded.rawValue, let key = kind.followUpResultKey,
            case .object(let fields)? = result, case .string(let text)? = fields[key]
        else { return nil }
        return JobID(text)
    }

    /// This job as the client sees it, given its follow-up's state (`nil`: the follow-up has no
    /// row yet, because it is still in the outbox or the broker).
    ///
    /// Until the follow-up is terminal the job is `running`; then it takes the follow-up's
    /// status, error and finish time, and its result gains the follow-up's fields (the report's
    /// `reportId`, the export's `exportId`), which win over its own. For a job whose
    /// `followUpJobID(kind:)` is not nil.
    public func composed(with followUp: JobProgress?) -> JobProgress {
        guard let followUp, JobStatus(rawValue: followUp.status)?.isTerminal == true else {
            var running = self
            running.status = JobStatus.running.rawValue
            running.finishedAt = nil
            return running
        }
        var composed = self
        composed.status = followUp.status
        composed.error = followUp.error
        composed.finishedAt = followUp.finishedAt
        if case .object(var fields)? = result {
            if case .object(let more)? = followUp.result {
                fields.merge(more) { _, followUps in followUps }
            }
            composed.result = .object(fields)
        }
        return composed
    }
}
