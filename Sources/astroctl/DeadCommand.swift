import AMQP
import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import Postgres
import UUIDText

/// `astroctl dead`: the dead-letter queues an operator can read and act on.
struct DeadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dead",
        abstract: "List, show, replay and purge dead letters (the <queue>.dead queues).",
        discussion: """
            Reads the dead-letter queues without removing anything (the messages are held \
            unacknowledged while the command runs and go back to their queue, in order, when it \
            ends or is killed). Replay and purge remove a dead letter only after what replaces it \
            is durable, and every replay and purge is recorded in operator_actions with who \
            (--operator, else $ASTRO_OPERATOR, else the login user), when and why (--why).

            The broker user must read the .dead queues and publish to astro.jobs: the user \
            astro-operator (OPERATOR_AMQP_PASSWORD) may do exactly that and nothing more. The \
            database user needs only the astro_operator role's grants (migration 0020; \
            OPERATOR_DB_PASSWORD).

            Examples:
              astroctl dead list --queue chart.calculate --since 2h
              astroctl dead show 9b2f…
              astroctl dead replay 9b2f… --why "ephemeris files restored"
              astroctl dead replay --queue report.generate --reason llm-rate-limited --why "quota raised"
              astroctl dead purge --queue story.read --yes --why "test traffic"
            """,
        subcommands: [DeadList.self, DeadShow.self, DeadReplay.self, DeadPurge.self]
    )
}

/// Which dead letters a command works on.
struct DeadSelection: ParsableArguments {
    @Option(
        name: .customLong("queue"),
        help: "A job queue or its .dead queue (repeatable; default: every job type's dead-letter queue)."
    )
    var queues: [String] = []

    @Option(name: .customLong("reason"), help: "Only dead letters with this reason code.")
    var reasonCode: String?

    @Option(help: "Only dead letters whose last failure is this recent: 30m, 12h, 7d, or an ISO 8601 time.")
    var since: String?

    @Option(help: "Read at most this many messages (1 to 5000).")
    var limit = 1000

    /// The dead-letter queues named (a work queue's name stands for its `.dead` queue).
    /// - Throws: `ValidationError` for a name that cannot be a queue's.
    func deadQueues() throws -> [String] {
        guard (1...DeadLetterReader.maximumLimit).contains(limit) else {
            throw ValidationError("--limit: 1 to \(DeadLetterReader.maximumLimit)")
        }
        if let reasonCode, reasonCode.isEmpty || reasonCode.utf8.count > 100 {
            throw ValidationError("--reason: a reason code of 1 to 100 characters")
        }
        guard !queues.isEmpty else { return JobType.all.map { BrokerNames.deadLetterQueue(of: $0.rawValue) } }
        return try queues.map { name in
            let allowed = name.unicodeScalars.allSatisfy {
                CharacterSet.alphanumerics.contains($0) || $0 == "." || $0 == "-" || $0 == "_"
            }
            guard !name.isEmpty, name.utf8.count <= 250, allowed else {
                throw ValidationError("--queue: \(name.debugDescription) is not a queue name")
            }
            return name.hasSuffix(".dead") ? name : BrokerNames.deadLetterQueue(of: name)
        }
    }

    /// The moment of `--since`, if given.
    func sinceDate() throws -> Date? {
        guard let since else { return nil }
        do {
            return try SinceOption.parse(since)
        } catch {
            throw ValidationError(error.description)
        }
    }
}

/// Who does an operator action, and why.
struct OperatorOptions: ParsableArguments {
    @Option(name: .customLong("operator"), help: "Who does this (default: $ASTRO_OPERATOR, else the login user).")
    var operatorName: String?

    @Option(help: "Why (recorded with the action; up to 500 characters).")
    var why: String?

