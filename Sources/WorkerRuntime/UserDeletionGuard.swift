import AstroDomain
import Foundation
import Postgres
import UUIDText

// A deleted user's jobs are refused in the job's own transaction, not only when it is delivered:
// a job delivered before the deletion started may commit after it. `users_being_deleted`
// (migration 0027) takes the user's advisory lock shared before it reads `user_deletions`, and
// `user.delete` marks the user under the same lock exclusively, so either the job commits before
// the mark (and the deletion then erases what it wrote) or the job sees the mark and writes
// nothing but its refusal.

extension PostgresJobStorage {
    package func usersBeingDeleted(_ users: [UUID], in database: PostgresConnection) throws -> Set<UUID> {
        guard !users.isEmpty else { return [] }
        let list = "{" + users.map(\.lowercasedText).joined(separator: ",") + "}"
        let rows = try database.query("SELECT u FROM users_being_deleted($1::uuid[]) AS u", [list])
        return Set(try rows.map { try $0.decode(UUID.self, "u") })
    }
}

enum UserDeletionGuard {
    /// The users of `work` whose jobs must be checked: those that name a user, of job types that
    /// do not serve deleted users.
    static func checkedUsers<Transaction>(_ work: [PreparedJob<Transaction>]) -> [UUID] {
        Array(
            Set(
                work.compactMap { item in
                    UserDeletion.servesDeletedUsers.contains(item.job.type) ? nil : item.userID
                }
            )
        )
    }

    /// Whether `item` belongs to one of `deleted`.
    static func isRefused<Transaction>(_ item: PreparedJob<Transaction>, deleted: Set<UUID>) -> Bool {
        guard let user = item.userID, !deleted.isEmpty else { return false }
        return deleted.contains(user) && !UserDeletion.servesDeletedUsers.contains(item.job.type)
    }

    /// The outcome of a refused job: failed (not dead-lettered: a dead letter would keep the
    /// body, with what the user sent, in `<queue>.dead`), with its `<type>.failed` event.
    /// - Throws: when the event cannot be encoded (not expected).
    static func refusal(_ job: JobEnvelope, user: UUID?) throws -> JobOutcome {
        let error = JobError(
            code: UserDeletion.refusedCode,
            message: "the user was deleted; their jobs are no longer run"
        )
        let event = JobEvent(jobID: job.jobID, userID: user.map(UserID.init), type: job.type.failedEvent, error: error)
        return JobOutcome(status: .failed(error), messages: [try .event(event)])
    }
}
