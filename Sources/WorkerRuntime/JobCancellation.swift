import AstroDomain
import Foundation
import Postgres

/// What a worker needs to announce a job an operator cancelled (`astroctl job cancel`): the
/// job's user and the recorded reason.
package struct CancelledJob: Sendable, Hashable {
    package var userID: UUID?
    package var error: JobError

    package init(userID: UUID?, error: JobError) {
        self.userID = userID
        self.error = error
    }

    /// The error a cancelled job's event carries when its row records none.
    package static let defaultError = JobError(
        code: JobStatus.cancelledErrorCode,
        message: "cancelled by an operator before it started"
    )
}

extension PostgresJobStorage {
    /// - Throws: `PostgresError`.
    package func announceCancellation(
        _ jobID: JobID,
        kind: JobType,
        in database: PostgresConnection
    ) throws -> CancelledJob? {
        // A conditional UPDATE: of two deliveries racing, the second waits for the first's row
        // lock, then finds `result` set and matches nothing.
        let rows = try database.query(
            """
            UPDATE jobs SET result = '{"cancellationAnnounced": true}'::jsonb, updated_at = now()
            WHERE id = $1 AND kind = $2 AND status = 'cancelled' AND result IS NULL
            RETURNING user_id, error
            """,
            [jobID.uuid, kind.rawValue]
        )
        guard let row = rows.first else { return nil }
        return CancelledJob(
            userID: try row.decode(UUID?.self, "user_id"),
            error: try row.decodeJSON(JobError?.self, "error") ?? CancelledJob.defaultError
        )
    }
}