    /// The recorded operator and reason.
    func resolved() throws -> (name: String, reason: String?) {
        do {
            return (
                // A shell without USER or LOGNAME (a container, cron) still has a login name.
                try OperatorIdentity.resolve(
                    option: operatorName,
                    environment: ProcessInfo.processInfo.environment.merging(["LOGNAME": NSUserName()]) { set, _ in
                        set
                    }
                ),
                try OperatorIdentity.reason(why)
            )
        } catch {
            throw ValidationError(error.description)
        }
    }
}

/// The dead letters of one job (or one message without a job id), with the job's row.
struct DeadEntry: Sendable {
    var letters: [DeadLetter]
    var row: DeadJobRow?

    var jobID: JobID? { letters[0].jobID }
    var type: String { row?.kind ?? letters[0].workQueue }
    var reasonCode: String { letters[0].reasonCode }
    var reason: String { letters[0].reason }
    var attempts: Int? { row?.attempts ?? letters.compactMap(\.attempt).max() }
    /// The earliest failure the messages record, or the first death before a replay when earlier.
    var firstFailure: Date? {
        (letters.compactMap(\.failedAt) + [row?.firstFailedBeforeReplay].compactMap { $0 }).min()
    }
    /// The latest failure the messages record, or the dead row's end when later.
    var lastFailure: Date? {
        let dead = row?.status == JobStatus.dead.rawValue ? row?.finishedAt : nil
        return (letters.compactMap(\.failedAt) + [dead].compactMap { $0 }).max()
    }
    var userID: String? {
        if let user = row?.userID { return user.lowercasedText }
        let object = try? JSONSerialization.jsonObject(with: letters[0].delivery.body) as? [String: Any]
        return (object?["userId"] as? String).flatMap { $0.utf8.count <= 64 ? $0 : nil }
    }

    /// Groups letters by job id (letters without one stay alone), in the order read.
    static func group(_ letters: [DeadLetter], rows: [JobID: DeadJobRow]) -> [DeadEntry] {
        var entries: [DeadEntry] = []
        var index: [JobID: Int] = [:]
        for letter in letters {
            if let id = letter.jobID, let at = index[id] {
                entries[at].letters.append(letter)
            } else {
                if let id = letter.jobID { index[id] = entries.count }
                entries.append(DeadEntry(letters: [letter], row: letter.jobID.flatMap { rows[$0] }))
            }
        }
        return entries
    }

    func matches(reasonCode code: String?, since: Date?) -> Bool {
        if let code, !letters.contains(where: { $0.reasonCode == code }) { return false }
        if let since, (lastFailure ?? .distantPast) < since { return false }
        return true
    }
}

/// Reads the selected dead letters and the jobs' rows, runs `body`, then gives back whatever
/// `body` did not remove.
func withDeadLetters<T: Sendable>(
    _ selection: DeadSelection,
    connection: ConnectionOptions,
    _ body: (DeadLetterReader, [DeadEntry], AMQPPublisher, PostgresPool) async throws -> T
) async throws -> T {
    let queues = try selection.deadQueues()
    let since = try selection.sinceDate()
    return try await connection.withPublisher { publisher in
        let reader = try await DeadLetterReader.open(
            queues: queues,
            limit: selection.limit,
            connection: connection,
            publisher: publisher
        )
        do {
            let result = try await connection.withPool { pool in
                let ids = reader.letters.compactMap(\.jobID)
                let rows = try await pool.withConnection { try OperatorStore.rows(ids, database: $0) }
                let entries = DeadEntry.group(reader.letters, rows: rows).filter {
                    $0.matches(reasonCode: selection.reasonCode, since: since)
                }
                if reader.unread > 0 {
                    FileHandle.standardError.write(
                        Data("note: \(reader.unread) more dead letters not read (--limit \(selection.limit))\n".utf8)
                    )
                }
                return try await body(reader, entries, publisher, pool)
            }
            await reader.close(publisher: publisher)
            return result
        } catch {
            await reader.close()
            throw error
        }
    }
}

