import AstroDomain
import Foundation
import Hummingbird
import Postgres

// Export of a user's data (issue 19): `POST /v1/me/export` queues `user.export` (the story-worker
// copies the illustrations, the billing-worker packs everything into a zip stored in
// `user_exports`), `user.exported` on the event stream says it is ready, and
// `GET /v1/me/exports/{id}` downloads it with the same bearer token until it expires. A bearer
// GET rather than a signed URL: no signing key to share between replicas and rotate, the zip is
// served only to its own user, and any replica serves it from the database. Another user's
// export id answers 404, as every other resource does.
//
// Bounds (issue 29, F8): one export in progress per user (a second POST answers with it), one
// finished export kept per user (the pack deletes the older ones), and the zip sent one stored
// chunk at a time (`user_export_chunks`, migration 0035), so a download holds about a chunk of
// gateway memory, not the whole zip.

extension GatewayRoutes {
}

/// The export's stored chunks ended before its size (it was deleted while being sent).
struct ExportDownloadInterrupted: Error {}

extension GatewayStore {
    /// A user's export as the download needs it.
    struct Export: Sendable {
        /// The zip's size once it is stored (its chunks: `exportChunk`).
        var bytes: Int?
        var expiresAt: Date?
        var failedCode: String?
    }

    /// Chunk `seq` of export `id`'s zip (`UserExport.chunkBytes` bytes, the last one shorter),
    /// read in binary format (its bytes, not their hex text); nil when there is none (past the
    /// end, or the export was deleted).
    /// - Throws: `PostgresError`.
    func exportChunk(_ id: UUID, seq: Int) async throws -> Data? {
        try await pool.withConnection { database in
            try database.query(
                "SELECT data FROM user_export_chunks WHERE export_id = $1 AND seq = $2",
                [id, seq],
                resultFormat: .binary
            ).first?.decode(Data.self, "data")
        }
    }

    /// Records `POST /v1/me/export`: as `record`, except that while an export of the user is in
    /// progress, that export's job is returned instead of a new one (the caller publishes it if
    /// it never was). In progress: asked for less than `UserExport.inProgressSeconds` ago, and
    /// its `user.export` job has not finished, or finished and its pack has not (no zip, no
    /// failure). An idempotency key used before returns its own job first, as `record` does.
    /// Concurrent requests of one user serialize on a lock of the user's exports, so 30 at once
    /// make one export.
    /// - Throws: `PostgresError`.
    func recordExport(user: UserID, idempotencyKey: String?, requestHash: String) async throws -> RecordedJob {
        try await pool.withTransaction { database -> RecordedJob in
            try database.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('user-export:' || $1::text, 0))",
                [user.uuid]
            )
            let keyed =
                try idempotencyKey.map { key in
                    try database.query(
                        "SELECT 1 FROM gateway_jobs WHERE user_id = $1 AND idempotency_key = $2",
                        [user.uuid, key]
                    )
                }?.isEmpty == false
            if !keyed,
                let row = try database.query(
                    """
                    SELECT g.job_id, g.published_at IS NOT NULL AS published, g.request_hash
                    FROM gateway_jobs AS g
                    LEFT JOIN jobs AS j ON j.id = g.job_id
                    LEFT JOIN user_exports AS e ON e.id = g.job_id
                    WHERE g.user_id = $1 AND g.kind = $2 AND g.created_at > now() - make_interval(secs => $3)
                      AND (j.finished_at IS NULL
                           OR (j.status = 'succeeded' AND e.id IS NOT NULL AND e.ready_at IS NULL
                               AND e.failed_code IS NULL))
                    ORDER BY g.created_at DESC LIMIT 1
                    """,
                    [user.uuid, JobType.userExport.rawValue, UserExport.inProgressSeconds]
                ).first
            {
                return RecordedJob(
                    jobID: JobID(try row.decode(UUID.self, "job_id")),
                    published: try row.decode(Bool.self, "published"),
                    requestHash: try row.decode(String.self, "request_hash")
                )
            }
            return try Self.record(
                user: user,
                kind: .userExport,
                idempotencyKey: idempotencyKey,
                requestHash: requestHash,
                database: database
            )
        }
    }

    /// The export `id` of `user`; nil when there is none (or it is another user's). An export
    /// the gateway accepted (`POST /v1/me/export`, published) whose row the story-worker has not
    /// written yet is one with nothing in it: not ready, never 404, since the 202 named its path.
    /// Once that job has finished (it records the export in the same transaction), a missing row
    /// is an export deleted (expired, or its user's) or never made (the job failed): 404.
    /// - Throws: `PostgresError`.
    func export(_ id: UUID, user: UserID) async throws -> Export? {
        try await pool.withConnection { database -> Export? in
            let rows = try database.query(
                """
                SELECT bytes, extract(epoch FROM expires_at)::float8 AS expires, failed_code, 0 AS rank
                FROM user_exports WHERE id = $1 AND user_id = $2
                UNION ALL
                SELECT NULL::integer, NULL::float8, NULL::text, 1
                FROM gateway_jobs g LEFT JOIN jobs j ON j.id = g.job_id
                WHERE g.job_id = $1 AND g.user_id = $2 AND g.kind = $3 AND g.published_at IS NOT NULL
                  AND j.finished_at IS NULL
                ORDER BY rank LIMIT 1
                """,
                [id, user.uuid, JobType.userExport.rawValue]
            )
            return try rows.first.map { row in
                Export(
                    bytes: try row.decode(Int?.self, "bytes"),
                    expiresAt: try row.decode(Double?.self, "expires").map { Date(timeIntervalSince1970: $0) },
                    failedCode: try row.decode(String?.self, "failed_code")
                )
            }
        }
    }
}
