import AstroDomain
import Foundation
import Postgres
import UUIDText

/// The runtime's SQL on the `jobs` and `outbox` tables. Every value goes as a `$n` bind.
///
/// - Important: every method runs synchronously on the connection's thread, inside the
///   caller's transaction where noted.
enum JobStore {
    /// The recorded status and type of a job, if it has a row the connection's role may see (a
    /// worker on its own role sees only its service's job types).
    static func recorded(_ jobID: JobID, database: PostgresConnection) throws -> RecordedJob? {
        let rows = try database.query("SELECT status, kind FROM jobs WHERE id = $1", [jobID.uuid])
        guard let row = rows.first else { return nil }
        return RecordedJob(
            // (The table's CHECK allows only known statuses.)
            status: JobStatus(rawValue: try row.decode(String.self, "status")) ?? .queued,
            kind: try row.decode(String.self, "kind")
        )
    }

    /// Inserts the jobs' rows (distinct ids), or takes over the rows unfinished earlier attempts
    /// left, in one statement that also locks them: two deliveries of one jobId serialize on the
    /// row, and the second, once the first has committed, finds it finished and writes nothing.
    /// Rows are locked in id order, so two such statements cannot deadlock.
    /// - Returns: the claim of every job, in any order.
    /// - Important: call inside the jobs' transaction.
    static func claim(_ jobs: [JobClaimRequest], database: PostgresConnection) throws -> [JobID: JobClaim] {
        guard !jobs.isEmpty else { return [:] }
        let rows = JSONValue.array(
            jobs.map {
                [
                    "id": .string($0.jobID.uuid.lowercasedText), "kind": .string($0.kind.rawValue),
                    "attempts": .number(Double($0.attempt)),
                ]
            }
        )
        let claimed = try database.query(
            """
            INSERT INTO jobs (id, kind, status, attempts)
            SELECT c.id, c.kind, 'running', c.attempts
            FROM jsonb_to_recordset($1::jsonb) AS c(id uuid, kind text, attempts integer)
            ORDER BY c.id
            ON CONFLICT (id) DO UPDATE SET status = 'running', attempts = EXCLUDED.attempts, updated_at = now()
                WHERE jobs.status NOT IN ('succeeded', 'failed', 'dead', 'cancelled') AND jobs.kind = EXCLUDED.kind
            RETURNING id
            """,
            [rows.jsonString()]
        )
        // (The kind test comes before row-level security's check of the existing row, so a row
        // of another service's job type is passed over here instead of failing the statement.)
        var claims: [JobID: JobClaim] = [:]
        for row in claimed {
            claims[JobID(try row.decode(UUID.self, "id"))] = .claimed
        }
        // Not claimed: the row is finished, or belongs to a job of another type.
        for job in jobs where claims[job.jobID] == nil {
            claims[job.jobID] = JobClaim.unclaimed(try recorded(job.jobID, database: database), kind: job.kind)
        }
        return claims
    }

    /// Records the end of several jobs, in one statement (the row is created if an earlier
    /// attempt left none, e.g. for a job dead-lettered before it was ever claimed). A row that is
    /// already finished, or belongs to a job of another type, is left as it is: a message
    /// reusing a finished job's id never rewrites that job's outcome.
    /// - Returns: the ids of the rows written.
    /// - Important: call inside the jobs' transaction.
    static func finish(_ jobs: [JobFinish], database: PostgresConnection) throws -> Set<JobID> {
        guard !jobs.isEmpty else { return [] }
        let rows = JSONValue.array(
            jobs.map { job in
                [
                    "id": .string(job.jobID.uuid.lowercasedText), "kind": .string(job.kind.rawValue),
                    "status": .string(job.status.rawValue), "attempts": .number(Double(job.attempts)),
                    "result": job.result ?? .null, "error": job.error?.jsonValue ?? .null,
                    "user_id": job.userID.map { .string($0.lowercasedText) } ?? .null,
                ]
            }
        )
        .jsonString()
        // INSERT … ON CONFLICT finds each row through the primary key whatever the statistics
        // say; an UPDATE … FROM the recordset was planned, while the table was small, as a scan
        // of all of jobs, and its cached plan kept scanning as the table grew.
        let written = try database.query(
            """
            INSERT INTO jobs (id, kind, status, attempts, result, error, user_id, finished_at)
            SELECT f.id, f.kind, f.status, f.attempts, f.result, f.error, f.user_id, now()
            FROM jsonb_to_recordset($1::jsonb)
                AS f(id uuid, kind text, status text, attempts integer, result jsonb, error jsonb, user_id uuid)
            ON CONFLICT (id) DO UPDATE SET
                status = EXCLUDED.status, attempts = EXCLUDED.attempts, result = EXCLUDED.result,
                error = EXCLUDED.error, user_id = COALESCE(EXCLUDED.user_id, jobs.user_id),
                updated_at = now(), finished_at = now()
            WHERE jobs.status NOT IN ('succeeded', 'failed', 'dead', 'cancelled') AND jobs.kind = EXCLUDED.kind
            RETURNING id
            """,
            [rows]
        )
        return Set(try written.map { JobID(try $0.decode(UUID.self, "id")) })
    }