struct DeadList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List dead letters: job, type, reason, attempts, first and last failure, user."
    )

    @OptionGroup var selection: DeadSelection
    @Flag(help: "Print JSON instead of a table.") var json = false
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let entries = try await withDeadLetters(selection, connection: connection) { _, entries, _, _ in entries }
        if json {
            let objects = entries.map { entry -> JSONValue in
                [
                    "jobId": entry.jobID.map { .string($0.description) } ?? .null, "type": .string(entry.type),
                    "queue": .string(entry.letters[0].deadQueue), "reasonCode": .string(entry.reasonCode),
                    "reason": .string(entry.reason), "attempts": entry.attempts.map { .number(Double($0)) } ?? .null,
                    "firstFailure": entry.firstFailure.map { .string(ISO8601.string(from: $0)) } ?? .null,
                    "lastFailure": entry.lastFailure.map { .string(ISO8601.string(from: $0)) } ?? .null,
                    "userId": entry.userID.map { .string($0) } ?? .null,
                    "status": entry.row.map { .string($0.status) } ?? .null,
                    "copies": .number(Double(entry.letters.count)),
                ]
            }
            print(String(decoding: try JSONCoding.encoder.encode(JSONValue.array(objects)), as: UTF8.self))
            return
        }
        guard !entries.isEmpty else {
            print("no dead letters")
            return
        }
        let rows = entries.map { entry in
            [
                entry.jobID?.description ?? "-", entry.type, entry.reasonCode, entry.attempts.map(String.init) ?? "-",
                entry.firstFailure.map { ISO8601.string(from: $0) } ?? "-",
                entry.lastFailure.map { ISO8601.string(from: $0) } ?? "-", entry.userID ?? "-",
                entry.row?.status ?? "-", entry.reason,
            ]
        }
        print(
            TextTable.render(
                header: [
                    "JOB", "TYPE", "REASON", "ATTEMPTS", "FIRST FAILURE", "LAST FAILURE", "USER", "STATUS", "WHY",
                ],
                rows: rows
            )
        )
    }
}

struct DeadShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show a job's dead letters: headers and body, with secrets redacted."
    )

    @Argument(help: "The job id.") var jobID: String
    @OptionGroup var selection: DeadSelection
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        guard let id = JobID(jobID) else { throw ValidationError("\(jobID.debugDescription) is not a UUID") }
        let entry = try await withDeadLetters(selection, connection: connection) { _, entries, _, _ in
            entries.first { $0.jobID == id }
        }
        guard let entry else { throw CommandFailure("job \(id) has no dead letter in the queues read") }
        print("job          \(id)")
        print("type         \(Terminal.safe(entry.type))")
        if let row = entry.row {
            print("status       \(row.status) (attempts \(row.attempts))")
            if let code = row.errorCode {
                print("error        \(Terminal.safe(code)): \(Terminal.safe(row.errorMessage ?? ""))")
            }
        } else {
            print("status       (no jobs row)")
        }
        if let user = entry.userID { print("user         \(Terminal.safe(user))") }
        for (number, letter) in entry.letters.enumerated() {
            print("")
            print("dead letter \(number + 1) of \(entry.letters.count), in \(letter.deadQueue)")
            print("  reason     \(Terminal.safe(letter.reasonCode)): \(Terminal.safe(letter.reason))")
            if let at = letter.failedAt { print("  failed at  \(ISO8601.string(from: at))") }
            let properties = letter.delivery.properties
            let fields: [(String, String?)] = [
                ("message-id", properties.messageID), ("correlation-id", properties.correlationID),
                ("content-type", properties.contentType), ("type", properties.type), ("app-id", properties.appID),
            ]
            for (name, value) in fields {
                if let value { print("  \(name): \(Redaction.header(name, .string(value)))") }
            }
            print("  headers:")
            for key in properties.headers.keys.sorted() {
                print("    \(Redaction.escaped(key)): \(Redaction.header(key, properties.headers[key] ?? .void))")
            }
            print("  body (\(letter.delivery.bodySize) bytes):")
            if letter.delivery.isBodyWithheld {
                print("    (larger than this tool reads; not shown)")
            } else {
                for line in Redaction.body(letter.delivery.body).split(
                    separator: "\n",
                    omittingEmptySubsequences: false
                ) {
                    print("    " + line)
                }
            }
        }
    }
}

