import AstroDomain
import Foundation
import WorkerRuntime

extension InMemoryJobStore {
    package func announceCancellation(
        _ jobID: JobID,
        kind: JobType,
        in transaction: Transaction
    ) throws
        -> CancelledJob?
    {
        guard var row = transaction.state.jobs[jobID], row.kind == kind.rawValue, row.status == .cancelled,
            row.result == nil
        else { return nil }
        row.result = ["cancellationAnnounced": true]
        transaction.state.jobs[jobID] = row
        return CancelledJob(userID: row.userID, error: row.error ?? CancelledJob.defaultError)
    }
}
