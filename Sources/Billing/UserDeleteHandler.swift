import AstroDomain
import Foundation
import Postgres
import UUIDText
import WorkerRuntime

/// `user.delete`: erases a user's personal data and keeps their money records detached from
/// them (CONTRACT.md, "User deletion"). Run by the billing-worker, which owns those records.
///
/// In steps, each its own transaction, so a crash resumes where it stopped (every step is
/// idempotent) and nothing of the user is visible in between:
/// 1. (prepare) the user is marked in `user_deletions` under the user's advisory lock, taken
///    exclusively: from then on every worker refuses the user's jobs (`user-deleted`) and the
///    gateway their tokens. The ids of the user's stories are recorded with the mark;
/// 2. (prepare) the user's rows are deleted, `batchSize` at a time;
/// 3. (commit, the job's transaction) the unspent credits are forfeited (`forfeited` ledger
///    entries), the deletion is marked finished, and `story.erase-illustrations` (the story-worker
///    removes the files) and `user.deleted` are published.
/// A second job for a finished deletion changes nothing and succeeds (`alreadyDeleted`).
public struct UserDeleteHandler: JobHandler {
    public let jobType = JobType.userDelete
    let pool: PostgresPool
    let batchSize: Int

    /// - Parameters:
    ///   - pool: the worker's pool; steps 1 and 2 run on it, outside the job's transaction.
    ///   - batchSize: rows per delete statement (1…10 000), so no transaction holds many locks.
    public init(pool: PostgresPool, batchSize: Int = 500) {
        self.pool = pool
        self.batchSize = min(max(batchSize, 1), 10_000)
    }

    /// What steps 1 and 2 found.
    public struct Prepared: Sendable {
        var request: UserDeleteRequest
        /// The deletion was finished by an earlier job.
        var alreadyDeleted: Bool
    }