/// How a replay of one job ended.
enum ReplayOutcome: Sendable {
    case replayed(JobID, queue: String)
    case skipped(String)
    case refused(String)
}

struct DeadReplay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Run dead jobs again: named by id, or every dead letter of --queue (with --reason, --since).",
        discussion: """
            For each job: its row goes from dead back to queued with a fresh attempt count (and \
            its delivery count cleared), and a pending operator action is recorded, in one \
            transaction; then the dead letter's body is republished to the job's queue through \
            astro.jobs and confirmed by the broker; only then is the dead letter removed and the \
            action marked done. Killed halfway, a second run finishes the job (a pending replay \
            of a job still queued is republished). A job that is no longer dead is not \
            republished, so replaying twice runs the job once. A replayed job that fails again \
            is dead-lettered again, with a new attempt count: nothing replays it by itself.
            Exit status: 0 when every job was replayed or had nothing to do, 1 otherwise.
            """
    )

    @Argument(help: "Job ids to replay (or use --queue).") var jobIDs: [String] = []
    @OptionGroup var selection: DeadSelection
    @OptionGroup var actor: OperatorOptions
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard !jobIDs.isEmpty || !selection.queues.isEmpty else {
            throw ValidationError("name the jobs to replay, or a --queue whose dead letters to replay")
        }
        for id in jobIDs where JobID(id) == nil { throw ValidationError("\(id.debugDescription) is not a UUID") }
        guard jobIDs.count <= 1000 else { throw ValidationError("at most 1000 job ids at once") }
    }

    func run() async throws {
        let (operatorName, reason) = try actor.resolved()
        let wanted = jobIDs.compactMap(JobID.init)
        let outcomes = try await withDeadLetters(selection, connection: connection) {
            reader,
            entries,
            publisher,
            pool in
            var outcomes: [ReplayOutcome] = []
            let chosen = wanted.isEmpty ? entries : entries.filter { $0.jobID.map(wanted.contains) ?? false }
            for entry in chosen {
                outcomes.append(
                    try await DeadReplayRun.replay(
                        entry,
                        reader: reader,
                        publisher: publisher,
                        pool: pool,
                        operatorName: operatorName,
                        reason: reason
                    )
                )
            }
            // Ids asked for that no dead letter holds: recorded, and said, never republished.
            let found = Set(chosen.compactMap(\.jobID))
            for id in wanted where !found.contains(id) {
                let status = try await pool.withConnection { database in
                    let status = try OperatorStore.rows([id], database: database)[id]?.status
                    _ = try OperatorStore.record(
                        "dead.replay",
                        operator: operatorName,
                        jobID: id,
                        queue: nil,
                        reason: reason,
                        outcome: "skipped",
                        detail: ["why": "no dead letter", "status": status.map { .string($0) } ?? .null],
                        database: database
                    )
                    return status
                }
                outcomes.append(.skipped("\(id): no dead letter (job \(status ?? "unknown")); nothing republished"))
            }
            return outcomes
        }
        var failed = false
        for outcome in outcomes {
            switch outcome {
            case .replayed(let id, let queue): print("replayed \(id) → \(Terminal.safe(queue))")
            case .skipped(let text): print("skipped  \(Terminal.safe(text))")
            case .refused(let text):
                failed = true
                print("refused  \(Terminal.safe(text))")
            }
        }
        if outcomes.isEmpty { print("no dead letters to replay") }
        if failed { throw ExitCode(1) }
    }
}

/// The steps of one job's replay (see `DeadReplay`'s discussion for their order and why).
enum DeadReplayRun {
    enum Decision: Sendable {
        case republish(action: Int64)
        case removeOnly(action: Int64)
        case skip(String)
        case refuse(String)
    }