    /// Records a failed attempt that will be retried (best effort; the retry does not depend on it).
    static func recordAttempt(
        jobID: JobID,
        kind: JobType,
        attempt: Int,
        error: JobError,
        database: PostgresConnection
    ) throws {
        let errorJSON = String(decoding: try JSONCoding.encoder.encode(error), as: UTF8.self)
        try database.execute(
            """
            INSERT INTO jobs (id, kind, status, attempts, error) VALUES ($1, $2, 'queued', $3, $4::jsonb)
            ON CONFLICT (id) DO UPDATE SET attempts = EXCLUDED.attempts, error = EXCLUDED.error,
                status = 'queued', updated_at = now()
            WHERE jobs.status NOT IN ('succeeded', 'failed', 'dead', 'cancelled') AND jobs.kind = EXCLUDED.kind
            """,
            [jobID.uuid, kind.rawValue, attempt, errorJSON]
        )
    }

    /// Counts one more delivery of a message (identified by its queue and body) and returns the
    /// deliveries so far, at least `atLeast`; rows untouched for a week are cleared on the way.
    static func countDelivery(queue: String, body: Data, atLeast: Int, database: PostgresConnection) throws -> Int {
        let rows = try database.query(
            """
            WITH stale AS (
                DELETE FROM delivery_counts WHERE digest IN (
                    SELECT digest FROM delivery_counts WHERE last_delivered_at < now() - interval '7 days' LIMIT 100
                )
            )
            INSERT INTO delivery_counts AS d (digest, queue, deliveries)
            VALUES (sha256(convert_to($1::text, 'UTF8') || '\\x00'::bytea || $2::bytea), $1, $3)
            ON CONFLICT (digest) DO UPDATE
                SET deliveries = greatest(d.deliveries + 1, EXCLUDED.deliveries), last_delivered_at = now()
            RETURNING deliveries
            """,
            [queue, body, atLeast]
        )
        return try rows.first?.decode(Int.self, "deliveries") ?? atLeast
    }

    /// Takes back a delivery `countDelivery` counted, for a delivery the worker handed back
    /// itself (an outage, not a crash).
    static func uncountDelivery(queue: String, body: Data, database: PostgresConnection) throws {
        try database.execute(
            """
            UPDATE delivery_counts SET deliveries = deliveries - 1
            WHERE digest = sha256(convert_to($1::text, 'UTF8') || '\\x00'::bytea || $2::bytea) AND deliveries > 1
            """,
            [queue, body]
        )
    }

    /// Adds the messages of several jobs to the outbox in one statement, in the given order,
    /// claimed for `lease` by this process's relay, to which the caller hands the returned rows
    /// once the transaction has committed (no second statement to claim them). Should this
    /// process die first, the claim lapses and any relay publishes them. With no lease the rows
    /// are left unclaimed, for any relay.
    /// - Important: call inside the jobs' transaction.
    static func enqueueClaimed(
        _ messages: [(message: OutboxMessage, jobID: JobID?)],
        lease: Duration?,
        database: PostgresConnection
    ) throws -> [PendingOutboxMessage] {
        guard !messages.isEmpty else { return [] }
        let rows = JSONValue.array(
            messages.enumerated().map { index, item in
                [
                    "n": .number(Double(index)), "exchange": .string(item.message.exchange),
                    "routing_key": .string(item.message.routingKey),
                    // bytea travels as base64 inside the JSON parameter.
                    "body": .string(item.message.body.base64EncodedString()),
                    "headers": .object(item.message.headers.mapValues { .string($0) }),
                    "mandatory": .bool(item.message.mandatory),
                    "job_id": item.jobID.map { .string($0.uuid.lowercasedText) } ?? .null,
                ]
            }
        )
        let inserted = try database.query(
            """
            INSERT INTO outbox (exchange, routing_key, body, headers, mandatory, job_id, claimed_until,
                claimed_by_pid)
            SELECT m.exchange, m.routing_key, decode(m.body, 'base64'), m.headers, m.mandatory, m.job_id,
                now() + make_interval(secs => $2::double precision),
                CASE WHEN $2::double precision IS NOT NULL THEN pg_backend_pid() END
            FROM jsonb_to_recordset($1::jsonb) AS m(n integer, exchange text, routing_key text, body text,
                headers jsonb, mandatory boolean, job_id uuid)
            ORDER BY m.n
            RETURNING id, message_id, content_type
            """,
            [rows.jsonString(), lease?.seconds]
        )
        // Identity values follow the insertion order, which is the messages' order.
        let ids = try inserted.map { row throws(PostgresError) in
            (
                id: try row.decode(Int64.self, "id"), messageID: try row.decode(UUID.self, "message_id"),
                contentType: try row.decode(String.self, "content_type")
            )
        }
        .sorted { $0.id < $1.id }
        return zip(ids, messages).map { row, item in
            PendingOutboxMessage(
                id: row.id,
                messageID: row.messageID,
                message: item.message,
                contentType: row.contentType,
                jobID: item.jobID?.uuid
            )
        }
    }

