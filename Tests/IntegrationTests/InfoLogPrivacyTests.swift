import AstroDomain
import Foundation
import LLMFake
import Postgres
import Schema
import Stories
import TestProcesses
import Testing
import WorkerRuntime

/// Birth data and report text are not written to the logs at info level (issue 19, part 4): a
/// whole journey through the real gateway and every worker, each at `LOG_LEVEL=info` —
/// register, profile and chart, purchase, report, story illustrated and read, achievements —
/// then invalid and failing inputs (issue 29, F15: a nonexistent local time, a duplicate
/// profile name, an unknown zone, bad story requests, an LLM that refuses the request quoting
/// it), and then no process's log holds any of the person's values.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct InfoLogPrivacyTests {
    typealias Answer = GatewayHarness.HTTPAnswer

    /// A worker at info level, with its own broker user and database role.
    static func startWorker(
        _ product: String,
        role: WorkerRole,
        broker: BrokerAccess.Service,
        extra: [String: String] = [:]
    ) async throws -> ChildProcess {
        try await GatewayHarness.start(
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
        var started: [ChildProcess] = []
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
        let marker = UserDeletionTests.marker()
        let name = "Olena \(marker)"
        let place = "Zhovkva \(marker)"
        let birthDate = GatewayJourney.randomBirthDate()
        let birthTime = GatewayJourney.randomBirthTime()
        // Coordinates with digits no duration or id in a log line is likely to have.
        let latitude = 50.0 + Double(Int.random(in: 1000...9999)) / 10_000 + 0.00003
        let longitude = 23.0 + Double(Int.random(in: 1000...9999)) / 10_000 + 0.00007
        let child = "Zoryana \(marker)"
        // The story-worker writes through an LLM (the fake answers with the built-in story for the
        // journey's request), so that an LLM failure can be scripted afterwards.
        let written = try BuiltInStoryWriter().write(
            StoryRequestDetails(
                childName: child,
                ageGroup: .elementary,
                theme: "courage",
                mainCharacter: "Felix the Fox",
                language: .en,
                pageCount: 3
            )
        )
        let storyAnswer = String(
            decoding: try JSONSerialization.data(
                withJSONObject: ["title": written.title, "pages": written.pages],
                options: [.sortedKeys]
            ),
            as: UTF8.self
        )
        let llm = try OpenAIFake(apiKey: LLMReportTests.key, defaultResponder: { _ in storyAnswer })
        defer { llm.stop() }
        started.append(
            try await Self.startWorker(
                "story-worker",
                role: .storyWorker,
                broker: BrokerAccess.storyWorker,
                extra: [
                    "STORY_STORAGE_ROOT": storage.path, "LLM_BASE_URL": llm.baseURL.absoluteString,
                    "LLM_MODEL": "test-model", "LLM_API_KEY": LLMReportTests.key,
                ]
            )
        )
        let gateway = try await GatewayHarness.launch(label: "log-privacy-gateway")
        let processes = GatewayHarness.Processes(
            processes: gateway.processes.processes + started
        )
        defer { processes.stop() }
        let base = gateway.base
        let client = GatewayJourney.Client(base: base, processes: processes)
        let (user, token) = try await GatewayHarness.register(base)

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
        #expect(llm.requestCount > 0, "the story was not written through the LLM")

        let refused = try await Self.sendInvalidAndFailingInputs(
            client,
            token: token,
            name: name,
            marker: marker,
            llm: llm
        )

        // Let the last lines reach the files, then stop every process (its shutdown lines too).
        try await Task.sleep(for: .milliseconds(500))
        processes.stop()
        let logs = processes.processes.map { ($0.log.lastPathComponent, $0.output) }
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
        needles += refused
        // (The figure the report quotes: how many values were searched for.)
        print("InfoLogPrivacyTests: \(needles.count) personal values searched in \(logs.count) logs")
        for (file, text) in logs {
            for (what, value) in needles where text.contains(value) {
                let line = text.split(separator: "\n").first { $0.contains(value) } ?? ""
                Issue.record("\(file) logs the \(what) at info level: \(line.prefix(400))")
            }
        }
    }

    /// The last Sunday of March of `year`, when Kyiv's clocks go from 03:00 to 04:00: a date
    /// whose 03:mm never happened there.
    static func springForward(_ year: Int) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let last = calendar.date(from: DateComponents(year: year, month: 3, day: 31))!
        let weekday = calendar.component(.weekday, from: last)  // 1 = Sunday
        let day = 31 - (weekday - 1)
        return String(format: "%04d-03-%02d", year, day)
    }

    /// Inputs the gateway or a worker refuses, and a job whose LLM call fails: each carries
    /// values of its own, returned as needles for the log search. Each refusal is checked to
    /// have happened (its code), so that the search looks at the logs of real failures.
    static func sendInvalidAndFailingInputs(
        _ client: GatewayJourney.Client,
        token: String,
        name: String,
        marker: String,
        llm: OpenAIFake
    ) async throws -> [(String, String)] {
        var needles: [(String, String)] = []
        func profile(_ fields: [String: JSONValue]) async throws -> Answer {
            var profile: [String: JSONValue] = [
                "name": .string("Taras \(marker)"), "birthDate": "1987-06-15", "birthTime": "12:00",
                "timezone": "Europe/Kyiv", "latitude": 49.1, "longitude": 24.1, "locationName": "Lviv",
            ]
            profile.merge(fields) { _, new in new }
            return try await client.call("POST", "/v1/profiles", token: token, body: ["profile": .object(profile)])
        }
        // The job's error code once it ended, or the gateway's when it refused the request.
        func outcome(_ answer: Answer) async throws -> String? {
            guard answer.status == 202 else {
                // Refused before publishing: 422 for the input, 409 for a taken name.
                #expect([409, 422].contains(answer.status), "\(answer.status) \(String(describing: answer.json))")
                return answer.json?["code"]?.stringValue
            }
            let job = try GatewayResourcesTests.accepted(answer)
            let done = try await GatewayResourcesTests.finished(client.base, job, token: token) {
                client.processes.output
            }
            #expect(done["status"] != "succeeded", "\(done)")
            return done["error"]?["code"]?.stringValue
        }

        // A local time that never happened (the clocks went forward past it): from 1997 Kyiv's
        // clocks jump from 03:00 to 04:00 (in March 1996 still from 02:00 to 03:00, tzdata).
        let gapDate = springForward(Int.random(in: 1997...2021))
        let gapTime = "03:\(Int.random(in: 10...59))"
        let gapName = "Bohdan \(marker)"
        let gapPlace = "Sokal \(marker)"
        let gap = try await outcome(
            try await profile([
                "name": .string(gapName), "birthDate": .string(gapDate), "birthTime": .string(gapTime),
                "locationName": .string(gapPlace),
            ])
        )
        #expect(gap == "nonexistent-local-time", "\(String(describing: gap))")
        needles += [
            ("name (DST gap)", gapName), ("place (DST gap)", gapPlace), ("birth date (DST gap)", gapDate),
            ("birth date and time (DST gap)", "\(gapDate) \(gapTime)"),
        ]

        // A second profile under the name the journey's profile has.
        let duplicate = try await outcome(try await profile(["name": .string(name), "birthDate": "1988-02-03"]))
        #expect(duplicate == "duplicate-profile-name", "\(String(describing: duplicate))")

        // A zone no database knows.
        let zone = "Europe/Atlantis" + String((0..<6).map { _ in "qwxzjk".randomElement()! })
        let unknown = try await outcome(
            try await profile(["name": .string("Mykola \(marker)"), "timezone": .string(zone)])
        )
        #expect(unknown == "unknown-timezone", "\(String(describing: unknown))")
        needles += [("time zone", zone), ("name (unknown zone)", "Mykola \(marker)")]

        // Story requests that cannot be written: an age group there is not, too many pages.
        let storyChild = "Ostap \(marker)"
        let storyHero = "Hedgehog \(marker)"
        for bad: [String: JSONValue] in [["ageGroup": 7], ["pageCount": 99]] {
            var body: [String: JSONValue] = [
                "childName": .string(storyChild), "ageGroup": 1, "theme": "courage",
                "mainCharacter": .string(storyHero), "language": "en", "pageCount": 3,
            ]
            body.merge(bad) { _, new in new }
            let code = try await outcome(
                try await client.call("POST", "/v1/stories", token: token, body: .object(body))
            )
            #expect(code != nil, "\(bad)")
        }
        needles += [("child's name (bad story)", storyChild), ("main character (bad story)", storyHero)]

        // An LLM that refuses the request and quotes it (providers' 400s do), as a story is written.
        let failingChild = "Marichka \(marker)"
        llm.enqueue(
            .badRequest(message: "Invalid 'messages[1].content': the story for \(failingChild) is not allowed")
        )
        let failed = try await outcome(
            try await client.call(
                "POST",
                "/v1/stories",
                token: token,
                body: [
                    "childName": .string(failingChild), "ageGroup": 1, "theme": "courage",
                    "mainCharacter": "Felix the Fox", "language": "en", "pageCount": 3,
                ]
            )
        )
        #expect(failed == "llm-bad-request", "\(String(describing: failed))")
        #expect(llm.pendingScripted.isEmpty, "the failing LLM answer was not used")
        needles.append(("child's name (LLM failure)", failingChild))
        return needles
    }
}
