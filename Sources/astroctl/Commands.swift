import AMQP
import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import Postgres
import Schema
import WorkerRuntime

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending database migrations and declare the broker topology.",
        discussion: """
            Safe to run any number of times, and from several processes at once: \
            migrations run in order inside transactions under an advisory lock and are \
            recorded in schema_migrations; exchanges, queues and bindings are declared \
            idempotently. Workers migrate the database at start-up too \
            (MIGRATE_ON_START) and declare broker objects that are missing when their \
            broker user may; a worker on its own broker user may declare nothing, so the \
            broker topology must come from this command, run as the broker's \
            administrator with the same QUEUE_TYPE and RETRY_* settings as the workers.

            Each worker and the gateway connects as its own database role \
            (astro_chart_worker, astro_report_worker, astro_billing_worker, \
            astro_story_worker, astro_gateway), which the migrations create without login. \
            Set CHART_WORKER_DB_PASSWORD, REPORT_WORKER_DB_PASSWORD, \
            BILLING_WORKER_DB_PASSWORD, STORY_WORKER_DB_PASSWORD and GATEWAY_DB_PASSWORD \
            and this command lets each role log in with that password (set again on every \
            run); OPERATOR_DB_PASSWORD likewise for astro_operator, the role of astroctl's \
            operator commands (dead, job cancel).
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var retry: RetryOptions

    @Flag(help: "Only the database; do not touch the broker.")
    var databaseOnly = false

    func run() async throws {
        let logger = connection.logger
        let environment = ProcessInfo.processInfo.environment
        let passwords = WorkerRole.allCases.compactMap { role in
            environment[role.passwordVariable].flatMap { $0.isEmpty ? nil : (role, $0) }
        }
        let applied = try await connection.withPool { pool in
            let applied = try await Migrator(migrations: try AstroSchema.migrations(), logger: logger).migrate(
                pool: pool
            )
            try await pool.withConnection { database in
                for (role, password) in passwords { try role.enableLogin(password: password, database: database) }
            }
            return applied
        }
        if applied.isEmpty {
            print("database: schema up to date")
        } else {
            for migration in applied { print("database: applied \(migration.version) \(migration.name)") }
        }
        for (role, _) in passwords {
            print("database: role \(role.rawValue) may log in (password from \(role.passwordVariable))")
        }
        guard !databaseOnly else { return }
        let topology = WorkerTopology.contract(
            retry: retry.policy,
            queueType: QueueSpec.QueueType(rawValue: retry.queueType) ?? .classic
        )
        let drainTimeout = Duration.milliseconds(retry.retryMaxDelayMs) + .seconds(30)
        let changes: [String]
        do {
            changes = try await connection.withPublisher { publisher in
                try await BrokerUpgrade.declareContract(
                    topology,
                    publisher: publisher,
                    drainTimeout: drainTimeout,
                    logger: logger
                )
            }
        } catch let refusal as BrokerUpgrade.Refusal {
            throw CommandFailure("broker: \(refusal.description)")
        }
        for change in changes { print("broker: \(change)") }
        print(
            "broker: declared \(topology.exchanges.count) exchanges, \(topology.queues.count) queues, "
                + "\(topology.bindings.count) bindings, \(topology.exchangeBindings.count) exchange bindings"
        )
    }
}

extension RetryOptions {
    var policy: RetryPolicy {
        RetryPolicy(
            maxAttempts: maxAttempts,
            initialDelay: .milliseconds(retryInitialDelayMs),
            maxDelay: .milliseconds(retryMaxDelayMs)
        )
    }
}

struct Publish: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish a job and print its jobId.",
        discussion: """
            The JSON body comes from --file or standard input. A body without "jobId" \
            gets a new one. The job goes with the job type as routing key, persistent, to \
            the astro.requests exchange when a client may ask for it and to astro.jobs \
            otherwise (report.generate, billing.refund-credit: the administrator's or a \
            worker's), and returns once the broker confirmed it. Job types: \
            \(JobType.all.map(\.rawValue).joined(separator: ", ")).

            Example:
              astroctl publish chart.calculate --file job.json
              astroctl job $(astroctl publish chart.calculate < job.json)
            """
    )

    @Argument(help: "The job type (routing key), e.g. chart.calculate.")
    var type: String

    @Option(name: .shortAndLong, help: "Read the JSON body from this file instead of standard input.")
    var file: String?

    @Flag(help: "Allow a job type the contract does not list (tests, experiments).")
    var anyType = false

    @Flag(help: "Do not record the job as queued in the jobs table (no database needed).")
    var noRecord = false

    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        if !anyType, !JobType.all.contains(JobType(rawValue: type)) {
            throw ValidationError(
                "unknown job type \(type.debugDescription); one of: \(JobType.all.map(\.rawValue).joined(separator: ", "))"
            )
        }
    }

    func run() async throws {
        let input: Data
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw CommandFailure("cannot read \(file)")
            }
            input = data
        } else {
            input = FileHandle.standardInput.readDataToEndOfFile()
        }
        let (body, jobID) = try Self.prepareBody(input)
        let jobType = JobType(rawValue: type)
        try ChartResultBodies.validate(jobType, body: body)
        if !noRecord {
            // So `astroctl job` can say "queued" before a worker picks it up. A worker that
            // finishes first simply overwrites it; ON CONFLICT keeps this harmless.
            _ = try await connection.withPool(size: 1) { pool in
                try await pool.withConnection { database in
                    try database.execute(
                        "INSERT INTO jobs (id, kind, status) VALUES ($1, $2, 'queued') ON CONFLICT (id) DO NOTHING",
                        [jobID.uuid, jobType.rawValue]
                    )
                }
            }
        }
        try await JobCommands.publish(
            JobCommands.message(jobType, jobID: jobID, body: body),
            connection: connection
        )
        print(jobID)
    }

    /// Checks the body is a JSON object and makes sure it has a jobId.
    static func prepareBody(_ data: Data) throws -> (Data, JobID) {
        guard case .object(var object)? = try? JSONDecoder().decode(JSONValue.self, from: data) else {
            throw CommandFailure("the body must be a JSON object")
        }
        let jobID: JobID
        switch object["jobId"] {
        case nil, .null?:
            jobID = .random()
            object["jobId"] = .string(jobID.description)
        case .string(let text)?:
            guard let parsed = JobID(text) else { throw CommandFailure("jobId \(text.debugDescription) is not a UUID") }
            jobID = parsed
        default:
            throw CommandFailure("jobId must be a UUID string")
        }
        return (try JSONCoding.encoder.encode(JSONValue.object(object)), jobID)
    }
}

struct JobStatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show what became of a job (from the jobs table; `astroctl job <jobId>`).",
        discussion: "Exit status: 0 when found, 1 when no worker has recorded the job yet."
    )

    @Argument(help: "The jobId printed by `astroctl publish`.")
    var jobID: String

    @Flag(help: "Print the row as JSON.")
    var json = false

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        guard let id = JobID(jobID) else { throw ValidationError("\(jobID.debugDescription) is not a UUID") }
        let row = try await connection.withPool(size: 1) { pool in
            try await pool.withConnection { database -> JobRow? in
                let rows = try database.query(
                    """
                    SELECT id, kind, status, attempts, error::text AS error, result::text AS result,
                           created_at, updated_at, finished_at
                    FROM jobs WHERE id = $1
                    """,
                    [id.uuid]
                )
                guard let row = rows.first else { return nil }
                return JobRow(
                    id: id.description,
                    kind: try row.decode(String.self, "kind"),
                    status: try row.decode(String.self, "status"),
                    attempts: try row.decode(Int.self, "attempts"),
                    error: try row.decode(String?.self, "error"),
                    result: try row.decode(String?.self, "result"),
                    createdAt: try row.decode(Date.self, "created_at"),
                    updatedAt: try row.decode(Date.self, "updated_at"),
                    finishedAt: try row.decode(Date?.self, "finished_at")
                )
            }
        }
        guard let row else {
            throw CommandFailure("job \(id) is unknown: not published through astroctl and not seen by any worker yet")
        }
        if json {
            print(String(decoding: try JSONCoding.encoder.encode(row), as: UTF8.self))
            return
        }
        print("job       \(row.id)")
        print("type      \(row.kind)")
        print("status    \(row.status)")
        print("attempts  \(row.attempts)")
        print("created   \(ISO8601.string(from: row.createdAt))")
        print("updated   \(ISO8601.string(from: row.updatedAt))")
        if let finished = row.finishedAt { print("finished  \(ISO8601.string(from: finished))") }
        if let error = row.error { print("error     \(error)") }
        if let result = row.result { print("result    \(result)") }
    }

    struct JobRow: Codable, Sendable {
        var id: String
        var kind: String
        var status: String
        var attempts: Int
        var error: String?
        var result: String?
        var createdAt: Date
        var updatedAt: Date
        var finishedAt: Date?
    }
}

struct Queues: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the depth and consumers of every job queue and its dead-letter queue.",
        discussion: "Reads the broker with passive declarations (no management plugin needed)."
    )

    @Option(help: "Also show these queues (repeatable).")
    var queue: [String] = []

    @Flag(help: "Print JSON instead of a table.")
    var json = false

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let names =
            JobType.all.flatMap { [$0.rawValue, BrokerNames.deadLetterQueue(of: $0.rawValue)] } + queue
        let states = try await connection.withPublisher { publisher in
            var states: [(String, AMQPPublisher.QueueState?)] = []
            for name in names {
                do {
                    states.append((name, try await publisher.queueState(name)))
                } catch let error as AMQPError where error.kind == .notFound {
                    states.append((name, nil))
                }
            }
            return states
        }
        if json {
            let objects = states.map { name, state -> JSONValue in
                guard let state else { return ["queue": .string(name), "exists": false] }
                return [
                    "queue": .string(name), "exists": true, "messages": .number(Double(state.messageCount)),
                    "consumers": .number(Double(state.consumerCount)),
                ]
            }
            print(String(decoding: try JSONCoding.encoder.encode(JSONValue.array(objects)), as: UTF8.self))
            return
        }
        let width = max(names.map(\.count).max() ?? 0, 5)
        print("QUEUE".padding(toLength: width, withPad: " ", startingAt: 0) + "  MESSAGES  CONSUMERS")
        for (name, state) in states {
            let padded = name.padding(toLength: width, withPad: " ", startingAt: 0)
            if let state {
                print(
                    padded + "  " + String(state.messageCount).leftPadded(8) + "  "
                        + String(state.consumerCount).leftPadded(9)
                )
            } else {
                print(padded + "  (missing: run astroctl migrate)")
            }
        }
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
