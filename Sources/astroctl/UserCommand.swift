import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import Postgres

/// `astroctl user`: operator actions on an app user.
struct UserCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Operator actions on an app user (deletion, export).",
        discussion: """
            Examples:
              astroctl user delete 5c1e… --why "asked by mail, ticket 812"
              astroctl user delete 5c1e… --yes --wait
              astroctl user export 5c1e… --out 5c1e.zip --why "access request, ticket 813"
            """,
        subcommands: [UserDelete.self, UserExport.self]
    )
}

struct UserDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Erase a user's personal data (asks first, unless --yes).",
        discussion: """
            Queues user.delete for the user, as DELETE /v1/me does: the billing-worker erases \
            their profiles, charts, reports, stories, children and the gateway's records of them, \
            forfeits their unspent credits, and keeps their purchases and ledger entries under \
            the user's id, which then links to nothing personal (CONTRACT.md, "User deletion"). \
            The job id is derived from the user id, so running the command again queues the \
            same job. Recorded in operator_actions (action user.delete) before the job is queued.

            Exit status: 0 when queued (with --wait: when the job succeeded), 1 when it failed \
            or did not finish in time, 2 for invalid input or no confirmation.
            """
    )

    @Argument(help: "The user id.") var userID: String
    @Flag(help: "Do not ask for confirmation.") var yes = false
    @Flag(help: "Wait until the deletion is finished.") var wait = false
    @Option(help: "Seconds to wait with --wait (1–3600).") var timeout = 120
    @OptionGroup var actor: OperatorOptions
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard UserID(userID) != nil else { throw ValidationError("\(userID.debugDescription) is not a UUID") }
        guard (1...3600).contains(timeout) else { throw ValidationError("--timeout: 1 to 3600 seconds") }
    }

    /// The job id of an operator's deletion of `user`: the same for every run.
    static func jobID(for user: UserID) -> JobID {
        JobID.derived(from: JobID(user.uuid), purpose: "user.delete")
    }

    func run() async throws {
        guard let user = UserID(userID) else { throw ValidationError("not a UUID") }
        let (operatorName, reason) = try actor.resolved()
        if !yes {
            FileHandle.standardError.write(
                Data("Erase every personal record of user \(user) for good? Type yes to confirm: ".utf8)
            )
            let answer = readLine(strippingNewline: true)
            if answer == nil { FileHandle.standardError.write(Data("\n".utf8)) }
            guard Confirmation.accepts(answer) else {
                throw ValidationError("not confirmed: nothing queued")
            }
        }
        let jobID = Self.jobID(for: user)
        let request = UserDeleteRequest(jobID: jobID, userID: user)
        let finished = try await connection.withPool(size: 1) { pool -> JobCommands.Finished? in
            let action = try await pool.withConnection { database in
                try OperatorStore.record(
                    "user.delete",
                    operator: operatorName,
                    jobID: jobID,
                    queue: JobType.userDelete.rawValue,
                    reason: reason,
                    outcome: "pending",
                    detail: ["userId": .string(user.description)],
                    database: database
                )
            }
            try await JobCommands.publish(.userDelete, jobID: jobID, body: request, connection: connection)
            try await pool.withConnection { database in
                try OperatorStore.complete(action, jobID: nil, detail: [:], database: database)
            }
            guard wait else { return nil }
            return try await JobCommands.waitForEnd(of: jobID, pool: pool, timeout: timeout, worker: "billing-worker")
        }
        guard let finished else {
            print("queued user.delete \(jobID) for user \(user)")
            return
        }
        guard finished.status == JobStatus.succeeded.rawValue else {
            throw CommandFailure(
                "user.delete \(jobID) ended \(finished.status): \(finished.error.map { "\($0.code): \($0.message)" } ?? "")"
            )
        }
        print("deleted user \(user) (job \(jobID)): \(finished.result?.jsonString() ?? "{}")")
    }
}