    /// Claims up to `limit` unsent rows for `lease` (rows another relay claimed and did not
    /// finish within its lease become claimable again), oldest first. Read in binary format:
    /// bodies travel as their bytes, not as hex text twice their size.
    static func claimPending(limit: Int, lease: Duration, database: PostgresConnection) throws -> [PendingOutboxMessage]
    {
        let rows = try database.query(
            """
            UPDATE outbox SET claimed_until = now() + make_interval(secs => $2), claimed_by_pid = NULL
            -- = ANY(ARRAY(…)), not IN (…): a primary-key look-up per claimed row whatever the
            -- statistics say. With IN the planner may hash-join the whole table, whose cost grows
            -- with the outbox (113 ms a call under load).
            WHERE id = ANY(ARRAY(
                SELECT id FROM outbox
                WHERE sent_at IS NULL AND (claimed_until IS NULL OR claimed_until < now()
                    -- Claimed at insert by a process that has died (its connection is gone). Only
                    -- rows older than a few seconds are looked up: a live process publishes its
                    -- rows within milliseconds, and the look-up (pg_stat_activity, built anew per
                    -- row) over every row in flight made this the costliest statement under load.
                    OR (claimed_by_pid IS NOT NULL AND outbox.created_at < now() - interval '5 seconds'
                        AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = outbox.claimed_by_pid)))
                ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
            ))
            RETURNING id, message_id, exchange, routing_key, body, content_type, headers, mandatory, job_id
            """,
            [limit, lease.seconds],
            resultFormat: .binary
        )
        return try rows.map { row in
            PendingOutboxMessage(
                id: try row.decode(Int64.self, "id"),
                messageID: try row.decode(UUID.self, "message_id"),
                message: OutboxMessage(
                    exchange: try row.decode(String.self, "exchange"),
                    routingKey: try row.decode(String.self, "routing_key"),
                    body: try row.decode(Data.self, "body"),
                    headers: try Self.headers(row),
                    mandatory: try row.decode(Bool.self, "mandatory")
                ),
                contentType: try row.decode(String.self, "content_type"),
                jobID: try row.decode(UUID?.self, "job_id")
            )
        }
        .sorted { $0.id < $1.id }
    }

    /// A row's headers: most messages have none, which needs no JSON decoder.
    private static func headers(_ row: PostgresRow) throws -> [String: String] {
        if try row.decode(String.self, "headers") == "{}" { return [:] }
        return try row.decodeJSON([String: String].self, "headers")
    }

    /// Marks rows as sent.
    /// Committed without waiting for the disk (`synchronous_commit = off` for this statement
    /// only): a mark lost in a database crash makes the relay publish those rows again, which
    /// the outbox already allows (a relay that dies between the confirm and this update does the
    /// same; consumers deduplicate by `message_id`, workers by job id). Waiting put one more
    /// WAL flush on every relay round, on a disk that does a few hundred per second.
    static func markSent(ids: [Int64], database: PostgresConnection) throws {
        guard !ids.isEmpty else { return }
        try database.execute(
            """
            WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true))
            UPDATE outbox SET sent_at = now(), claimed_until = NULL FROM relaxed
            WHERE id = ANY($1::bigint[])
            """,
            [postgresArray(ids)]
        )
    }

    /// Releases rows that failed to publish for a retry after an exponential pause (capped at
    /// five minutes, so a message the broker keeps refusing does not spin), and notes why.
    static func markFailed(ids: [Int64], error: String, database: PostgresConnection) throws {
        guard !ids.isEmpty else { return }
        try database.execute(
            """
            UPDATE outbox SET attempts = attempts + 1, last_error = $2, claimed_by_pid = NULL,
                claimed_until = now() + make_interval(secs => least(power(2, attempts), 300))
            WHERE id = ANY($1::bigint[])
            """,
            [postgresArray(ids), error]
        )
    }

    /// A Postgres array literal of integers, bound as one text parameter (never spliced into SQL).
    private static func postgresArray(_ values: [Int64]) -> String {
        "{" + values.map(String.init).joined(separator: ",") + "}"
    }
}
