import AMQP
import AstroDomain
import Billing
import Foundation
import Maintenance
import Postgres
import StoryService
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Issue 19, part 1: `user.export` through the real gateway and worker processes (their own
/// broker users and database roles). A user who used every feature finds their values in the
/// zip; every table of the schema that can hold a user's rows is in the export's manifest; a user
/// with nothing gets a valid zip of empty sections; a deleted user's export is refused.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct UserExportTests {
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

    /// The gateway (with a chart-worker), the billing- and report-workers and a story-worker.
    static func startStack(
        storage: URL,
        label: String
    ) async throws -> (base: String, processes: GatewayHarness.Processes) {
        let workers = try await GatewayResourcesTests.startBillingAndReportWorkers()
        let storyWorker = try await UserDeletionTests.startStoryWorker(storage: storage)
        let gateway = try await GatewayHarness.launch(chartWorker: true, label: label)
        return (
            gateway.base,
            GatewayHarness.Processes(
                processes: gateway.processes.processes + workers.processes + [storyWorker]
            )
        )
    }

    /// A GET with the raw body.
    static func download(_ url: String, token: String) async throws -> (status: Int, body: Data, type: String?) {
        var request = URLRequest(url: URL(string: url)!)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.timeoutInterval = 20
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        return (http.statusCode, data, http.value(forHTTPHeaderField: "Content-Type"))
    }

    /// Polls the download until it is no longer 409 (being built).
    static func waitForZip(_ base: String, export: String, token: String) async throws -> Data {
        var last: (status: Int, body: Data, type: String?)?
        try await RuntimeTestEnvironment.eventually("export \(export) is ready", timeout: .seconds(60)) {
            last = try await download("\(base)/v1/me/exports/\(export)", token: token)
            return last?.status == 200
        }
        #expect(last?.type == "application/zip")
        return try #require(last?.body)
    }

    /// The archive as Python's zipfile reads it, after `testzip()` checked every CRC: the entry
    /// names and `export.json` parsed; the entries are extracted under `folder`.
    static func read(_ zip: Data, into folder: URL) async throws -> (names: [String], document: JSONValue) {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("export.zip")
        try zip.write(to: file)
        let run = try await ProcessRunner.run(
            "/usr/bin/env",
            [
                "python3", "-c",
                """
                import sys, zipfile, json
                z = zipfile.ZipFile(sys.argv[1])
                assert z.testzip() is None, "bad CRC"
                z.extractall(sys.argv[2])
                print(json.dumps(z.namelist()))
                """,
                file.path, folder.appendingPathComponent("x").path,
            ]
        )
        #expect(run.status == 0, "\(run.output)\(run.error)")
        let names = try #require(try JSONValue.parse(Data(run.output.utf8)).arrayValue).compactMap(\.stringValue)
        let document = try JSONValue.parse(
            try Data(contentsOf: folder.appendingPathComponent("x/\(UserExport.documentName)"))
        )
        return (names, document)
    }

    /// Every table that can hold rows of a user: a `user_id`-like column, or reachable by foreign
    /// keys from `users` (through profiles, stories, children, purchases, …), read from the catalog.
    func tablesHoldingUsers() async throws -> Set<String> {
        try await pool.withConnection { database in
            Set(
                try database.query(
                    """
                    WITH RECURSIVE reach (oid) AS (
                        SELECT 'public.users'::regclass::oid
                        UNION
                        SELECT c.conrelid FROM pg_constraint AS c JOIN reach AS r ON c.confrelid = r.oid
                        WHERE c.contype = 'f'
                    ), named AS (
                        SELECT oid FROM reach
                        UNION
                        SELECT a.attrelid FROM pg_attribute AS a
                        WHERE a.attname LIKE '%user_id' AND a.attnum > 0 AND NOT a.attisdropped
                    )
                    SELECT CASE WHEN n.nspname = 'public' THEN c.relname ELSE n.nspname || '.' || c.relname END AS name
                    FROM named JOIN pg_class AS c ON c.oid = named.oid JOIN pg_namespace AS n ON n.oid = c.relnamespace
                    WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
                        AND n.nspname NOT LIKE 'pg_toast%'
                    """
                ).map { try $0.decode(String.self, "name") }
            )
        }
    }

    func job(_ id: JobID) async throws -> (status: String, code: String?)? {
        try await pool.withConnection { database in
            try database.query("SELECT status, error->>'code' AS code FROM jobs WHERE id = $1", [id.uuid]).first.map {
                (try $0.decode(String.self, "status"), try $0.decode(String?.self, "code"))
            }
        }
    }

    @Test func aUserWhoUsedEveryFeatureFindsTheirValuesAndEveryTableInTheExport() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: JobType.all)
        defer { Task { await publisher.close() } }
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID())")
        try FileManager.default.createDirectory(at: storage, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: storage) }
        let (base, processes) = try await Self.startStack(storage: storage, label: "export-gateway")
        defer { processes.stop() }
        let client = GatewayJourney.Client(base: base, processes: processes)
        let (user, token) = try await GatewayHarness.register(base)
        let (_, otherToken) = try await GatewayHarness.register(base)

        let marker = UserDeletionTests.marker()
        let name = "Mariia \(marker)"
        let place = "Kolomyia \(marker)"
        let birthDate = GatewayJourney.randomBirthDate()
        let child = "Bohdan \(marker)"

        // A profile and its chart, a purchase and a report, a story illustrated and read, consent.
        let used = try await GatewayJourney.useEveryFeature(
            client,
            user: user,
            token: token,
            as: .init(
                name: name,
                place: place,
                birthDate: birthDate,
                birthTime: "07:45",
                latitude: 48.53,
                longitude: 25.04,
                child: child
            )
        )
        let reportText = used.reportText
        let storyID = used.storyID.lowercased()
        let consent = try await client.call(
            "PUT",
            "/v1/consent",
            token: token,
            body: [
                "consented": true, "textVersion": "2026-11",
                "answeredAt": .string(ISO8601.string(from: Date().addingTimeInterval(-60))),
            ]
        )
        #expect(consent.status == 200, "\(String(describing: consent.json))")
        let transaction = try #require(
            try await pool.withConnection { database in
                try database.query("SELECT transaction_id FROM purchase_records WHERE user_id = $1::uuid", [user])
                    .first?.decode(String.self, "transaction_id")
            }
        )

        // The export through the gateway.
        let asked = try await client.call("POST", "/v1/me/export", token: token)
        let export = try GatewayResourcesTests.accepted(asked)
        #expect(asked.json?["downloadPath"]?.stringValue == "/v1/me/exports/\(export)")
        // The job succeeds when the zip is stored (its user.export-pack is composed in): the
        // download answers 200 at once.
        let exportJob = try await client.finished(asked, token: token)
        #expect(exportJob["result"]?["exportId"]?.stringValue == export, "\(exportJob)")
        let ready = try await Self.download("\(base)/v1/me/exports/\(export)", token: token)
        #expect(ready.status == 200, "the export job succeeded before its zip was stored: \(ready.status)")
        let zip = try await Self.waitForZip(base, export: export, token: token)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("export-read-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (names, document) = try await Self.read(zip, into: folder)
        #expect(names.first == UserExport.documentName)
        #expect(document["schemaVersion"] == 1 && document["userId"]?.stringValue == user)
        #expect(document["exportId"]?.stringValue == export)

        // Their values are there: the profile's birth data, the report's text, the transaction,
        // the child and the story's pages, the consent.
        let text = String(decoding: try Data(contentsOf: folder.appendingPathComponent("x/export.json")), as: UTF8.self)
        for value in [name, place, birthDate, "07:45", child, transaction, "2026-11", storyID] {
            #expect(text.contains(value), "export.json lacks \(value)")
        }
        let reports = document["tables"]?["report_purchases"]?.arrayValue ?? []
        #expect(reports.count == 1 && reports.first?["report_text"]?.stringValue == reportText)
        let profiles = document["tables"]?["user_profiles"]?.arrayValue ?? []
        #expect(profiles.first?["birth_date"]?.stringValue == birthDate && profiles.first?["name"]?.stringValue == name)
        #expect(document["tables"]?["birth_charts"]?.arrayValue?.count == 1)
        #expect(document["tables"]?["stories.pages"]?.arrayValue?.count == 3)
        #expect(document["tables"]?["stories.achievements"]?.arrayValue?.isEmpty == false)
        #expect(document["tables"]?["stories.story_reads"]?.arrayValue?.count == 1)
        #expect(document["tables"]?["credit_ledger"]?.arrayValue?.count ?? 0 >= 6)
        #expect(document["tables"]?["consumption_consents"]?.arrayValue?.count == 1)

        // The illustrations, byte for byte as stored.
        let pictures = names.filter { $0.hasPrefix("illustrations/\(storyID)/") }
        #expect(pictures.count == 3, "\(names)")
        for picture in pictures {
            let relative = String(picture.dropFirst(UserExport.illustrationsFolder.count))
            let stored = try Data(contentsOf: storage.appendingPathComponent(relative))
            #expect(try Data(contentsOf: folder.appendingPathComponent("x/\(picture)")) == stored, "\(picture)")
        }
        #expect(document["files"]?.arrayValue?.count == 3)

        // COMPLETENESS: every table that can hold the user's rows is in the manifest.
        let manifest = Dictionary(
            (document["manifest"]?.arrayValue ?? []).compactMap { entry -> (String, Int)? in
                guard let table = entry["table"]?.stringValue, case .number(let rows)? = entry["rows"] else {
                    return nil
                }
                return (table, Int(rows))
            },
            uniquingKeysWith: { first, _ in first }
        )
        let tables = try await tablesHoldingUsers()
        #expect(tables.count >= 20, "\(tables.sorted())")
        for table in tables.sorted() {
            #expect(manifest[table] != nil, "\(table) can hold a user's rows but is not in the export's manifest")
        }
        // The manifest counts what the sections hold, and the rows of what this user did.
        for (table, rows) in manifest {
            #expect(document["tables"]?[table]?.arrayValue?.count == rows, "\(table)")
        }
        for table in [
            "users", "user_profiles", "birth_charts", "report_purchases", "purchase_records", "purchase_credits",
            "credit_ledger", "consumption_consents", "stories.child_profiles", "stories.stories", "stories.pages",
            "stories.story_reads", "stories.achievements", "gateway_jobs", "jobs", "gateway_refresh_tokens",
        ] {
            #expect((manifest[table] ?? 0) > 0, "\(table) has none of the user's rows")
        }
        #expect(!text.contains("token_hash"), "refresh token hashes are left out")

        // Another user's token cannot get it; an unknown id is 404 too; expired is 410.
        #expect(try await Self.download("\(base)/v1/me/exports/\(export)", token: otherToken).status == 404)
        #expect(try await Self.download("\(base)/v1/me/exports/\(UUID())", token: token).status == 404)
        _ = try await pool.withConnection { database in
            try database.execute(
                "UPDATE user_exports SET expires_at = now() - interval '1 second' WHERE id = $1::uuid",
                [export]
            )
        }
        let expired = try await client.call("GET", "/v1/me/exports/\(export)", token: token)
        #expect(
            expired.status == 410 && expired.json?["code"] == "export-expired",
            "\(String(describing: expired.json))"
        )
        // The maintenance task's retention deletes it (as its own role), and the id is then unknown.
        let maintenance = PostgresPool(
            configuration: try PostgresConfiguration(
                url: try await RuntimeTestEnvironment.databaseURL(as: .maintenance)
            ),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        let summary = await MaintenanceRun(
            pool: maintenance,
            amqp: nil,
            configuration: .defaults,
            logger: RuntimeTestEnvironment.logger
        ).run(dryRun: false)
        await maintenance.close()
        #expect(summary.outcome == .completed, "\(summary.error ?? "")")
        #expect((summary.retention.deleted[.userExports] ?? 0) >= 1)
        #expect(try await Self.download("\(base)/v1/me/exports/\(export)", token: token).status == 404)

        // The operator's way writes a valid zip of the same user.
        let out = folder.appendingPathComponent("cli.zip")
        let cli = try await ProcessRunner.run(
            ProcessRunner.productPath("astroctl"),
            [
                "user", "export", user, "--out", out.path, "--why", "access request",
                "--database-url", try await RuntimeTestEnvironment.databaseURL(as: .operator),
            ],
            environment: ["ASTRO_OPERATOR": "test-operator"]
        )
        #expect(cli.status == 0, "\(cli.output)\(cli.error)")
        let (cliNames, cliDocument) = try await Self.read(
            try Data(contentsOf: out),
            into: folder.appendingPathComponent("cli")
        )
        #expect(cliNames.count == names.count && cliDocument["userId"]?.stringValue == user)
        // An existing --out is refused, nothing queued.
        let again = try await ProcessRunner.run(
            ProcessRunner.productPath("astroctl"),
            ["user", "export", user, "--out", out.path],
            environment: ["ASTRO_OPERATOR": "test-operator"]
        )
        #expect(again.status == 2, "\(again.status) \(again.error)")
        await publisher.close()
    }

    /// The path a 202 named answers 409 `export-not-ready` from the start, before any worker
    /// recorded the export (here there is none), never 404; it stays 404 for another user.
    @Test func anAcceptedExportNotYetRecordedIsNotReadyRatherThanNotFound() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [.userExport])
        defer { Task { await publisher.close() } }
        let gateway = try await GatewayHarness.launch(chartWorker: false, label: "export-pending-gateway")
        defer { gateway.processes.stop() }
        let (_, token) = try await GatewayHarness.register(gateway.base)
        let (_, otherToken) = try await GatewayHarness.register(gateway.base)
        let asked = try await GatewayHarness.request("POST", "\(gateway.base)/v1/me/export", token: token)
        let export = try GatewayResourcesTests.accepted(asked)
        let pending = try await GatewayHarness.request("GET", "\(gateway.base)/v1/me/exports/\(export)", token: token)
        #expect(pending.status == 409)
        #expect(pending.json?["code"]?.stringValue == "export-not-ready", "\(String(describing: pending.json))")
        let other = try await GatewayHarness.request(
            "GET",
            "\(gateway.base)/v1/me/exports/\(export)",
            token: otherToken
        )
        #expect(other.status == 404)
        #expect(
            try await pool.withConnection {
                try $0.query("SELECT 1 FROM user_exports WHERE id = $1", [UUID(uuidString: export)!])
            }.isEmpty
        )
        // No later test's story-worker should find this job.
        _ = try await publisher.purgeQueue(JobType.userExport.rawValue)
    }

    @Test func aUserWithNothingGetsAValidZipAndADeletedUsersExportIsRefused() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: JobType.all)
        defer { Task { await publisher.close() } }
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID())")
        try FileManager.default.createDirectory(at: storage, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: storage) }
        let (base, processes) = try await Self.startStack(storage: storage, label: "export-empty-gateway")
        defer { processes.stop() }
        let (user, token) = try await GatewayHarness.register(base)
        // The caller's event stream announces the export.
        let stream = try await GatewayEventsTests.SSEClient(base, token: token)
        defer { stream.close() }
        try await stream.waitUntilOpen()
        let asked = try await GatewayHarness.request("POST", "\(base)/v1/me/export", token: token)
        let export = try GatewayResourcesTests.accepted(asked)
        let announced = try await stream.waitFor("user.exported") { $0.type == EventType.userExported.rawValue }
        #expect(announced.data?["exportId"]?.stringValue == export, "\(String(describing: announced.data))")
        #expect(announced.data?["downloadPath"]?.stringValue == "/v1/me/exports/\(export)")
        let zip = try await Self.waitForZip(base, export: export, token: token)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("export-read-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (names, document) = try await Self.read(zip, into: folder)
        #expect(names == [UserExport.documentName])
        #expect(document["files"]?.arrayValue?.isEmpty == true)
        for table in [
            "user_profiles", "birth_charts", "report_purchases", "purchase_records", "credit_ledger",
            "stories.child_profiles", "stories.stories", "stories.pages", "stories.achievements",
            "consumption_consents",
        ] {
            #expect(document["tables"]?[table]?.arrayValue == [], "\(table)")
        }
        #expect(document["tables"]?["users"]?.arrayValue?.count == 1)

        // Deleted: the user's export job fails with user-deleted and stores nothing.
        _ = try GatewayResourcesTests.accepted(
            try await GatewayHarness.request("DELETE", "\(base)/v1/me", token: token)
        )
        try await RuntimeTestEnvironment.eventually("the deletion finishes", timeout: .seconds(60)) {
            try await pool.withConnection { database in
                try database.query(
                    "SELECT 1 FROM user_deletions WHERE user_id = $1::uuid AND finished_at IS NOT NULL",
                    [user]
                ).count == 1
            }
        }
        let refused = JobID.random()
        try await ReportJourneyTests.publishJob(
            .userExport,
            UserExportRequest(jobID: refused, userID: try #require(UserID(user))),
            with: publisher
        )
        try await RuntimeTestEnvironment.eventually("the export is refused", timeout: .seconds(30)) {
            try await job(refused)?.status == "failed"
        }
        #expect(try await job(refused)?.code == UserDeletion.refusedCode)
        let left = try await pool.withConnection { database in
            try database.query("SELECT count(*)::int AS n FROM user_exports WHERE user_id = $1::uuid", [user])
                .first?.decode(Int.self, "n")
        }
        #expect(left == 0, "the deletion erased the first export and the refused one stored nothing")
        await publisher.close()
    }

    /// Past `USER_EXPORT_MAX_BYTES` the pack fails for good with `export-too-large`: recorded on
    /// the export, the copied files dropped, no zip; a repeated pack of a packed export changes
    /// nothing; an export of another user is `unknown-export`.
    @Test func anExportOverItsBoundFailsWithExportTooLarge() async throws {
        let ledger = try await BillingLedgerIntegrationTests()
        let (user, _) = try await ledger.userWithProfile()
        func seed(_ bytes: Int) async throws -> JobID {
            let export = JobID.random()
            _ = try await pool.withConnection { database in
                try database.execute(
                    "INSERT INTO user_exports (id, user_id) VALUES ($1, $2)",
                    [export.uuid, user.uuid]
                )
                try database.execute(
                    "INSERT INTO user_export_files (export_id, path, content) VALUES ($1, 'illustrations/s/page-01.png', $2)",
                    [export.uuid, Data(repeating: 7, count: bytes)]
                )
            }
            return export
        }
        func pack(_ export: JobID, user: UserID) async throws -> JobOutcome {
            try await ledger.run(
                UserExportPackHandler(pool: pool, maxBytes: 1 << 20),
                [
                    "jobId": .string(UserExportFilesHandler.packJobID(for: export).description),
                    "userId": .string(user.description), "exportId": .string(export.description),
                ],
                type: .userExportPack
            )
        }
        let large = try await seed((1 << 20) + 1)
        let outcome = try await pack(large, user: user)
        guard case .failed(let error) = outcome.status else {
            Issue.record("the pack succeeded: \(String(describing: outcome.result))")
            return
        }
        #expect(error.code == UserExport.tooLargeCode, "\(error)")
        #expect(outcome.messages.map(\.routingKey) == ["user.export-pack.failed"])
        let state = try await pool.withConnection { database in
            try database.query(
                """
                SELECT failed_code, ready_at IS NULL AND NOT EXISTS
                        (SELECT 1 FROM user_export_chunks WHERE export_id = $1) AS empty,
                    (SELECT count(*)::int FROM user_export_files WHERE export_id = $1) AS files
                FROM user_exports WHERE id = $1
                """,
                [large.uuid]
            ).first.map {
                (
                    try $0.decode(String?.self, "failed_code"), try $0.decode(Bool.self, "empty"),
                    try $0.decode(Int.self, "files")
                )
            }
        }
        #expect(
            state?.0 == UserExport.tooLargeCode && state?.1 == true && state?.2 == 0,
            "\(String(describing: state))"
        )

        // Within the bound: packed once; again: announced unchanged.
        let small = try await seed(1_000)
        let first = try await pack(small, user: user)
        #expect(first.status == .succeeded && first.result?["alreadyPacked"] == false)
        let again = try await pack(small, user: user)
        #expect(again.status == .succeeded && again.result?["alreadyPacked"] == true)
        #expect(again.result?["bytes"] == first.result?["bytes"])
        // Another user's export id.
        await #expect(throws: JobRejection.self) { _ = try await pack(small, user: UserID(UUID())) }
    }

    // MARK: - Bounds (issue 29, F8)

    /// The user's `user.export` jobs recorded by the gateway, and the exports stored.
    func exportCounts(_ user: String) async throws -> (jobs: Int, exports: Int, chunkedExports: Int) {
        try await pool.withConnection { database in
            let row = try database.query(
                """
                SELECT (SELECT count(*)::int FROM gateway_jobs WHERE user_id = $1::uuid AND kind = 'user.export') AS jobs,
                       (SELECT count(*)::int FROM user_exports WHERE user_id = $1::uuid) AS exports,
                       (SELECT count(DISTINCT c.export_id)::int FROM user_export_chunks AS c
                        JOIN user_exports AS e ON e.id = c.export_id WHERE e.user_id = $1::uuid) AS chunked
                """,
                [user]
            ).first
            return (
                try row?.decode(Int.self, "jobs") ?? -1, try row?.decode(Int.self, "exports") ?? -1,
                try row?.decode(Int.self, "chunked") ?? -1
            )
        }
    }

    /// 30 requests at once (half with their own idempotency keys) while nothing builds exports:
    /// one job, one message, every answer naming it. Once it is done a new request makes a new
    /// export, and when that one is stored it replaces the first: one zip kept.
    @Test func thirtyRequestsMakeOneExportAndAFinishedOneReplacesTheOlder() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: JobType.all)
        defer { Task { await publisher.close() } }
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID())")
        try FileManager.default.createDirectory(at: storage, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: storage) }
        let gateway = try await GatewayHarness.launch(chartWorker: false, label: "export-cap-gateway")
        defer { gateway.processes.stop() }
        let base = gateway.base
        let (user, token) = try await GatewayHarness.register(base)

        let answers = try await withThrowingTaskGroup(of: HTTPAnswer.self) { group in
            for index in 0..<30 {
                group.addTask {
                    try await GatewayHarness.request(
                        "POST",
                        "\(base)/v1/me/export",
                        token: token,
                        headers: index.isMultiple(of: 2) ? [:] : ["Idempotency-Key": "export-\(index)"],
                        timeout: 30
                    )
                }
            }
            return try await group.reduce(into: [HTTPAnswer]()) { $0.append($1) }
        }
        let ids = try answers.map { try GatewayResourcesTests.accepted($0) }
        #expect(Set(ids).count == 1, "\(Set(ids).count) exports for 30 requests")
        let first = try #require(ids.first)
        #expect(try await exportCounts(user).jobs == 1)
        // One job, but not always one message: a request with a key that finds the export before
        // the first request's publish is confirmed and marked publishes the same job id again
        // (GatewayStore.record: a keyed job is marked only after the broker's confirm), which the
        // worker runs once; that it does is checked below (one export, one chunked export).
        let queued = try await publisher.queueState(JobType.userExport.rawValue).messageCount
        #expect((1...30).contains(queued), "\(queued) user.export messages for 30 requests")

        // The workers build it; the next request starts another, which replaces it once stored.
        let workers = try await GatewayResourcesTests.startBillingAndReportWorkers()
        let storyWorker = try await UserDeletionTests.startStoryWorker(storage: storage)
        let processes = GatewayHarness.Processes(
            processes: workers.processes + [storyWorker]
        )
        defer { processes.stop() }
        _ = try await Self.waitForZip(base, export: first, token: token)
        let counts = try await exportCounts(user)
        #expect(counts.exports == 1 && counts.chunkedExports == 1, "\(counts)")
        let second = try GatewayResourcesTests.accepted(
            try await GatewayHarness.request("POST", "\(base)/v1/me/export", token: token)
        )
        #expect(second != first)
        let zip = try await Self.waitForZip(base, export: second, token: token)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("export-read-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(try await Self.read(zip, into: folder).document["exportId"]?.stringValue == second)
        #expect(try await Self.download("\(base)/v1/me/exports/\(first)", token: token).status == 404)
        let after = try await exportCounts(user)
        #expect(after.jobs == 2 && after.exports == 1 && after.chunkedExports == 1, "\(after)")
        await publisher.close()
    }

    /// The gateway's resident memory at its peak (VmHWM), in bytes.
    static func peakMemory(of process: ChildProcess) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") })
        let kilobytes = try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
        return kilobytes * 1024
    }

    /// A 64 MiB export (packed by the real pack handler) is downloaded whole and intact, while the
    /// gateway's peak memory grows by far less than the zip: it is sent a stored chunk at a time.
    /// (Before, the download held the zip, its hex text and copies: +600 MiB for 100 MiB.)
    @Test func aLargeExportIsStreamedWithoutHoldingItInGatewayMemory() async throws {
        let gateway = try await GatewayHarness.launch(chartWorker: false, label: "export-stream-gateway")
        defer { gateway.processes.stop() }
        let (user, token) = try await GatewayHarness.register(gateway.base)
        let export = JobID.random()
        let random = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
        defer { try? random.close() }
        let files = (1...8).map { ("illustrations/s/page-\($0).png", random.readData(ofLength: 8 << 20)) }
        _ = try await pool.withTransaction { database in
            try database.execute("INSERT INTO user_exports (id, user_id) VALUES ($1, $2::uuid)", [export.uuid, user])
            for (path, content) in files {
                try database.execute(
                    "INSERT INTO user_export_files (export_id, path, content) VALUES ($1, $2, $3)",
                    [export.uuid, path, content]
                )
            }
        }
        let packed = try await BillingLedgerIntegrationTests().run(
            UserExportPackHandler(pool: pool, maxBytes: 96 << 20),
            [
                "jobId": .string(UserExportFilesHandler.packJobID(for: export).description),
                "userId": .string(user), "exportId": .string(export.description),
            ],
            type: .userExportPack
        )
        guard case .number(let size)? = packed.result?["bytes"] else {
            Issue.record("the pack stored nothing: \(String(describing: packed.result))")
            return
        }
        let bytes = Int(size)
        #expect(bytes > 64 << 20)

        let process = gateway.processes.processes[0]
        let before = try Self.peakMemory(of: process)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("export-stream-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("download.zip")
        let curl = try await ProcessRunner.run(
            "/usr/bin/env",
            [
                "curl", "-sS", "-o", file.path, "-w", "%{http_code} %{size_download}", "-H",
                "Authorization: Bearer \(token)", "\(gateway.base)/v1/me/exports/\(export)",
            ]
        )
        #expect(curl.status == 0 && curl.output == "200 \(bytes)", "\(curl.output) \(curl.error)")
        let grown = try Self.peakMemory(of: process) - before
        #expect(
            grown < 40 << 20,
            "the gateway's peak memory grew by \(grown >> 20) MiB for a \(bytes >> 20) MiB download"
        )
        let (names, _) = try await Self.read(try Data(contentsOf: file), into: folder.appendingPathComponent("read"))
        #expect(names == [UserExport.documentName] + files.map(\.0))
        for (path, content) in files {
            #expect(try Data(contentsOf: folder.appendingPathComponent("read/x/\(path)")) == content, "\(path)")
        }
    }

    /// Issue 32: an export at the largest `USER_EXPORT_MAX_BYTES` allowed (within a chunk of it)
    /// goes end to end through the real story- and billing-workers and PostgreSQL, and downloads
    /// through the gateway whole: its size is the one stored, every CRC holds, and every
    /// illustration is byte for byte (SHA-256) the file the story-worker read. Neither worker
    /// holds the export in memory (bytes travel in binary format, one file and one chunk at a
    /// time): their peak resident memory grows by far less than the export.
    @Test func anExportAtTheLargestBoundGoesThroughTheWorkersAndDownloadsIntact() async throws {
        let bound = UserExport.maxBytesRange.upperBound
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: JobType.all)
        defer { Task { await publisher.close() } }
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("export-bound-\(UUID())")
        try FileManager.default.createDirectory(at: storage, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: storage) }
        let setting = ["USER_EXPORT_MAX_BYTES": String(bound)]
        let gateway = try await GatewayHarness.launch(chartWorker: false, label: "export-bound-gateway")
        defer { gateway.processes.stop() }
        let workers = try await GatewayResourcesTests.startBillingAndReportWorkers(environment: setting)
        let storyWorker = try await UserDeletionTests.startStoryWorker(storage: storage, environment: setting)
        let processes = GatewayHarness.Processes(processes: workers.processes + [storyWorker])
        defer { processes.stop() }
        let billingWorker = workers.processes[0]
        let (user, token) = try await GatewayHarness.register(gateway.base)

        // A story of 64 illustrated pages whose files hold the bound less 256 KiB (the document
        // and the zip's headers take the rest): random bytes, which no one compresses.
        let story = UUID().uuidString.lowercased()
        let pages = 64
        let contentBytes = bound - (256 << 10)
        let random = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
        defer { try? random.close() }
        try FileManager.default.createDirectory(
            at: storage.appendingPathComponent(story),
            withIntermediateDirectories: true
        )
        for page in 1...pages {
            let size = contentBytes / pages + (page == pages ? contentBytes % pages : 0)
            try random.readData(ofLength: size).write(to: storage.appendingPathComponent("\(story)/page-\(page).bin"))
        }
        _ = try await pool.withTransaction { database in
            let child = UUID()
            try database.execute(
                "INSERT INTO stories.child_profiles (id, user_id, name, timezone) VALUES ($1, $2::uuid, 'Оля', 'Europe/Kyiv')",
                [child, user]
            )
            try database.execute(
                """
                INSERT INTO stories.stories (id, user_id, child_profile_id, title, child_name, age_group, theme,
                    main_character, language, writer, writer_version)
                VALUES ($1::uuid, $2::uuid, $3, 'The Long Book', 'Оля', 1, 'courage', 'a fox', 'en', 'built-in', 'test')
                """,
                [story, user, child]
            )
            for page in 1...pages {
                try database.execute(
                    """
                    INSERT INTO stories.pages (id, story_id, page_number, text, illustration_status, illustration_path)
                    VALUES ($1, $2::uuid, $3, 'A page.', 'generated', $4)
                    """,
                    [UUID(), story, page, "\(story)/page-\(page).bin"]
                )
            }
        }
        let storyBefore = try Self.peakMemory(of: storyWorker)
        let billingBefore = try Self.peakMemory(of: billingWorker)

        let started = ContinuousClock.now
        let export = try GatewayResourcesTests.accepted(
            try await GatewayHarness.request("POST", "\(gateway.base)/v1/me/export", token: token)
        )
        var state: (bytes: Int?, failed: String?)?
        try await RuntimeTestEnvironment.eventually(
            "the export at \(bound) bytes is stored (or fails)",
            timeout: .seconds(180)
        ) {
            state = try await pool.withConnection { database in
                try database.query("SELECT bytes, failed_code FROM user_exports WHERE id = $1::uuid", [export]).first
                    .map { (try $0.decode(Int?.self, "bytes"), try $0.decode(String?.self, "failed_code")) }
            }
            return state?.bytes != nil || state?.failed != nil
        }
        let packed = ContinuousClock.now - started
        let bytes = try #require(state?.bytes, "the export failed: \(String(describing: state?.failed))")
        #expect(
            bytes <= bound && bytes > bound - UserExport.chunkBytes,
            "the export is \(bytes) bytes, not within a chunk of the bound \(bound)"
        )
        let storyGrew = try Self.peakMemory(of: storyWorker) - storyBefore
        let billingGrew = try Self.peakMemory(of: billingWorker) - billingBefore
        #expect(storyGrew < 128 << 20, "the story-worker's peak memory grew by \(storyGrew >> 20) MiB")
        #expect(billingGrew < 128 << 20, "the billing-worker's peak memory grew by \(billingGrew >> 20) MiB")

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("export-bound-read-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("download.zip")
        let downloadStarted = ContinuousClock.now
        let curl = try await ProcessRunner.run(
            "/usr/bin/env",
            [
                "curl", "-sS", "-o", file.path, "-w", "%{http_code} %{size_download}", "-H",
                "Authorization: Bearer \(token)", "\(gateway.base)/v1/me/exports/\(export)",
            ]
        )
        let downloaded = ContinuousClock.now - downloadStarted
        #expect(curl.status == 0 && curl.output == "200 \(bytes)", "\(curl.output) \(curl.error)")
        let check = try await ProcessRunner.run(
            "/usr/bin/env",
            [
                "python3", "-c",
                """
                import sys, zipfile, hashlib, os, json
                z = zipfile.ZipFile(sys.argv[1])
                bad = z.testzip()
                assert bad is None, "bad CRC in %s" % bad
                mismatched = []
                for name in z.namelist():
                    if not name.startswith("illustrations/"):
                        continue
                    entry, stored = hashlib.sha256(), hashlib.sha256()
                    with z.open(name) as f:
                        for block in iter(lambda: f.read(1 << 20), b""):
                            entry.update(block)
                    with open(os.path.join(sys.argv[2], name[len("illustrations/"):]), "rb") as f:
                        for block in iter(lambda: f.read(1 << 20), b""):
                            stored.update(block)
                    if entry.digest() != stored.digest():
                        mismatched.append(name)
                print(json.dumps({"entries": len(z.namelist()), "mismatched": mismatched}))
                """,
                file.path, storage.path,
            ]
        )
        #expect(check.status == 0, "\(check.output)\(check.error)")
        let verdict = try JSONValue.parse(Data(check.output.utf8))
        #expect(verdict["entries"] == .number(Double(pages + 1)), "\(verdict)")
        #expect(verdict["mismatched"]?.arrayValue == [], "\(verdict)")
        print(
            "export at the bound: \(bytes) bytes packed in \(packed), downloaded in \(downloaded); peak memory grew "
                + "by \(storyGrew >> 20) MiB (story-worker, peak \((storyBefore + storyGrew) >> 20) MiB), "
                + "\(billingGrew >> 20) MiB (billing-worker, peak \((billingBefore + billingGrew) >> 20) MiB)"
        )
        await publisher.close()
    }

    /// An export whose chunks stop short of its size (deleted while being sent) ends the
    /// response before its Content-Length: the client sees a failed download, never a short zip
    /// taken for whole.
    @Test func aDownloadWhoseChunksRunOutEndsShortOfItsLength() async throws {
        let gateway = try await GatewayHarness.launch(chartWorker: false, label: "export-short-gateway")
        defer { gateway.processes.stop() }
        let (user, token) = try await GatewayHarness.register(gateway.base)
        let export = UUID()
        let chunk = Data(repeating: 0x5A, count: UserExport.chunkBytes)
        _ = try await pool.withTransaction { database in
            try database.execute("INSERT INTO user_exports (id, user_id) VALUES ($1, $2::uuid)", [export, user])
            for seq in [0, 2] {
                try database.execute(
                    "INSERT INTO user_export_chunks (export_id, seq, data) VALUES ($1, $2, $3)",
                    [export, seq, chunk]
                )
            }
            try database.execute(
                """
                UPDATE user_exports SET bytes = $2, ready_at = now(), expires_at = now() + interval '1 hour'
                WHERE id = $1
                """,
                [export, 3 * UserExport.chunkBytes]
            )
        }
        let curl = try await ProcessRunner.run(
            "/usr/bin/env",
            [
                "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", "-H",
                "Authorization: Bearer \(token)", "\(gateway.base)/v1/me/exports/\(export)",
            ]
        )
        // curl: 18, "transfer closed with outstanding read data remaining".
        #expect(curl.status == 18, "\(curl.status) \(curl.output) \(curl.error)")
        #expect(curl.output == "200 \(UserExport.chunkBytes)", "\(curl.output)")
        try await RuntimeTestEnvironment.eventually("the gateway logs the short download", timeout: .seconds(10)) {
            gateway.processes.output.contains("export download ended early")
        }
    }
}