    static func replay(
        _ entry: DeadEntry,
        reader: DeadLetterReader,
        publisher: AMQPPublisher,
        pool: PostgresPool,
        operatorName: String,
        reason: String?
    ) async throws -> ReplayOutcome {
        let letter = entry.letters[0]
        guard let jobID = entry.jobID else {
            return .refused("a message in \(letter.deadQueue) names no jobId: it cannot be tracked; purge it")
        }
        guard !letter.delivery.isBodyWithheld else {
            return .refused("\(jobID): its body is larger than this tool reads; not replayed")
        }
        let queue = letter.workQueue
        let body = letter.delivery.body
        let decision = try await pool.withTransaction { database -> Decision in
            let rows = try database.query(
                "SELECT status, kind, finished_at FROM jobs WHERE id = $1 FOR UPDATE",
                [jobID.uuid]
            )
            let pending = try database.query(
                """
                SELECT id FROM operator_actions
                WHERE job_id = $1 AND action = 'dead.replay' AND outcome = 'pending' ORDER BY id DESC LIMIT 1
                """,
                [jobID.uuid]
            ).first.map { try $0.decode(Int64.self, "id") }
            func record(_ outcome: String, _ detail: JSONValue) throws -> Int64 {
                try OperatorStore.record(
                    "dead.replay",
                    operator: operatorName,
                    jobID: jobID,
                    queue: queue,
                    reason: reason,
                    outcome: outcome,
                    detail: detail,
                    database: database
                )
            }
            guard let row = rows.first else {
                // Dead-lettered while the database was down: no row was ever written.
                try database.execute(
                    "INSERT INTO jobs (id, kind, status, attempts) VALUES ($1, $2, 'queued', 0) ON CONFLICT (id) DO NOTHING",
                    [jobID.uuid, queue]
                )
                return .republish(action: try record("pending", ["previousStatus": .null]))
            }
            let status = try row.decode(String.self, "status")
            let kind = try row.decode(String.self, "kind")
            if kind != queue {
                _ = try record("refused", ["why": "kind mismatch", "kind": .string(kind)])
                return .refuse("\(jobID): the dead letter came from \(queue) but the job is a \(kind)")
            }
            if status == JobStatus.dead.rawValue {
                try database.execute(
                    """
                    UPDATE jobs SET status = 'queued', attempts = 0, error = NULL, result = NULL, finished_at = NULL,
                        updated_at = now()
                    WHERE id = $1 AND status = 'dead'
                    """,
                    [jobID.uuid]
                )
                // A fresh start: the message's earlier deliveries must not count towards the limit.
                try database.execute(
                    """
                    DELETE FROM delivery_counts
                    WHERE digest = sha256(convert_to($1::text, 'UTF8') || '\\x00'::bytea || $2::bytea)
                    """,
                    [queue, body]
                )
                let died = try row.decode(Date?.self, "finished_at").map { JSONValue.string(ISO8601.string(from: $0)) }
                return .republish(
                    action: try record("pending", ["previousStatus": "dead", "previousFinishedAt": died ?? .null])
                )
            }
            if let pending {
                // An earlier replay was interrupted: still queued, its copy may never have been
                // published (publishing again is harmless: the claim runs a job once); otherwise
                // its copy ran, and only the dead letter is left to remove.
                return status == JobStatus.queued.rawValue ? .republish(action: pending) : .removeOnly(action: pending)
            }
            _ = try record("skipped", ["why": "not dead", "status": .string(status)])
            return .skip("\(jobID): job is \(status), not dead; not republished (dead letter kept)")
        }
        switch decision {
        case .skip(let text): return .skipped(text)
        case .refuse(let text): return .refused(text)
        case .removeOnly(let action):
            for copy in entry.letters { try await reader.remove(copy) }
            try await pool.withConnection { database in
                try OperatorStore.complete(
                    action,
                    jobID: jobID,
                    detail: ["copiesRemoved": .number(Double(entry.letters.count))],
                    database: database
                )
            }
            return .skipped("\(jobID): already replayed; its dead letter removed")
        case .republish(let action):
            let original = letter.delivery.properties
            var properties = MessageProperties(contentType: original.contentType ?? "application/json")
            properties.persistent = true
            properties.messageID = original.messageID
            properties.correlationID = original.correlationID
            properties.type = original.type
            properties.appID = original.appID
            // No attempt header: the replay starts from attempt 1.
            properties.headers = [BrokerNames.Header.replayAction: .int(action)]
            do {
                try await publisher.publish(
                    OutgoingMessage(
                        exchange: BrokerNames.jobsExchange,
                        routingKey: queue,
                        body: body,
                        properties: properties,
                        mandatory: true
                    ),
                    timeout: .seconds(30)
                )
            } catch {
                // The row stays queued with its action pending, the dead letter stays: run the
                // replay again once the broker takes the message.
                return .refused("\(jobID): republishing to \(queue) failed (\(error)); run the replay again")
            }
            for copy in entry.letters { try await reader.remove(copy) }
            try await pool.withConnection { database in
                try OperatorStore.complete(
                    action,
                    jobID: jobID,
                    detail: ["copiesRemoved": .number(Double(entry.letters.count))],
                    database: database
                )
            }
            return .replayed(jobID, queue: queue)
        }
    }
}

