import AstroDomain
import Foundation
import Postgres
import Schema
import Testing
import WorkerRuntime

/// Birth data and report text are not written to the logs at info level (issue 19, part 4): a
/// whole journey through the real gateway and every worker, each at `LOG_LEVEL=info` —
/// register, profile and chart, purchase, report, story illustrated and read, achievements —
/// and then no process's log holds any of the person's values.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct InfoLogPrivacyTests {
    typealias Answer = GatewayHarness.HTTPAnswer

    /// A worker at info level, with its own broker user and database role.
    static func startWorker(
        _ product: String,
        role: WorkerRole,
        broker: BrokerAccess.Service,
        extra: [String: String] = [:]
    ) async throws -> (Process, URL) {
        try GatewayHarness.start(
            product,
            environment: [
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: broker),
                "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: role),
                "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "info", "MIGRATE_ON_START": "false",
            ].merging(extra) { _, new in new },
            label: "log-privacy-\(product)"
        )
    }

    @Test func noPersonalValueReachesAnInfoLog() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: JobType.all)
        defer { Task { await publisher.close() } }
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("log-privacy-\(UUID())")
        try FileManager.default.createDirectory(at: storage, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: storage) }
        let billingRoots = BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der").path
        var started: [(Process, URL)] = []
        started.append(try await Self.startWorker("chart-worker", role: .chartWorker, broker: BrokerAccess.chartWorker))
        started.append(
            try await Self.startWorker(
                "billing-worker",
                role: .billingWorker,
                broker: BrokerAccess.billingWorker,
                extra: ["BILLING_ENVIRONMENT": "Sandbox", "BILLING_TRUSTED_ROOTS": billingRoots]
            )
        )
        started.append(
            try await Self.startWorker("report-worker", role: .reportWorker, broker: BrokerAccess.reportWorker)
        )
        started.append(
            try await Self.startWorker(
                "story-worker",
                role: .storyWorker,
                broker: BrokerAccess.storyWorker,
                extra: ["STORY_STORAGE_ROOT": storage.path]
            )
        )
        let gateway = try await GatewayHarness.launch(label: "log-privacy-gateway")
        let processes = GatewayHarness.Processes(
            processes: gateway.processes.processes + started.map(\.0),
            logs: gateway.processes.logs + started.map(\.1)
        )
        defer { processes.stop() }
        let base = gateway.base
        let client = GatewayJourney.Client(base: base, processes: processes)
        let (user, token) = try await GatewayHarness.register(base)

        let marker = UserDeletionTests.marker()
        let name = "Olena \(marker)"
        let place = "Zhovkva \(marker)"
        let birthDate = GatewayJourney.randomBirthDate()
        let birthTime = GatewayJourney.randomBirthTime()
        // Coordinates with digits no duration or id in a log line is likely to have.
        let latitude = 50.0 + Double(Int.random(in: 1000...9999)) / 10_000 + 0.00003
        let longitude = 23.0 + Double(Int.random(in: 1000...9999)) / 10_000 + 0.00007
        let child = "Zoryana \(marker)"

        let used = try await GatewayJourney.useEveryFeature(
            client,
            user: user,
            token: token,
            as: .init(
                name: name,
                place: place,
                birthDate: birthDate,
                birthTime: birthTime,
                latitude: latitude,
                longitude: longitude,
                child: child
            )
        )
        let reportText = used.reportText
        let storyID = used.storyID
        // Opening the story moves its and its child's last_opened_at (children's retention): set
        // back 400 days first, they are today's after the GET.
        let owner = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        let story = try #require(UUID(uuidString: storyID))
        func openedDaysAgo() async throws -> [Int] {
            try await owner.withConnection { database in
                try database.query(
                    """
                    SELECT (extract(epoch FROM now() - s.last_opened_at) / 86400)::int AS story,
                        (extract(epoch FROM now() - c.last_opened_at) / 86400)::int AS child
                    FROM stories.stories AS s JOIN stories.child_profiles AS c ON c.id = s.child_profile_id
                    WHERE s.id = $1
                    """,
                    [story]
                ).map { [try $0.decode(Int.self, "story"), try $0.decode(Int.self, "child")] }.first ?? []
            }
        }
        try await owner.withConnection { database in
            _ = try database.execute(
                "UPDATE stories.stories SET last_opened_at = now() - interval '400 days' WHERE id = $1",
                [story]
            )
            _ = try database.execute(
                """
                UPDATE stories.child_profiles SET last_opened_at = now() - interval '400 days'
                WHERE id = (SELECT child_profile_id FROM stories.stories WHERE id = $1)
                """,
                [story]
            )
        }
        #expect(try await openedDaysAgo() == [400, 400])
        let opened = try await client.call("GET", "/v1/stories/\(storyID)", token: token)
        #expect(opened.status == 200)
        #expect(try await openedDaysAgo() == [0, 0])
        await owner.close()
        let childID = try #require(
            try await client.call("GET", "/v1/children", token: token).json?["items"]?.arrayValue?.first?["childId"]?
                .stringValue
        )
        #expect(try await client.call("GET", "/v1/children/\(childID)/achievements", token: token).status == 200)

        // Let the last lines reach the files, then stop every process (its shutdown lines too).
        try await Task.sleep(for: .milliseconds(500))
        processes.stop()
        let logs = processes.logs.map { ($0.lastPathComponent, (try? String(contentsOf: $0, encoding: .utf8)) ?? "") }
        // The capture is real: every process wrote info lines, and the jobs were logged by id.
        for (file, text) in logs {
            #expect(text.contains("info"), "\(file) has no info line")
        }
        // The report's sentences: every one of 30 characters or more is a value of its own.
        let sentences = reportText.split(whereSeparator: { ".!?\n".contains($0) })
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.count >= 30 }
        #expect(!sentences.isEmpty, "the report has no sentence to look for: \(reportText.prefix(200))")
        var needles: [(String, String)] = [
            ("name", name), ("place", place), ("birth date", birthDate), ("birth time", birthTime),
            ("latitude", String(format: "%.5f", latitude)), ("longitude", String(format: "%.5f", longitude)),
            ("child's name", child), ("marker", marker),
        ]
        needles += sentences.prefix(20).map { ("report text", String($0)) }
        for (file, text) in logs {
            for (what, value) in needles where text.contains(value) {
                let line = text.split(separator: "\n").first { $0.contains(value) } ?? ""
                Issue.record("\(file) logs the \(what) at info level: \(line.prefix(400))")
            }
        }
    }
}
