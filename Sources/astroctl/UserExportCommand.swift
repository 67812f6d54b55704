import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import Postgres

struct UserExport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export everything stored about a user into a zip file.",
        discussion: """
            Queues user.export for the user, as POST /v1/me/export does (the story-worker copies \
            the illustrations, the billing-worker packs export.json and them into a zip: \
            CONTRACT.md, "User export"), waits until the zip is stored and writes it to --out \
            (refusing to overwrite an existing file). Recorded in operator_actions (action \
            user.export) before the job is queued.

            Exit status: 0 when the zip was written, 1 when the export failed (user-deleted, \
            export-too-large…) or did not finish in time, 2 for invalid input.
            """
    )

    @Argument(help: "The user id.") var userID: String
    @Option(help: "Where to write the zip (a new file).") var out: String
    @Option(help: "Seconds to wait (1–3600).") var timeout = 120
    @OptionGroup var actor: OperatorOptions
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard AstroDomain.UserID(userID) != nil else {
            throw ValidationError("\(userID.debugDescription) is not a UUID")
        }
        guard (1...3600).contains(timeout) else { throw ValidationError("--timeout: 1 to 3600 seconds") }
        guard !out.isEmpty, out.utf8.count <= 4096 else { throw ValidationError("--out: a file path") }
        guard !FileManager.default.fileExists(atPath: out) else {
            throw ValidationError("--out: \(out) exists; choose a new file")
        }
    }

    func run() async throws {
        guard let user = AstroDomain.UserID(userID) else { throw ValidationError("not a UUID") }
        let (operatorName, reason) = try actor.resolved()
        let jobID = JobID.random()
        let request = UserExportRequest(jobID: jobID, userID: user)
        let deadline = ContinuousClock.now + .seconds(timeout)
        let zip = try await connection.withPool(size: 1) { pool -> Data in
            let action = try await pool.withConnection { database in
                try OperatorStore.record(
                    "user.export",
                    operator: operatorName,
                    jobID: jobID,
                    queue: JobType.userExport.rawValue,
                    reason: reason,
                    outcome: "pending",
                    detail: ["userId": .string(user.description)],
                    database: database
                )
            }
            try await JobCommands.publish(.userExport, jobID: jobID, body: request, connection: connection)
            try await pool.withConnection { database in
                try OperatorStore.complete(action, jobID: nil, detail: [:], database: database)
            }
            let first = try await JobCommands.waitForEnd(
                of: jobID,
                pool: pool,
                until: deadline,
                onTimeout: "user.export \(jobID) did not finish within \(timeout) s: is the story-worker running?"
            )
            guard first.status == JobStatus.succeeded.rawValue else {
                throw CommandFailure(
                    "user.export \(jobID) ended \(first.status): \(first.error.map { "\($0.code): \($0.message)" } ?? "")"
                )
            }
            while ContinuousClock.now < deadline {
                let row = try await pool.withConnection { database in
                    try database.query("SELECT bytes, failed_code FROM user_exports WHERE id = $1", [jobID.uuid]).first
                        .map { (try $0.decode(Int?.self, "bytes"), try $0.decode(String?.self, "failed_code")) }
                }
                if let bytes = row?.0 { return try await Self.zip(of: jobID, bytes: bytes, pool: pool) }
                if let code = row?.1 { throw CommandFailure("export \(jobID) failed: \(code)") }
                try await Task.sleep(for: .milliseconds(200))
            }
            throw CommandFailure("export \(jobID) was not packed within \(timeout) s: is the billing-worker running?")
        }
        guard FileManager.default.createFile(atPath: out, contents: zip) else {
            throw CommandFailure("cannot write \(out)")
        }
        print("wrote export \(jobID) of user \(user) to \(out) (\(zip.count) bytes)")
    }

    /// The stored zip, read a chunk at a time (`user_export_chunks`, in `seq` order; a chunk is
    /// at most `AstroDomain.UserExport.chunkBytes`).
    /// - Throws: `CommandFailure` when the chunks do not add up to `bytes` (the export was deleted
    ///   meanwhile); `PostgresError`.
    static func zip(of export: JobID, bytes: Int, pool: PostgresPool) async throws -> Data {
        var zip = Data()
        zip.reserveCapacity(bytes)
        var next = 0
        while zip.count < bytes {
            let seq = next
            let chunk = try await pool.withConnection { database in
                try database.query(
                    "SELECT data FROM user_export_chunks WHERE export_id = $1 AND seq = $2",
                    [export.uuid, seq],
                    resultFormat: .binary
                ).first?.decode(Data.self, "data")
            }
            guard let chunk, !chunk.isEmpty else {
                throw CommandFailure("export \(export) lost its chunk \(seq): it was deleted while being read")
            }
            zip.append(chunk)
            next += 1
        }
        guard zip.count == bytes else {
            throw CommandFailure("export \(export) is \(zip.count) bytes, not the \(bytes) recorded")
        }
        return zip
    }
}