    /// Steps 1 and 2.
    /// - Throws: `JobRejection` (`invalid-payload`); `PostgresError` (retried: every step is
    ///   idempotent, so a retry resumes).
    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        let request = try job.decode(UserDeleteRequest.self)
        let user = request.userID.uuid
        let jobID = request.jobID.uuid
        let finished = try await pool.withTransaction { database -> Bool in
            // Exclusive: waits for every job transaction of this user that checked the mark
            // before it (users_being_deleted takes the lock shared).
            _ = try database.query("SELECT pg_advisory_xact_lock(user_lock_key($1))", [user])
            // The users row stays as the tombstone the kept money records reference; a user we
            // never saw gets one too, so their later jobs are refused all the same.
            try database.execute("INSERT INTO users (id) VALUES ($1) ON CONFLICT (id) DO NOTHING", [user])
            try database.execute(
                """
                INSERT INTO user_deletions (user_id, job_id, story_ids)
                SELECT $1, $2, coalesce(array_agg(id), '{}') FROM stories.stories WHERE user_id = $1
                ON CONFLICT (user_id) DO NOTHING
                """,
                [user, jobID]
            )
            let row = try database.query(
                "SELECT finished_at IS NOT NULL AS done FROM user_deletions WHERE user_id = $1",
                [user]
            )
            return try row.first?.decode(Bool.self, "done") ?? false
        }
        if !finished {
            for statement in Self.erasures {
                try await deleteAll(statement, user: user)
            }
        }
        return Prepared(request: request, alreadyDeleted: finished)
    }

    /// The tables with a `user_id` column whose rows of the user are erased (by `erasures`).
    /// `UserDeletionTests` checks that every such table of the schema is here or in `keptTables`.
    public static let erasedTables: Set<String> = [
        "user_profiles", "report_purchases", "stories.child_profiles", "stories.stories", "stories.collections",
        "gateway_refresh_tokens", "gateway_device_keys", "gateway_jobs", "jobs", "consumption_consents",
        "user_exports", "chart_results",
    ]

    /// The tables with a `user_id` column whose rows of the user are kept, detached from any
    /// personal data: the money records (forfeited credits are marked there) and the deletion's
    /// own record.
    public static let keptTables: Set<String> = [
        "purchase_records", "purchase_credits", "credit_ledger", "user_deletions",
        // The answer sent to Apple about a transaction: ledger counts and Apple's status, nothing
        // personal; kept with the purchase it answers for.
        "consumption_answers",
        // What each paid LLM or images call cost (ids, model, tokens, USD; migration 0033):
        // money records, nothing personal; the day's budget and the paid-refund bound read them.
        "paid_calls",
    ]

    /// Each statement deletes at most `$2` rows of the user `$1` and returns how many.
    /// Order: stories before children (a story's child reference would be nulled first), the
    /// jobs' messages before the jobs.
    public static let erasures: [SQL] = [
        "DELETE FROM stories.stories WHERE id IN (SELECT id FROM stories.stories WHERE user_id = $1 LIMIT $2)",
        "DELETE FROM stories.collections WHERE id IN (SELECT id FROM stories.collections WHERE user_id = $1 LIMIT $2)",
        """
        DELETE FROM stories.child_profiles WHERE id IN (SELECT id FROM stories.child_profiles WHERE user_id = $1 LIMIT $2)
        """,
        // Stored chart results would go with their profiles too; by their user, so that none is
        // left whatever profile it names.
        "DELETE FROM chart_results WHERE id IN (SELECT id FROM chart_results WHERE user_id = $1 LIMIT $2)",
        // Charts and reports go with their profiles (ON DELETE CASCADE).
        "DELETE FROM user_profiles WHERE id IN (SELECT id FROM user_profiles WHERE user_id = $1 LIMIT $2)",
        "DELETE FROM report_purchases WHERE id IN (SELECT id FROM report_purchases WHERE user_id = $1 LIMIT $2)",
        """
        DELETE FROM gateway_refresh_tokens WHERE token_hash IN
            (SELECT token_hash FROM gateway_refresh_tokens WHERE user_id = $1 LIMIT $2)
        """,
        "DELETE FROM gateway_device_keys WHERE key_id IN (SELECT key_id FROM gateway_device_keys WHERE user_id = $1 LIMIT $2)",
        "DELETE FROM gateway_jobs WHERE job_id IN (SELECT job_id FROM gateway_jobs WHERE user_id = $1 LIMIT $2)",
        // The consent answers: the user's own choices, not an accounting record.
        "DELETE FROM consumption_consents WHERE id IN (SELECT id FROM consumption_consents WHERE user_id = $1 LIMIT $2)",
        // The user's exports (their copied files go with them, ON DELETE CASCADE).
        "DELETE FROM user_exports WHERE id IN (SELECT id FROM user_exports WHERE user_id = $1 LIMIT $2)",
        // What the user's jobs published and recorded may quote what the user sent.
        """
        DELETE FROM outbox WHERE id IN (SELECT o.id FROM outbox AS o JOIN jobs AS j ON j.id = o.job_id
            WHERE j.user_id = $1 AND j.kind <> 'user.delete' LIMIT $2)
        """,
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE user_id = $1 AND kind <> 'user.delete' LIMIT $2)",
    ]

    private func deleteAll(_ statement: SQL, user: UUID) async throws {
        let limit = batchSize
        while true {
            let deleted = try await pool.withTransaction { database in
                try database.execute(statement, [user, limit])
            }
            if deleted < limit { return }
        }
    }

    /// Step 3.
    /// - Throws: `PostgresError` (retried).
    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        let request = prepared.request
        let user = request.userID.uuid
        var fields: [String: JSONValue] = ["userId": .string(request.userID.description)]
        let state = try database.query(
            "SELECT finished_at IS NOT NULL AS done, forfeited FROM user_deletions WHERE user_id = $1 FOR UPDATE",
            [user]
        )
        guard let row = state.first else {
            // Step 1 committed this row in prepare, and nothing deletes it.
            throw UserDeletionStateMissing(user: user)
        }
        if try row.decode(Bool.self, "done") {
            fields["alreadyDeleted"] = .bool(true)
            fields["forfeitedCredits"] = .number(Double(try row.decode(Int.self, "forfeited")))
            let event = JobEvent(jobID: job.jobID, userID: request.userID, type: .userDeleted, fields: fields)
            return JobOutcome(result: .object(fields), messages: [try .event(event)])
        }
        // A refresh token rotated, or a job recorded by the gateway, while step 2 ran.
        for statement in Self.erasures[5...7] {
            try database.execute(statement, [user, Int.max])
        }
        let forfeited = try database.execute(
            """
            WITH forfeited AS (
                UPDATE purchase_credits SET revoked = true, revoked_at = now(), forfeited_at = now()
                WHERE user_id = $1 AND NOT consumed AND NOT revoked
                RETURNING id, transaction_id
            )
            INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id, reason)
            SELECT $1, id, transaction_id, 'forfeited', $2, 'user-deleted' FROM forfeited
            """,
            [user, job.jobID.uuid]
        )
        try database.execute("UPDATE users SET last_active_at = created_at WHERE id = $1", [user])
        let stories = try database.query(
            "SELECT unnest(story_ids) AS id FROM user_deletions WHERE user_id = $1",
            [user]
        ).map { StoryID(try $0.decode(UUID.self, "id")) }
        try database.execute(
            """
            UPDATE user_deletions SET finished_at = now(), forfeited = $2, story_ids = '{}'
            WHERE user_id = $1
            """,
            [user, forfeited]
        )
        var messages: [OutboxMessage] = []
        var start = 0
        while start < stories.count {
            let chunk = Array(stories[start..<min(start + EraseIllustrationsRequest.maxStories, stories.count)])
            let erase = EraseIllustrationsRequest(
                jobID: JobID.derived(from: job.jobID, purpose: "erase-illustrations-\(start)"),
                userID: request.userID,
                storyIDs: chunk
            )
            messages.append(.job(.storyEraseIllustrations, body: try erase.jsonData()))
            start += chunk.count
        }
        fields["alreadyDeleted"] = .bool(false)
        fields["forfeitedCredits"] = .number(Double(forfeited))
        fields["erasedStories"] = .number(Double(stories.count))
        let event = JobEvent(jobID: job.jobID, userID: request.userID, type: .userDeleted, fields: fields)
        messages.append(try .event(event))
        return JobOutcome(result: .object(fields), messages: messages)
    }
}

/// The deletion's row was not found in the job's transaction, though prepare wrote it: a
/// transient inconsistency (a replica lagging behind, say); the job is retried.
struct UserDeletionStateMissing: Error, CustomStringConvertible {
    var user: UUID
    var description: String { "no user_deletions row for user \(user.lowercasedText)" }
}
