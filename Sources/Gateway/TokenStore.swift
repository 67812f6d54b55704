import AstroDomain
import Crypto
import Foundation
import JOSE
import Postgres

/// Refresh tokens: random 32 bytes, base64url; only their SHA-256 is stored.
enum RefreshToken {
    /// A new random token.
    static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// Lowercase hex SHA-256 of the token's text.
    static func hash(_ token: String) -> String { sha256Hex(Data(token.utf8)) }

    /// Whether `text` can be a token at all: 43 base64url characters.
    static func isWellFormed(_ text: String) -> Bool {
        text.utf8.count == 43 && Base64URL.decode(text)?.count == 32
    }
}

/// Lowercase hex of the SHA-256 of `data`.
func sha256Hex(_ data: Data) -> String {
    SHA256.hash(data: data).map { byte in
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
    }.joined()
}

/// What the gateway keeps in PostgreSQL: users it created, refresh tokens, and the jobs it
/// published (whose they are, and their idempotency keys). Every call runs on the pool's own
/// threads.
struct GatewayStore: Sendable {
    let pool: PostgresPool

    /// Creates a user and its first refresh token.
    func createUser(refreshTokenHash: String, lifetime: Duration) async throws -> UserID {
        let user = UserID.random()
        let seconds = Int(lifetime.components.seconds)
        try await pool.withTransaction { database in
            _ = try database.execute("INSERT INTO users (id) VALUES ($1)", [user.uuid])
            _ = try database.execute(
                """
                INSERT INTO gateway_refresh_tokens (token_hash, user_id, expires_at)
                VALUES ($1, $2, now() + make_interval(secs => $3::double precision))
                """,
                [refreshTokenHash, user.uuid, seconds]
            )
        }
        return user
    }

    /// What presenting a refresh token did.
    enum Rotation: Sendable, Equatable {
        /// The token was live and unused: it is now used, and its successor (same family) stored.
        case rotated(UserID)
        /// The token had been used before: every token of its family was deleted, the live one
        /// included (someone holds a copy — the client or a thief — and we cannot tell which).
        case reused(UserID)
        /// Unknown or expired: nothing changed.
        case refused
    }

    /// Replaces a live refresh token with a new one of the same family, atomically: a token
    /// works once. A token presented after it was used revokes its whole family (the
    /// registration's chain of tokens), so a stolen token is worth at most one refresh before
    /// the owner's next refresh, or the thief's, ends both.
    /// - Returns: what happened; the caller answers 401 unless `.rotated`.
    func rotate(refreshTokenHash: String, newHash: String, lifetime: Duration) async throws -> Rotation {
        let seconds = Int(lifetime.components.seconds)
        return try await pool.withTransaction { database -> Rotation in
            // FOR UPDATE: two concurrent uses of one token are serialized, so the second sees
            // `used_at` set and revokes the family instead of rotating it twice.
            guard
                let row = try database.query(
                    """
                    SELECT user_id, family_id, used_at IS NOT NULL AS used, expires_at > now() AS live
                    FROM gateway_refresh_tokens WHERE token_hash = $1 FOR UPDATE
                    """,
                    [refreshTokenHash]
                ).first
            else { return .refused }
            let user = UserID(try row.decode(UUID.self, "user_id"))
            let family = try row.decode(UUID.self, "family_id")
            if try row.decode(Bool.self, "used") {
                _ = try database.execute("DELETE FROM gateway_refresh_tokens WHERE family_id = $1", [family])
                return .reused(user)
            }
            guard try row.decode(Bool.self, "live") else { return .refused }
            _ = try database.execute(
                "UPDATE gateway_refresh_tokens SET used_at = now() WHERE token_hash = $1",
                [refreshTokenHash]
            )
            _ = try database.execute(
                """
                INSERT INTO gateway_refresh_tokens (token_hash, user_id, family_id, expires_at)
                VALUES ($1, $2, $3, now() + make_interval(secs => $4::double precision))
                """,
                [newHash, user.uuid, family, seconds]
            )
            return .rotated(user)
        }
    }

    /// A job the gateway recorded before publishing it.
    struct RecordedJob: Sendable, Equatable {
        var jobID: JobID
        var published: Bool
        var requestHash: String
        /// The row was written already marked published (a new job without an idempotency key,
        /// see `record`): nothing to mark once the broker confirms, the mark to take back if it
        /// does not.
        var markedAhead = false
    }

