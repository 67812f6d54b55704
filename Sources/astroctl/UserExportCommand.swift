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
                    try database.query("SELECT zip, failed_code FROM user_exports WHERE id = $1", [jobID.uuid]).first
                        .map { (try $0.decode(Data?.self, "zip"), try $0.decode(String?.self, "failed_code")) }
                }
                if let zip = row?.0 { return zip }
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
}
