import AMQP
import AstroDomain
import Billing
import Foundation
import LLMFake
import Postgres
import Schema
import StoryIllustration
import StoryService
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Issue 19: `user.delete` through the real gateway and worker processes (their own broker users
/// and database roles). The proof: a user who used every feature is deleted, and then no table
/// and no file holds any of their personal values, while the ledger audit still balances.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct UserDeletionTests {
    typealias HTTPAnswer = GatewayHarness.HTTPAnswer
    /// The schema owner's pool: it sees every table.
    let pool: PostgresPool

    init() async throws {
        pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 2),
            logger: RuntimeTestEnvironment.logger
        )
    }

    // MARK: - Helpers

    /// A story-worker with the built-in illustrator, storing under `storage`.
    /// - Parameter environment: more variables (e.g. `USER_EXPORT_MAX_BYTES`).
    static func startStoryWorker(storage: URL, environment extra: [String: String] = [:]) async throws -> ChildProcess {
        try await GatewayHarness.start(
            "story-worker",
            environment: [
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.storyWorker),
                "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .storyWorker),
                "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "warning", "MIGRATE_ON_START": "false",
                "STORY_STORAGE_ROOT": storage.path,
            ].merging(extra) { _, new in new },
            label: "deletion-story-worker"
        )
    }

    /// Six random capital letters: values no other test writes.
    static func marker() -> String {
        String((0..<6).map { _ in "ABCDEFGHJKLMNPQRSTUVWXYZ".randomElement()! })
    }

    /// Where the value occurs: `schema.table.column` of every column of a type that can hold it
    /// (text, json, arrays, bytes; dates and times compared as such), in every table of the
    /// application's schemas.
    func occurrences(of needle: String?, date: String? = nil, time: String? = nil) async throws -> [String] {
        try await pool.withConnection { database in
            let columns = try database.query(
                """
                SELECT c.table_schema, c.table_name, c.column_name, c.data_type
                FROM information_schema.columns AS c
                JOIN information_schema.tables AS t
                    ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
                WHERE c.table_schema IN ('public', 'stories')
                    AND c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'ARRAY', 'bytea',
                        'date', 'time without time zone', 'name')
                ORDER BY 1, 2, 3
                """
            )
            var found: [String] = []
            for column in columns {
                let schema = try column.decode(String.self, "table_schema")
                let table = try column.decode(String.self, "table_name")
                let name = try column.decode(String.self, "column_name")
                let type = try column.decode(String.self, "data_type")
                let target = "\"\(schema)\".\"\(table)\""
                let field = "\"\(name)\""
                let condition: String
                var parameter = needle ?? ""
                switch type {
                case "date":
                    guard let date else { continue }
                    condition = "\(field) = $1::date"
                    parameter = date
                case "time without time zone":
                    guard let time else { continue }
                    condition = "\(field) = $1::time"
                    parameter = time
                case "bytea":
                    guard needle != nil else { continue }
                    condition = "position(convert_to($1, 'UTF8') in \(field)) > 0"
                default:
                    guard needle != nil else { continue }
                    condition = "strpos(\(field)::text, $1) > 0"
                }
                let count =
                    try database.query(
                        SQL(unsafeSQL: "SELECT count(*)::int AS n FROM \(target) WHERE \(condition)"),
                        [parameter]
                    ).first?.decode(Int.self, "n") ?? 0
                if count > 0 { found.append("\(schema).\(table).\(name) (\(count))") }
            }
            return found
        }
    }

    /// Every file under `root` whose content holds one of `needles`.
    static func files(under root: URL, holding needles: [String]) -> [String] {
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { return [] }
        var found: [String] = []
        for case let url as URL in walker {
            guard let data = try? Data(contentsOf: url) else { continue }
            let text = String(decoding: data, as: UTF8.self)
            if needles.contains(where: { text.contains($0) }) { found.append(url.path) }
        }
        return found
    }

    func deletionFinished(_ user: String) async throws -> Bool {
        try await pool.withConnection { database in
            try database.query(
                "SELECT 1 FROM user_deletions WHERE user_id = $1::uuid AND finished_at IS NOT NULL",
                [user]
            ).count == 1
        }
    }

    /// The user's line of the ledger audit: (ledger_available, available, forfeited).
    func audit(_ user: String) async throws -> (ledger: Int, available: Int, forfeited: Int)? {
        try await pool.withConnection { database in
            try database.query(
                """
                SELECT ledger_available::int AS l, available::int AS a, forfeited::int AS f
                FROM credit_audit WHERE user_id = $1::uuid
                """,
                [user]
            ).first.map { (try $0.decode(Int.self, "l"), try $0.decode(Int.self, "a"), try $0.decode(Int.self, "f")) }
        }
    }

    func job(_ id: JobID) async throws -> (status: String, code: String?, result: String?)? {
        try await pool.withConnection { database in
            try database.query(
                "SELECT status, error->>'code' AS code, result::text AS result FROM jobs WHERE id = $1",
                [id.uuid]
            ).first.map {
                (
                    try $0.decode(String.self, "status"), try $0.decode(String?.self, "code"),
                    try $0.decode(String?.self, "result")
                )
            }
        }
    }

    // MARK: - The proof

    @Test func aDeletedUserLeavesNoPersonalValueInAnyTableOrFile() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: JobType.all)
        defer { Task { await publisher.close() } }
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("deletion-\(UUID())")
        try FileManager.default.createDirectory(at: storage, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: storage) }
        let workers = try await GatewayResourcesTests.startBillingAndReportWorkers()
        let storyWorker = try await Self.startStoryWorker(storage: storage)
        let gateway = try await GatewayHarness.launch(chartWorker: true, label: "deletion-gateway")
        let processes = GatewayHarness.Processes(
            processes: gateway.processes.processes + workers.processes + [storyWorker]
        )
        defer { processes.stop() }
        let base = gateway.base
        let client = GatewayJourney.Client(base: base, processes: processes)
        let (user, token) = try await GatewayHarness.register(base)
        let (bystander, bystanderToken) = try await GatewayHarness.register(base)

        // Values only this user has: a name, a place, a birth date and time, a child's name.
        let marker = Self.marker()
        let name = "Olena \(marker)"
        let place = "Zhovkva \(marker)"
        let birthDate = GatewayJourney.randomBirthDate()
        let birthTime = GatewayJourney.randomBirthTime()
        let child = "Zoryana \(marker)"

        // 1. A profile and its chart. 2. A purchase (five credits) and a report, which spends one.
        // 3. A story for a child, illustrated and read (the first reading earns an achievement).
        let used = try await GatewayJourney.useEveryFeature(
            client,
            user: user,
            token: token,
            as: .init(
                name: name,
                place: place,
                birthDate: birthDate,
                birthTime: birthTime,
                latitude: 50.05,
                longitude: 23.97,
                child: child
            )
        )
        let reportText = used.reportText
        let storyID = used.storyID
        let childID = try #require(
            try await client.call("GET", "/v1/children", token: token).json?["items"]?.arrayValue?.first?["childId"]?
                .stringValue
        )
        let achievements = try await client.call("GET", "/v1/children/\(childID)/achievements", token: token)
        #expect(
            achievements.json?["items"]?.arrayValue?.contains { $0["earnedAt"] != nil && $0["earnedAt"] != .null }
                == true,
            "\(String(describing: achievements.json))"
        )
        let folder = storage.appendingPathComponent(storyID.lowercased())
        #expect(FileManager.default.fileExists(atPath: folder.path), "the illustrations are stored")

        // A line of the report that no other user's report has (the built-in writer repeats
        // its sentences across charts; a line naming this chart's degrees is this user's).
        let otherReports = try await pool.withConnection { database in
            try database.query("SELECT report_text FROM report_purchases WHERE user_id <> $1::uuid", [user])
                .map { try $0.decode(String.self, "report_text") }
        }
        let reportLine = try #require(
            reportText.split(separator: "\n").map(String.init).first { line in
                line.count >= 30 && !line.contains("\"") && !line.contains("\\")
                    && !otherReports.contains { $0.contains(line) }
            },
            "a line of the report only this user has"
        )
        let needles = [name, place, child, reportLine]
        // The search finds them while the user exists: it can fail.
        for needle in needles {
            #expect(try await !occurrences(of: needle).isEmpty, "\(needle) is found before the deletion")
        }
        #expect(try await !occurrences(of: nil, date: birthDate, time: birthTime).isEmpty)

        // 4. The deletion.
        let deleted = try await client.call("DELETE", "/v1/me", token: token)
        let deletionJob = try GatewayResourcesTests.accepted(deleted)
        try await RuntimeTestEnvironment.eventually("the deletion finishes", timeout: .seconds(60)) {
            try await deletionFinished(user)
        }
        // The user's token is refused; a repeated DELETE answers with the first job.
        let refused = try await client.call("GET", "/v1/profiles", token: token)
        #expect(refused.status == 401 && refused.json?["code"] == "user-deleted", "\(String(describing: refused.json))")
        let again = try await client.call("DELETE", "/v1/me", token: token)
        #expect(again.status == 202 && again.json?["jobId"]?.stringValue == deletionJob)
        // Another user is untouched.
        #expect(try await client.call("GET", "/v1/profiles", token: bystanderToken).status == 200)
        try await RuntimeTestEnvironment.eventually("the illustrations are erased", timeout: .seconds(30)) {
            !FileManager.default.fileExists(atPath: folder.path)
        }

        // 5. Nothing personal is left, in any table or file.
        for needle in needles {
            let left = try await occurrences(of: needle)
            #expect(left.isEmpty, "\(needle) is still in \(left)")
        }
        let dates = try await occurrences(of: nil, date: birthDate, time: birthTime)
        #expect(dates.isEmpty, "the birth date or time is still in \(dates)")
        #expect(Self.files(under: storage, holding: needles).isEmpty)
        let byID = try await pool.withConnection { database in
            try database.query(
                """
                SELECT (SELECT count(*) FROM user_profiles WHERE user_id = $1::uuid)
                     + (SELECT count(*) FROM stories.child_profiles WHERE user_id = $1::uuid)
                     + (SELECT count(*) FROM stories.stories WHERE user_id = $1::uuid)
                     + (SELECT count(*) FROM report_purchases WHERE user_id = $1::uuid)
                     + (SELECT count(*) FROM gateway_refresh_tokens WHERE user_id = $1::uuid)
                     + (SELECT count(*) FROM gateway_jobs WHERE user_id = $1::uuid) AS n,
                    (SELECT count(*) FROM purchase_records WHERE user_id = $1::uuid)::int AS purchases
                """,
                [user]
            ).first
        }
        #expect(try byID?.decode(Int.self, "n") == 0)
        // 6. The money records stay, and the audit balances: four unspent credits forfeited.
        #expect(try byID?.decode(Int.self, "purchases") == 1)
        let line = try #require(try await audit(user))
        #expect(line.ledger == line.available && line.available == 0 && line.forfeited == 4, "\(line)")
        let unbalanced = try await pool.withConnection { database in
            try database.query(
                "SELECT count(*)::int AS n FROM credit_audit WHERE ledger_available <> available AND user_id = ANY($1::uuid[])",
                ["{\(user),\(bystander)}"]
            ).first?.decode(Int.self, "n")
        }
        #expect(unbalanced == 0)
    }

    // MARK: - Races, repeats, refusals

    /// A report being written when the deletion runs is never stored; later jobs of the user are
    /// refused with `user-deleted`; a second deletion changes nothing.
    @Test func aReportRacingTheDeletionIsNeverStoredAndLaterJobsAreRefused() async throws {
        let fake = try OpenAIFake(
            apiKey: LLMReportTests.key,
            defaultResponder: { LLMReportTests.answer($0) },
            defaultDelay: .seconds(4)
        )
        defer { fake.stop() }
        let metricsJourney = try await BusinessMetricsJourneyTests()
        let (publisher, billing, report) = try await metricsJourney.startWorkers(reportEnvironment: [
            "LLM_BASE_URL": fake.baseURL.absoluteString, "LLM_MODEL": "test-model", "LLM_API_KEY": LLMReportTests.key,
        ])
        defer { for worker in [billing, report] { worker.process.stopWaiting() } }
        try await ChildProcess.eventually("the billing-worker consumes user.delete", on: [billing.process]) {
            try await publisher.queueState(JobType.userDelete.rawValue).consumerCount > 0
        }
        let journey = try await ReportJourneyTests()
        let (user, profile) = try await journey.buyer(chart: ReportJourneyTests.chartJSON)
        let request = JobID.random()
        try await ReportJourneyTests.publishJob(
            .reportRequest,
            ReportRequest(jobID: request, userID: user, profileID: profile, area: .career, language: .en),
            with: publisher
        )
        try await RuntimeTestEnvironment.eventually("the report is being written", timeout: .seconds(30)) {
            fake.requestCount > 0
        }
        let deletion = JobID.random()
        try await ReportJourneyTests.publishJob(
            .userDelete,
            UserDeleteRequest(jobID: deletion, userID: user),
            with: publisher
        )
        try await RuntimeTestEnvironment.eventually("the deletion finishes", timeout: .seconds(30)) {
            try await deletionFinished(user.description)
        }
        let generate = ReportRequestHandler.reportJobID(for: request)
        let whenDeleted = try await job(generate)
        #expect(
            whenDeleted.map { JobStatus(rawValue: $0.status)?.isTerminal != true } ?? true,
            "the report was still being written"
        )
        try await RuntimeTestEnvironment.eventually("the report job ends", timeout: .seconds(30)) {
            try await job(generate).map { JobStatus(rawValue: $0.status)?.isTerminal == true } ?? false
        }
        let ended = try #require(try await job(generate))
        #expect(ended.status == "failed" && ended.code == UserDeletion.refusedCode, "\(ended)")
        let reports = try await pool.withConnection { database in
            try database.query("SELECT count(*)::int AS n FROM report_purchases WHERE user_id = $1", [user.uuid])
                .first?.decode(Int.self, "n")
        }
        #expect(reports == 0)

        // A later job of the user is refused, permanently, without running.
        let later = JobID.random()
        try await ReportJourneyTests.publishJob(
            .reportRequest,
            ReportRequest(jobID: later, userID: user, profileID: profile, area: .health, language: .en),
            with: publisher
        )
        try await RuntimeTestEnvironment.eventually("the later job is refused", timeout: .seconds(30)) {
            try await job(later)?.status == "failed"
        }
        #expect(try await job(later)?.code == UserDeletion.refusedCode)

        // A second deletion succeeds and changes nothing.
        let second = JobID.random()
        try await ReportJourneyTests.publishJob(
            .userDelete,
            UserDeleteRequest(jobID: second, userID: user),
            with: publisher
        )
        try await RuntimeTestEnvironment.eventually("the second deletion ends", timeout: .seconds(30)) {
            try await job(second)?.status == "succeeded"
        }
        #expect(try await job(second)?.result?.contains("\"alreadyDeleted\": true") == true)
        let line = try #require(try await audit(user.description))
        #expect(line.ledger == line.available, "\(line)")

        // The operator's way, twice: the same job id, recorded in operator_actions each time.
        let operatorURL = try await RuntimeTestEnvironment.databaseURL(as: .operator)
        for _ in 1...2 {
            let cli = try await ProcessRunner.run(
                ProcessRunner.productPath("astroctl"),
                [
                    "user", "delete", user.description, "--yes", "--wait", "--why", "asked by mail",
                    "--database-url", operatorURL,
                ],
                environment: ["ASTRO_OPERATOR": "test-operator"]
            )
            #expect(cli.status == 0, "\(cli.output)\(cli.error)")
            #expect(cli.output.contains("alreadyDeleted"), "\(cli.output)")
        }
        let operatorJob = JobID.derived(from: JobID(user.uuid), purpose: "user.delete")
        let actions = try await pool.withConnection { database in
            try database.query(
                "SELECT action, outcome, operator, reason FROM operator_actions WHERE job_id = $1 ORDER BY id",
                [operatorJob.uuid]
            ).map {
                [
                    try $0.decode(String.self, "action"), try $0.decode(String.self, "outcome"),
                    try $0.decode(String.self, "operator"), try $0.decode(String.self, "reason"),
                ]
            }
        }
        #expect(actions == Array(repeating: ["user.delete", "done", "test-operator", "asked by mail"], count: 2))
        #expect(try await job(operatorJob)?.status == "succeeded")
        await publisher.close()
    }

    /// A PUT of a profile accepted before its DELETE, whose job runs after it, does not bring the
    /// profile back: the job fails with `profile-deleted`.
    @Test func aProfileDeletedWhileItsUpdateIsQueuedStaysDeleted() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [.chartCalculate])
        defer { Task { await publisher.close() } }
        // No chart-worker yet: the update waits in its queue while the profile is deleted.
        let gateway = try await GatewayHarness.launch(label: "deletion-profile-gateway")
        var processes = gateway.processes
        defer { processes.stop() }
        let base = gateway.base
        let (user, token) = try await GatewayHarness.register(base)
        let profile = UUID()
        _ = try await pool.withConnection { database in
            try database.execute(
                """
                INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude,
                    location_name)
                VALUES ($1, $2::uuid, 'Me', '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52, 'Kyiv')
                """,
                [profile, user]
            )
        }
        let path = "\(base)/v1/profiles/\(profile.uuidString.lowercased())"
        let put = try await GatewayHarness.request(
            "PUT",
            path,
            token: token,
            body: GatewayResourcesTests.profile(["name": "Me, later"])
        )
        let job = try GatewayResourcesTests.accepted(put)
        #expect(try await GatewayHarness.request("DELETE", path, token: token).status == 204)
        let worker = try await GatewayHarness.start(
            "chart-worker",
            environment: [
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.chartWorker),
                "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .chartWorker),
                "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "warning", "MIGRATE_ON_START": "false",
            ],
            label: "deletion-chart-worker"
        )
        processes = GatewayHarness.Processes(
            processes: processes.processes + [worker]
        )
        let done = try await GatewayResourcesTests.finished(base, job, token: token) { processes.output }
        #expect(done["status"] == "failed" && done["error"]?["code"] == "profile-deleted", "\(done)")
        let left = try await pool.withConnection { database in
            try database.query("SELECT count(*)::int AS n FROM user_profiles WHERE id = $1", [profile])
                .first?.decode(Int.self, "n")
        }
        #expect(left == 0)
        #expect(try await GatewayHarness.request("GET", path, token: token).status == 404)
    }

    /// A deletion interrupted after its mark (a crash) is finished by the next job, and while it
    /// is half done the user's jobs are already refused.
    @Test func aDeletionStoppedHalfWayIsResumed() async throws {
        let ledger = try await BillingLedgerIntegrationTests()
        let (user, profile) = try await ledger.userWithProfile()
        _ = try await ledger.purchase(
            try BillingLedgerIntegrationTests.signedPurchase("com.astrosvitla.report.credit.pack5", user: user).jws,
            user: user
        )
        // Step 1 of a job that then died: the mark, nothing erased yet.
        _ = try await pool.withConnection { database in
            try database.execute(
                "INSERT INTO user_deletions (user_id, job_id) VALUES ($1, $2)",
                [user.uuid, UUID()]
            )
        }
        let handler = UserDeleteHandler(pool: ledger.pool, batchSize: 1)
        let outcome = try await ledger.run(
            handler,
            ["jobId": .string(JobID.random().description), "userId": .string(user.description)],
            type: .userDelete
        )
        #expect(outcome.status == .succeeded)
        #expect(outcome.result?["alreadyDeleted"] == false && outcome.result?["forfeitedCredits"] == 5)
        #expect(outcome.messages.map(\.routingKey) == ["user.deleted"])
        let profiles = try await pool.withConnection { database in
            try database.query("SELECT count(*)::int AS n FROM user_profiles WHERE id = $1", [profile.uuid])
                .first?.decode(Int.self, "n")
        }
        #expect(profiles == 0)
        let line = try #require(try await audit(user.description))
        #expect(line.ledger == 0 && line.available == 0 && line.forfeited == 5, "\(line)")
        // Run again: nothing more is forfeited.
        let again = try await ledger.run(
            handler,
            ["jobId": .string(JobID.random().description), "userId": .string(user.description)],
            type: .userDelete
        )
        #expect(again.result?["alreadyDeleted"] == true && again.result?["forfeitedCredits"] == 5)
        #expect(try await audit(user.description)?.forfeited == 5)
    }

    /// Draws with the built-in illustrator, then erases the story's row, as a deletion running
    /// while the picture was drawn would.
    struct ErasingIllustrator: StoryIllustrator {
        let inner: BuiltInIllustrator
        let pool: PostgresPool
        var name: String { inner.name }
        func illustrate(_ request: IllustrationRequest) async throws(IllustrationError) -> StoryImage {
            let image = try await inner.illustrate(request)
            _ = try? await pool.withConnection { database in
                try database.execute("DELETE FROM stories.stories WHERE id = $1", [request.storyID])
            }
            return image
        }
    }

    /// A picture stored after its story was erased (and after `story.erase-illustrations` ran)
    /// does not stay on disk.
    @Test func aPictureDrawnWhileItsStoryIsErasedIsRemoved() async throws {
        let stories = try await StoryHandlerTests()
        let (generated, _) = try await stories.story()
        let root = StoryHandlerTests.storageRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let storage = try IllustrationStorage(root: root)
        let handler = StoryIllustrateHandler(
            pool: pool,
            illustrator: ErasingIllustrator(inner: try BuiltInIllustrator(), pool: pool),
            storage: storage,
            logger: RuntimeTestEnvironment.logger
        )
        let request = StoryIllustrateRequest(jobID: .random(), userID: generated.userID, storyID: generated.storyID)
        // The job itself may end either way (its story is gone); what matters is the disk.
        _ = try? await stories.run(handler, request, type: .storyIllustrate, jobID: request.jobID)
        let folder = root.appendingPathComponent(generated.storyID.uuid.uuidString.lowercased())
        #expect(!FileManager.default.fileExists(atPath: folder.path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path).isEmpty)
    }

    // MARK: - Schema

    /// Every table with a `user_id` column is erased by `user.delete` or listed as kept: a table
    /// added later cannot be forgotten silently.
    @Test func everyTableWithAUserIsErasedOrKeptOnPurpose() async throws {
        let tables = try await pool.withConnection { database in
            try database.query(
                """
                SELECT CASE WHEN c.table_schema = 'public' THEN c.table_name
                    ELSE c.table_schema || '.' || c.table_name END AS name
                FROM information_schema.columns AS c
                JOIN information_schema.tables AS t
                    ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
                WHERE c.column_name = 'user_id' AND c.table_schema NOT IN ('pg_catalog', 'information_schema')
                """
            ).map { try $0.decode(String.self, "name") }
        }
        #expect(tables.count >= 10, "\(tables)")
        let covered = UserDeleteHandler.erasedTables.union(UserDeleteHandler.keptTables)
        for table in tables {
            #expect(
                covered.contains(table),
                "\(table) has a user_id column but user.delete neither erases nor keeps it"
            )
        }
        #expect(UserDeleteHandler.erasedTables.isDisjoint(with: UserDeleteHandler.keptTables))
        let statements = UserDeleteHandler.erasures.map(\.text)
        for table in UserDeleteHandler.erasedTables {
            #expect(statements.contains { $0.hasPrefix("DELETE FROM \(table) ") }, "\(table) has no erasure")
        }
    }
}
