import AstroDomain
import ByteCodecs
import Foundation
import Postgres
import WorkerRuntime

/// `user.export-pack`, step 2 of a user's export (CONTRACT.md, "User export"): writes the JSON
/// document (`user_export_document`, migration 0028: every table that holds the user's rows, and
/// a manifest of them), packs it with the illustration files the story-worker copied into one
/// zip, stores the zip in `user_export_chunks` until the export's `expires_at` (the user's other
/// finished exports are deleted: one is kept per user) and publishes `user.exported`.
///
/// The zip is never held whole: `prepare` plans it from the files' names and sizes (so the bound
/// is checked before anything is read), and `commit` reads one file at a time (binary `bytea`),
/// and stores the zip chunk by chunk as it is produced: the worker holds about one file and one
/// chunk, whatever the export's size.
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
        /// What to pack; nil when there is nothing to do (packed already, or too large).
        var contents: Contents?
        var alreadyPacked: Bool
        var tooLarge: JobError?
    }

    /// The zip's entries, planned: the document and the copied files' names and sizes, in order.
    struct Contents: Sendable {
        var document: Data
        var files: [(path: String, bytes: Int)]
    }

    /// Writes the document and plans the zip (its entries' names and sizes, within `maxBytes`).
    /// - Throws: `JobRejection` (`invalid-payload`; `unknown-export` when the export does not
    ///   exist or is another user's; `invalid-export-file` for a name the zip refuses);
    ///   `PostgresError` (retried).
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
        var prepared = Prepared(request: request, contents: nil, alreadyPacked: state.1, tooLarge: nil)
        if state.1 { return prepared }
        let contents = try await pool.withConnection { database in
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
            // Sizes only: the contents are read one at a time when the zip is written.
            let files = try database.query(
                "SELECT path, octet_length(content) AS bytes FROM user_export_files WHERE export_id = $1 ORDER BY path",
                [export]
            ).map { (path: try $0.decode(String.self, "path"), bytes: try $0.decode(Int.self, "bytes")) }
            return Contents(document: Data(document.utf8), files: files)
        }
        // The same writer `commit` uses, without contents (their CRCs do not change the size).
        var plan = ZipWriter(maxBytes: maxBytes)
        do {
            _ = try plan.addEntry(UserExport.documentName, byteCount: contents.document.count, crc: 0)
            for file in contents.files { _ = try plan.addEntry(file.path, byteCount: file.bytes, crc: 0) }
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
        prepared.contents = contents
        return prepared
    }

    /// The copied files changed between `prepare` and `commit` (the story-worker copied them
    /// again): retried, so that the zip is planned anew.
    struct FilesChanged: Error, CustomStringConvertible {
        var path: String
        var description: String { "the copied file \(path) changed while the export was being packed" }
    }

    /// Writes the planned zip into `user_export_chunks` as it is produced: the document, then
    /// each file, read on its own in binary format, its CRC-32 computed, its bytes cut into
    /// chunks. Holds one file and one chunk at a time.
    /// - Returns: the zip's size.
    /// - Throws: `PostgresError`; `FilesChanged` when a file is gone or not the planned size.
    func writeZip(_ contents: Contents, export: UUID, database: PostgresConnection) throws -> Int {
        var writer = ZipWriter(maxBytes: maxBytes)
        var output = ChunkedOutput(size: UserExport.chunkBytes)
        func store(_ seq: Int, _ chunk: Data) throws {
            try database.execute(
                "INSERT INTO user_export_chunks (export_id, seq, data) VALUES ($1, $2, $3)",
                [export, seq, chunk]
            )
        }
        let modified = Date()
        try output.write(try writer.add(UserExport.documentName, contents.document, modified: modified), to: store)
        for file in contents.files {
            guard
                let content = try database.query(
                    "SELECT content FROM user_export_files WHERE export_id = $1 AND path = $2",
                    [export, file.path],
                    resultFormat: .binary
                ).first?.decode(Data.self, "content"), content.count == file.bytes
            else { throw FilesChanged(path: file.path) }
            let header = try writer.addEntry(
                file.path,
                byteCount: content.count,
                crc: CRC32.checksum(content),
                modified: modified
            )
            try output.write(header, to: store)
            try output.write(content, to: store)
        }
        try output.write(writer.finish(), to: store)
        try output.close(to: store)
        return output.bytes
    }

    /// Writes and stores the zip (`writeZip`) and announces it.
    /// - Throws: `PostgresError`, `FilesChanged` (retried).
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
        if let contents = prepared.contents,
            try database.query("SELECT ready_at IS NULL AS open FROM user_exports WHERE id = $1 FOR UPDATE", [export])
                .first?.decode(Bool.self, "open") == true
        {
            // In chunks, which the gateway sends one at a time (migration 0035).
            let bytes = try writeZip(contents, export: export, database: database)
            try database.execute(
                """
                UPDATE user_exports SET bytes = $2, ready_at = now(),
                    expires_at = now() + make_interval(secs => $3), failed_code = NULL
                WHERE id = $1
                """,
                [export, bytes, ttlSeconds]
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
