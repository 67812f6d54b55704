import AstroDomain
import Foundation
import Postgres
import WorkerRuntime

/// `user.export`, step 1 (CONTRACT.md, "User export"): copies the illustration files of the
/// user's stories from this worker's storage root into `user_export_files`, records the export
/// in `user_exports` and queues `user.export-pack` (the billing-worker writes the document and
/// the zip). Only this worker reaches the storage root; it reads nothing but its own tables.
///
/// Idempotent: a rerun replaces the copied files of the same export and queues the same
/// (derived) pack job. The files are bounded by `maxBytes` and `UserExport.maxFiles`: beyond
/// them the job fails for good with `export-too-large`. `prepare` lists them with their sizes;
/// `commit` reads and stores them one at a time (binary `bytea`), so the worker holds one file,
/// not the whole export.
public struct UserExportFilesHandler: JobHandler {
    public let jobType = JobType.userExport
    let pool: PostgresPool
    let storage: IllustrationStorage
    let maxBytes: Int

    /// - Parameters:
    ///   - pool: reads the user's pages.
    ///   - storage: the illustrations' root.
    ///   - maxBytes: the bound of the whole export (`USER_EXPORT_MAX_BYTES`, clamped to
    ///     `UserExport.maxBytesRange`).
    public init(pool: PostgresPool, storage: IllustrationStorage, maxBytes: Int = UserExport.defaultMaxBytes) {
        self.pool = pool
        self.storage = storage
        self.maxBytes = min(max(maxBytes, UserExport.maxBytesRange.lowerBound), UserExport.maxBytesRange.upperBound)
    }

    /// The files to copy, or why there are none.
    public struct Prepared: Sendable {
        var request: UserExportRequest
        /// Each file's name in the zip and where it is read from.
        var files: [(path: String, url: URL)]
        var missing: Int
        var tooLarge: JobError?
    }

    /// The pack job's id: derived, so a rerun queues the same job.
    public static func packJobID(for export: JobID) -> JobID { JobID.derived(from: export, purpose: "export-pack") }

    /// Lists the files and checks their sizes against `maxBytes`.
    /// - Throws: `JobRejection` (`invalid-payload`); `PostgresError` or `IllustrationStorageError`
    ///   (retried: a file that exists but whose size cannot be read).
    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        let request = try job.decode(UserExportRequest.self)
        let paths = try await pool.withConnection { database in
            try database.query(
                """
                SELECT p.illustration_path AS path FROM stories.pages AS p
                JOIN stories.stories AS s ON s.id = p.story_id
                WHERE s.user_id = $1 AND p.illustration_path IS NOT NULL
                ORDER BY p.story_id, p.page_number
                LIMIT $2
                """,
                [request.userID.uuid, UserExport.maxFiles + 1]
            ).map { try $0.decode(String.self, "path") }
        }
        var prepared = Prepared(request: request, files: [], missing: 0)
        guard paths.count <= UserExport.maxFiles else {
            prepared.tooLarge = JobError(
                code: UserExport.tooLargeCode,
                message: "more than \(UserExport.maxFiles) illustration files"
            )
            return prepared
        }
        var total = 0
        for path in Set(paths).sorted() {
            // Stored paths are `<story>/page-<nn>.<ext>`; anything else is not read.
            guard !path.hasPrefix("/"), !path.split(separator: "/").contains(".."), path.count <= 200 else { continue }
            let url = storage.root.appendingPathComponent(path)
            guard FileManager.default.fileExists(atPath: url.path) else {
                prepared.missing += 1
                continue
            }
            let size: Int
            do {
                size = try url.resourceValues(forKeys: [.fileSizeKey]).fileSize ?? 0
            } catch {
                throw IllustrationStorageError("cannot read \(url.path): \(error.localizedDescription)")
            }
            total += size
            guard total <= maxBytes else {
                prepared.tooLarge = JobError(
                    code: UserExport.tooLargeCode,
                    message: "the illustrations alone are larger than \(maxBytes) bytes"
                )
                prepared.files = []
                return prepared
            }
            prepared.files.append((UserExport.illustrationsFolder + path, url))
        }
        return prepared
    }

    /// Records the export, copies its files and queues the pack.
    ///
    /// The files are read here, one at a time, rather than in `prepare`: this holds one file in
    /// memory instead of the whole export (up to `USER_EXPORT_MAX_BYTES`), for the price of local
    /// disk reads inside the transaction.
    /// - Throws: `PostgresError`; `IllustrationStorageError` for a file that cannot be read or
    ///   that grew past the bound since `prepare` (retried: `prepare` looks again).
    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        let request = prepared.request
        if let error = prepared.tooLarge {
            let event = JobEvent(jobID: job.jobID, userID: request.userID, type: .userExportFailed, error: error)
            return JobOutcome(status: .failed(error), messages: [try .event(event)])
        }
        let export = request.jobID.uuid
        try database.execute(
            "INSERT INTO user_exports (id, user_id) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
            [export, request.userID.uuid]
        )
        try database.execute("DELETE FROM user_export_files WHERE export_id = $1", [export])
        var total = 0
        for file in prepared.files {
            let content: Data
            do {
                content = try Data(contentsOf: file.url)
            } catch {
                throw IllustrationStorageError("cannot read \(file.url.path): \(error.localizedDescription)")
            }
            total += content.count
            guard total <= maxBytes else {
                throw IllustrationStorageError("the illustrations grew past \(maxBytes) bytes while being copied")
            }
            try database.execute(
                "INSERT INTO user_export_files (export_id, path, content) VALUES ($1, $2, $3)",
                [export, file.path, content]
            )
        }
        let pack = UserExportPackRequest(
            jobID: Self.packJobID(for: request.jobID),
            userID: request.userID,
            exportID: request.jobID
        )
        return JobOutcome(
            result: .object([
                "exportId": .string(request.jobID.description),
                "files": .number(Double(prepared.files.count)),
                "missingFiles": .number(Double(prepared.missing)),
                "packJobId": .string(pack.jobID.description),
            ]),
            messages: [.job(.userExportPack, body: try pack.jsonData())]
        )
    }
}