struct DeadPurge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Delete dead letters for good (asks first, unless --yes).",
        discussion: """
            Removes the selected dead letters (every dead-letter queue unless --queue, --reason, \
            --since or job ids narrow it). The jobs' rows stay as they are (dead). Recorded in \
            operator_actions, one action per queue, before anything is removed.
            """
    )

    @Argument(help: "Only these jobs' dead letters.") var jobIDs: [String] = []
    @OptionGroup var selection: DeadSelection
    @Flag(help: "Do not ask for confirmation.") var yes = false
    @OptionGroup var actor: OperatorOptions
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        for id in jobIDs where JobID(id) == nil { throw ValidationError("\(id.debugDescription) is not a UUID") }
    }

    func run() async throws {
        let (operatorName, reason) = try actor.resolved()
        let wanted = Set(jobIDs.compactMap(JobID.init))
        let yes = self.yes
        let purged = try await withDeadLetters(selection, connection: connection) { reader, entries, _, pool -> Int? in
            let chosen = wanted.isEmpty ? entries : entries.filter { $0.jobID.map(wanted.contains) ?? false }
            let letters = chosen.flatMap(\.letters)
            guard !letters.isEmpty else { return 0 }
            let byQueue = Dictionary(grouping: letters, by: \.deadQueue)
            if !yes {
                let summary = byQueue.keys.sorted().map { "\($0) (\(byQueue[$0]?.count ?? 0))" }.joined(separator: ", ")
                // The question goes to standard error, so standard output stays the command's result.
                FileHandle.standardError.write(
                    Data("Purge \(letters.count) dead letters for good from \(summary)? Type yes to confirm: ".utf8)
                )
                let answer = readLine(strippingNewline: true)
                if answer == nil { FileHandle.standardError.write(Data("\n".utf8)) }
                guard Confirmation.accepts(answer) else { return nil }
            }
            for queue in byQueue.keys.sorted() {
                let queueLetters = byQueue[queue] ?? []
                let jobs = queueLetters.compactMap(\.jobID).prefix(1000).map { JSONValue.string($0.description) }
                let action = try await pool.withConnection { database in
                    try OperatorStore.record(
                        "dead.purge",
                        operator: operatorName,
                        jobID: nil,
                        queue: queue,
                        reason: reason,
                        outcome: "pending",
                        detail: ["messages": .number(Double(queueLetters.count)), "jobIds": .array(Array(jobs))],
                        database: database
                    )
                }
                for letter in queueLetters { try await reader.remove(letter) }
                try await pool.withConnection { database in
                    try OperatorStore.complete(action, jobID: nil, detail: [:], database: database)
                }
            }
            return letters.count
        }
        guard let purged else { throw CommandFailure("not confirmed: nothing purged") }
        print("purged \(purged) dead letters")
    }
}