    /// The job id of a job recorded under an idempotency key: the same for the same user, job
    /// type and key, every time. So a retry finds the first job's id even if the record itself
    /// was lost (see `record`), and the worker, which runs a job id once, makes no second job.
    /// SHA-256 rather than a cheap hash, because keys are the client's to choose: no key can be
    /// crafted to land on someone else's job id.
    static func jobID(user: UserID, kind: JobType, idempotencyKey: String) -> JobID {
        var input = Data("astrosvitla gateway job\u{0}\(kind.rawValue)\u{0}\(user)\u{0}".utf8)
        input.append(Data(idempotencyKey.utf8))
        var bytes = Array(SHA256.hash(data: input).prefix(16))
        bytes[6] = (bytes[6] & 0x0f) | 0x80  // version 8 (custom)
        bytes[8] = (bytes[8] & 0x3f) | 0x80  // RFC 9562 variant
        return JobID(
            UUID(
                uuid: (
                    bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                    bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
                )
            )
        )
    }

    /// Records a new job of the user's and returns it; with an idempotency key the first job
    /// recorded under the key is returned instead (its id is `jobID(user:kind:idempotencyKey:)`;
    /// without a key the id is random).
    ///
    /// A job without a key is written already marked published, in this one statement, instead
    /// of a second one after the broker's confirm (one statement less per accepted job): its id
    /// is random and told to no one before the confirm, so a retry never looks for it, and the
    /// caller takes the mark back (`unmarkPublished`) if the broker does not confirm. A job
    /// with a key is marked only after the confirm: a retry with the key relies on the mark to
    /// decide whether to publish again.
    ///
    /// Committed without waiting for the disk (`synchronous_commit = off` for this statement
    /// only). The job's durability is the broker's confirm, not this row: losing the row in a
    /// database crash costs a retry nothing but publishing the same derived job id again, which
    /// the worker runs once (only the check that a reused key comes with the same body is lost
    /// for that window). Waiting for the flush put one WAL flush on every accepted request,
    /// which on this disk capped accepted jobs well below the 1,000/s goal (issue 16).
    /// - Throws: `PostgresError`.
    func record(
        user: UserID,
        kind: JobType,
        idempotencyKey: String?,
        requestHash: String,
        quota: DailyQuotas.Charge? = nil
    ) async throws -> RecordedJob {
        try await pool.withConnection { database -> RecordedJob in
            try Self.record(
                user: user,
                kind: kind,
                idempotencyKey: idempotencyKey,
                requestHash: requestHash,
                quota: quota,
                database: database
            )
        }
    }

    /// `record(user:kind:idempotencyKey:requestHash:quota:)` on the caller's connection (in its
    /// transaction when it has one, whose commit then reads the setting).
    /// - Throws: `PostgresError`; `QuotaExceeded` when `quota` leaves no room.
    static func record(
        user: UserID,
        kind: JobType,
        idempotencyKey: String?,
        requestHash: String,
        quota: DailyQuotas.Charge? = nil,
        database: PostgresConnection
    ) throws -> RecordedJob {
        let jobID = idempotencyKey.map { Self.jobID(user: user, kind: kind, idempotencyKey: $0) } ?? .random()
        // Alone, one statement is one implicit transaction, whose commit reads the setting; in
        // the caller's transaction the setting holds until that commits. With a quota, the row is
        // written only while the user's units of this kind today (UTC) leave room for this
        // request's (concurrent requests may each see the other's room: the workers' own bound
        // is the hard one).
        let inserted = try database.execute(
            """
            WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)),
            used AS (
                SELECT coalesce(sum(quota_units), 0) AS units FROM gateway_jobs
                WHERE $6::int > 0 AND user_id = $2 AND kind = $3
                    AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
            )
            INSERT INTO gateway_jobs (job_id, user_id, kind, idempotency_key, request_hash, published_at, quota_units)
            SELECT $1, $2, $3, $4, $5, CASE WHEN $4::text IS NULL THEN now() END, $6 FROM relaxed, used
            WHERE $6::int = 0 OR used.units + $6 <= $7
            ON CONFLICT (user_id, idempotency_key) DO NOTHING
            """,
            [
                jobID.uuid, user.uuid, kind.rawValue, idempotencyKey, requestHash, quota?.units ?? 0,
                quota?.limit ?? 0,
            ]
        )
        if inserted == 1 {
            return RecordedJob(
                jobID: jobID,
                published: false,
                requestHash: requestHash,
                markedAhead: idempotencyKey == nil
            )
        }
        guard
            let row = try database.query(
                """
                SELECT job_id, published_at IS NOT NULL AS published, request_hash FROM gateway_jobs
                WHERE user_id = $1 AND idempotency_key = $2
                """,
                [user.uuid, idempotencyKey]
            ).first
        else {
            if let quota { throw try Self.exceeded(quota, user: user, kind: kind, database: database) }
            throw PostgresError(kind: .decoding, message: "the idempotency key's row vanished")
        }
        return RecordedJob(
            jobID: JobID(try row.decode(UUID.self, "job_id")),
            published: try row.decode(Bool.self, "published"),
            requestHash: try row.decode(String.self, "request_hash")
        )
    }

