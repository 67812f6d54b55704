import AstroDomain
import Foundation
import Postgres
import WorkerRuntime

/// `user.export-pack`, step 2 of a user's export (CONTRACT.md, "User export"): writes the JSON
/// document (`user_export_document`, migration 0028: every table that holds the user's rows, and
/// a manifest of them), packs it with the illustration files the story-worker copied into one
/// zip, stores the zip in `user_export_chunks` until the export's `expires_at` (the user's other
/// finished exports are deleted: one is kept per user) and publishes `user.exported`.
/// Run by the billing-worker, the worker already trusted with every table of a user (it erases
/// them in `user.delete`).
///
/// Idempotent: an export already packed is announced again, unchanged. An export larger than
/// `maxBytes` fails for good with `export-too-large` (recorded on the export, no zip).
public struct UserExportPackHandler: JobHandler {
    public let jobType = JobType.userExportPack
    let pool: PostgresPool
    let maxBytes: Int
    let ttlSeconds: Int

    /// - Parameters:
    ///   - pool: reads the document and the copied files.
    ///   - maxBytes: the bound of the zip (`USER_EXPORT_MAX_BYTES`, clamped to `UserExport.maxBytesRange`).
    ///   - ttlSeconds: how long the zip can be downloaded (`USER_EXPORT_TTL_SECONDS`, clamped to
    ///     `UserExport.ttlSecondsRange`).
    public init(
        pool: PostgresPool,
        maxBytes: Int = UserExport.defaultMaxBytes,
        ttlSeconds: Int = UserExport.defaultTTLSeconds
    ) {
        self.pool = pool
        self.maxBytes = min(max(maxBytes, UserExport.maxBytesRange.lowerBound), UserExport.maxBytesRange.upperBound)
        self.ttlSeconds = min(
            max(ttlSeconds, UserExport.ttlSecondsRange.lowerBound),
            UserExport.ttlSecondsRange.upperBound
        )
    }

    /// Reads the settings from `USER_EXPORT_MAX_BYTES` and `USER_EXPORT_TTL_SECONDS`.
    /// - Throws: `UserExportSettingError` for a value outside its bounds.
    public static func fromEnvironment(_ environment: [String: String], pool: PostgresPool) throws -> Self {
        Self(
            pool: pool,
            maxBytes: try UserExport.setting(
                "USER_EXPORT_MAX_BYTES",
                in: environment,
                range: UserExport.maxBytesRange,
                default: UserExport.defaultMaxBytes
            ),
            ttlSeconds: try UserExport.setting(
                "USER_EXPORT_TTL_SECONDS",
                in: environment,
                range: UserExport.ttlSecondsRange,
                default: UserExport.defaultTTLSeconds
            )
        )
    }

    public struct Prepared: Sendable {
        var request: UserExportPackRequest
        var zip: Data?
        var alreadyPacked: Bool
        var tooLarge: JobError?
        var files: Int
    }