    /// The refusal of a request past its quota, with what the user used today.
    private static func exceeded(
        _ quota: DailyQuotas.Charge,
        user: UserID,
        kind: JobType,
        database: PostgresConnection
    ) throws -> QuotaExceeded {
        let used = try database.query(
            """
            SELECT coalesce(sum(quota_units), 0)::int AS units FROM gateway_jobs
            WHERE user_id = $1 AND kind = $2
                AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
            """,
            [user.uuid, kind.rawValue]
        ).first?.decode(Int.self, "units")
        return QuotaExceeded(charge: quota, used: used ?? 0)
    }

    /// Marks a job published (the broker confirmed it).
    ///
    /// Committed without waiting for the disk (`synchronous_commit = off` for this transaction
    /// only): losing this mark in a database crash costs nothing but a retry publishing the same
    /// job id again, which the worker runs once; waiting would put a second flush of the WAL on
    /// every accepted request.
    func markPublished(_ jobID: JobID) async throws {
        _ = try await pool.withConnection { database in
            // One statement, so one implicit transaction, whose commit reads the setting.
            try database.execute(
                """
                WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
                UPDATE gateway_jobs SET published_at = now() FROM relaxed
                WHERE job_id = $1 AND published_at IS NULL
                """,
                [jobID.uuid]
            )
        }
    }

    /// Takes back the mark `record` wrote ahead for a job without a key whose publish the broker
    /// did not confirm, so the job is not shown as queued. Committed without waiting for the
    /// disk, like the mark.
    func unmarkPublished(_ jobID: JobID) async throws {
        _ = try await pool.withConnection { database in
            try database.execute(
                """
                WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
                UPDATE gateway_jobs SET published_at = NULL FROM relaxed
                WHERE job_id = $1 AND idempotency_key IS NULL
                """,
                [jobID.uuid]
            )
        }
    }

    /// A job as the API shows it: its type, when it was accepted, and its state with `error`
    /// and `result` parsed once (composed with its follow-up's, for a job that hands its work on).
    struct JobView: Sendable {
        var kind: String
        var createdAt: Date
        var progress: JobProgress
    }

    /// The user's job, or `nil` when it is not theirs, or was never accepted (not confirmed by the
    /// broker, unless a worker has already seen it: its confirm was lost, not its message).
    ///
    /// A job the gateway accepted is found through `gateway_jobs`; a job a worker queued for the
    /// user (a follow-up such as `report.generate`, which a result names) through `jobs.user_id`.
    /// A job that hands its work on is shown composed with its follow-up
    /// (`JobProgress.composed(with:)`): `report.request` succeeds when the report is stored.
    func job(_ jobID: JobID, user: UserID) async throws -> JobView? {
        try await pool.withConnection { database -> JobView? in
            guard
                let row = try database.query(
                    """
                    SELECT g.kind, coalesce(j.status, 'queued') AS status, coalesce(j.attempts, 0) AS attempts,
                           j.error::text AS error, j.result::text AS result, g.created_at, j.finished_at
                    FROM gateway_jobs g LEFT JOIN jobs j ON j.id = g.job_id
                    WHERE g.job_id = $1 AND g.user_id = $2 AND (g.published_at IS NOT NULL OR j.id IS NOT NULL)
                    UNION ALL
                    SELECT j.kind, j.status, j.attempts, j.error::text, j.result::text, j.created_at, j.finished_at
                    FROM jobs j
                    WHERE j.id = $1 AND j.user_id = $2
                      AND NOT EXISTS (SELECT 1 FROM gateway_jobs g WHERE g.job_id = $1)
                    """,
                    [jobID.uuid, user.uuid]
                ).first
            else { return nil }
            let kind = try row.decode(String.self, "kind")
            let progress = try Self.progress(of: row)
            let view = JobView(kind: kind, createdAt: try row.decode(Date.self, "created_at"), progress: progress)
            guard let followUpID = progress.followUpJobID(kind: JobType(rawValue: kind)) else { return view }
            let followUp = try database.query(
                """
                SELECT status, attempts, error::text AS error, result::text AS result, finished_at
                FROM jobs WHERE id = $1 AND user_id = $2
                """,
                [followUpID.uuid, user.uuid]
            ).first.map(Self.progress(of:))
            return JobView(kind: kind, createdAt: view.createdAt, progress: progress.composed(with: followUp))
        }
    }

    /// The state columns of a `jobs` row (`status`, `attempts`, `error`, `result`,
    /// `finished_at`), its jsonb read once (text that does not parse, which jsonb cannot hold,
    /// is left out).
    private static func progress(of row: PostgresRow) throws -> JobProgress {
        JobProgress(
            status: try row.decode(String.self, "status"),
            attempts: try row.decode(Int.self, "attempts"),
            error: try row.decode(String?.self, "error").flatMap { try? JSONValue.parse(Data($0.utf8)) },
            result: try row.decode(String?.self, "result").flatMap { try? JSONValue.parse(Data($0.utf8)) },
            finishedAt: try row.decode(Date?.self, "finished_at")
        )
    }
}