    /// Writes the document and the zip.
    /// - Throws: `JobRejection` (`invalid-payload`; `unknown-export` when the export does not
    ///   exist or is another user's); `PostgresError` (retried).
    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        let request = try job.decode(UserExportPackRequest.self)
        let export = request.exportID.uuid
        let state = try await pool.withConnection { database in
            try database.query(
                "SELECT user_id, ready_at IS NOT NULL AS packed FROM user_exports WHERE id = $1",
                [export]
            ).first.map { (try $0.decode(UUID.self, "user_id"), try $0.decode(Bool.self, "packed")) }
        }
        guard let state, state.0 == request.userID.uuid else {
            throw JobRejection(
                code: UserExport.unknownExportCode,
                message: "no export \(request.exportID) of this user"
            )
        }
        var prepared = Prepared(request: request, zip: nil, alreadyPacked: state.1, tooLarge: nil, files: 0)
        if state.1 { return prepared }
        let (document, files) = try await pool.withConnection { database in
            let document =
                try database.query(
                    """
                    SELECT jsonb_pretty(user_export_document($1) || jsonb_build_object(
                        'exportId', $2::uuid,
                        'files', (SELECT coalesce(jsonb_agg(jsonb_build_object('path', f.path,
                            'bytes', octet_length(f.content)) ORDER BY f.path), '[]')
                            FROM user_export_files AS f WHERE f.export_id = $2))) AS document
                    """,
                    [request.userID.uuid, export]
                ).first?.decode(String.self, "document") ?? "{}"
            // One file at a time would bound memory better; the total is bounded by maxBytes
            // already (the story-worker refused more), so they are read together.
            let files = try database.query(
                "SELECT path, content FROM user_export_files WHERE export_id = $1 ORDER BY path",
                [export]
            ).map { (try $0.decode(String.self, "path"), try $0.decode(Data.self, "content")) }
            return (document, files)
        }
        var writer = ZipWriter(maxBytes: maxBytes)
        do {
            try writer.add(UserExport.documentName, Data(document.utf8))
            for (path, content) in files { try writer.add(path, content) }
        } catch .tooLarge(let limit) {
            prepared.tooLarge = JobError(
                code: UserExport.tooLargeCode,
                message: "the export would be larger than \(limit) bytes (USER_EXPORT_MAX_BYTES)"
            )
            return prepared
        } catch {
            // A name the story-worker wrote that the zip refuses: its data is wrong for good.
            throw JobRejection(code: .invalidExportFile, message: "\(error)")
        }
        prepared.zip = writer.finish()
        prepared.files = files.count
        return prepared
    }

    /// Stores the zip and announces it.
    /// - Throws: `PostgresError` (retried).
    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        let request = prepared.request
        let export = request.exportID.uuid
        if let error = prepared.tooLarge {
            try database.execute(
                "UPDATE user_exports SET failed_code = $2 WHERE id = $1 AND ready_at IS NULL",
                [export, error.code]
            )
            try database.execute("DELETE FROM user_export_files WHERE export_id = $1", [export])
            let event = JobEvent(
                jobID: job.jobID,
                userID: request.userID,
                type: .userExportPackFailed,
                fields: ["exportId": .string(request.exportID.description)],
                error: error
            )
            return JobOutcome(status: .failed(error), messages: [try .event(event)])
        }
        if let zip = prepared.zip,
            try database.query("SELECT ready_at IS NULL AS open FROM user_exports WHERE id = $1 FOR UPDATE", [export])
                .first?.decode(Bool.self, "open") == true
        {
            // In chunks: no value nears PostgreSQL's 1 GB field limit (as hex text, a 512 MiB zip
            // would pass it), and the gateway sends one chunk at a time (migration 0035).
            for (seq, start) in stride(from: 0, to: zip.count, by: UserExport.chunkBytes).enumerated() {
                try database.execute(
                    "INSERT INTO user_export_chunks (export_id, seq, data) VALUES ($1, $2, $3)",
                    [export, seq, Data(zip[start..<min(start + UserExport.chunkBytes, zip.count)])]
                )
            }
            try database.execute(
                """
                UPDATE user_exports SET bytes = $2, ready_at = now(),
                    expires_at = now() + make_interval(secs => $3), failed_code = NULL
                WHERE id = $1
                """,
                [export, zip.count, ttlSeconds]
            )
            try database.execute("DELETE FROM user_export_files WHERE export_id = $1", [export])
            // The newest finished export replaces the user's others (and their zips): one kept
            // per user, however often they ask. Exports still being built are left to finish.
            try database.execute(
                """
                DELETE FROM user_exports
                WHERE user_id = $1 AND id <> $2 AND (ready_at IS NOT NULL OR failed_code IS NOT NULL)
                """,
                [request.userID.uuid, export]
            )
        }
        let row = try database.query(
            """
            SELECT bytes, to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS expires
            FROM user_exports WHERE id = $1
            """,
            [export]
        ).first
        let fields: [String: JSONValue] = [
            "userId": .string(request.userID.description),
            "exportId": .string(request.exportID.description),
            "bytes": .number(Double(try row?.decode(Int?.self, "bytes") ?? 0)),
            "expiresAt": .string(try row?.decode(String?.self, "expires") ?? ""),
            "downloadPath": .string("/v1/me/exports/\(request.exportID)"),
            "alreadyPacked": .bool(prepared.alreadyPacked),
        ]
        let event = JobEvent(jobID: job.jobID, userID: request.userID, type: .userExported, fields: fields)
        return JobOutcome(result: .object(fields), messages: [try .event(event)])
    }
}
