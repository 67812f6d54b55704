import AMQP
import AstroDomain
import Billing
import Foundation
import LLMClient
import LLMFake
import Postgres
import ReportService
import StoryIllustration
import StoryService
import Testing
import WorkerRuntime

@testable import Gateway

/// Issue 29, F1 and F2 through the real workers, broker and database, with the LLM and images
/// fakes: every paid call is metered when it is answered, whatever the job's outcome; a profile
/// whose report is being written cannot be deleted; refunds of already-paid reports are bounded;
/// the daily budget and the per-user bounds hand the work to the built-in writer or illustrator;
/// the gateway's daily quotas answer 429.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct PaidWorkTests {
    let journey: ReportJourneyTests
    var pool: PostgresPool { journey.ledger.pool }

    init() async throws {
        journey = try await ReportJourneyTests()
    }

    static let llmEnvironment: [String: String] = [
        "LLM_MODEL": "test-model", "LLM_API_KEY": LLMReportTests.key,
        "LLM_PRICE_INPUT_PER_1M_USD": "2", "LLM_PRICE_OUTPUT_PER_1M_USD": "8",
    ]

    /// The gateway's store, logged in as the gateway's own role (its grants are the point).
    func gatewayResources() async throws -> (ResourceStore, PostgresPool) {
        let gatewayPool = PostgresPool(
            configuration: try PostgresConfiguration(url: try await GatewayHarness.gatewayDatabaseURL()),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        return (ResourceStore(pool: gatewayPool), gatewayPool)
    }

    /// Another profile of `user`, with the readable chart.
    func addProfile(_ user: UserID) async throws -> ProfileID {
        let profile = ProfileID.random()
        try await pool.withTransaction { database in
            try database.execute(
                """
                INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                VALUES ($1, $2, $3, '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52)
                """,
                [profile.uuid, user.uuid, "P-\(profile.uuid.uuidString.prefix(8))"]
            )
            try database.execute(
                """
                INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                VALUES ($1, $2, $3::jsonb, 'placidus', 'test', 'test')
                """,
                [UUID(), profile.uuid, ReportJourneyTests.chartJSON]
            )
        }
        return profile
    }

    /// The user's paid calls as recorded: calls, tokens, cost.
    func paidCalls(_ user: UserID, purpose: String) async throws -> (calls: Int, tokens: Int, cost: Double) {
        try await pool.withConnection { database in
            let row = try database.query(
                """
                SELECT count(*)::int AS calls, coalesce(sum(prompt_tokens + completion_tokens), 0)::int AS tokens,
                    coalesce(sum(cost_usd), 0)::float8 AS cost
                FROM paid_calls WHERE user_id = $1 AND purpose = $2
                """,
                [user.uuid, purpose]
            ).first
            return (
                try row?.decode(Int.self, "calls") ?? 0, try row?.decode(Int.self, "tokens") ?? 0,
                try row?.decode(Double.self, "cost") ?? 0
            )
        }
    }

    func requestReport(_ user: UserID, _ profile: ProfileID, _ workers: ReportJourneyTests.Workers) async throws {
        try await ReportJourneyTests.publishJob(
            .reportRequest,
            ReportRequest(jobID: .random(), userID: user, profileID: profile, area: .career, language: .en),
            with: workers.publisher
        )
    }

    /// F1: while the LLM writes, the gateway refuses to delete the profile (409
    /// report-in-progress); once the report is stored it deletes it. The answer's tokens are in
    /// `paid_calls` as the report stored them.
    @Test func aProfileWhoseReportIsBeingWrittenIsNotDeleted() async throws {
        let fake = try LLMReportTests.fake()
        defer { fake.stop() }
        fake.enqueue(.delayed(seconds: 4, content: LLMReportTests.answers[.en]!))
        let workers = try await journey.startWorkers(
            reportEnvironment: Self.llmEnvironment.merging(["LLM_BASE_URL": fake.baseURL.absoluteString]) { $1 }
        )
        let (resources, gatewayPool) = try await gatewayResources()
        do {
            let (user, profile) = try await journey.buyer(chart: ReportJourneyTests.chartJSON)
            try await requestReport(user, profile, workers)
            try await RuntimeTestEnvironment.eventually("the LLM is writing", timeout: .seconds(30)) {
                fake.requestCount == 1
            }
            #expect(try await resources.deleteProfile(profile, user: user) == .reportInProgress)
            #expect(try await resources.deleteProfile(ProfileID.random(), user: user) == .notFound)
            try await RuntimeTestEnvironment.eventually("the report is stored", timeout: .seconds(30)) {
                try await pool.withConnection { database in
                    try !database.query("SELECT 1 FROM report_purchases WHERE profile_id = $1", [profile.uuid]).isEmpty
                }
            }
            let stored = try await pool.withConnection { database in
                try database.query(
                    "SELECT (prompt_tokens + completion_tokens)::int AS tokens FROM report_purchases WHERE profile_id = $1",
                    [profile.uuid]
                ).first?.decode(Int.self, "tokens")
            }
            let metered = try await paidCalls(user, purpose: "report")
            #expect(metered.calls == 1 && metered.tokens == stored && metered.cost > 0)
            #expect(try await resources.deleteProfile(profile, user: user) == .deleted)
            #expect(try await journey.ledger.balance(user).balanced)
        } catch {
            await gatewayPool.close()
            await workers.stop()
            throw error
        }
        await gatewayPool.close()
        await workers.stop()
    }

    /// F1's attack, with the delete forced past the gateway (as an erasure or a race could):
    /// one credit, a new profile per cycle, the profile deleted while the LLM writes. Every
    /// answered call is metered although no report is stored; the first paid refund is given,
    /// the second is withheld (and says so in the ledger), so the credit is gone and the third
    /// and fourth cycles make no LLM call.
    @Test func failingPaidReportsOnPurposeBuysAtMostOneRefundADay() async throws {
        let fake = try LLMReportTests.fake()
        defer { fake.stop() }
        fake.enqueue(.delayed(seconds: 3, content: LLMReportTests.answers[.en]!), count: 4)
        let workers = try await journey.startWorkers(
            reportEnvironment: Self.llmEnvironment.merging(["LLM_BASE_URL": fake.baseURL.absoluteString]) { $1 }
        )
        do {
            let (user, _) = try await journey.buyer(chart: ReportJourneyTests.chartJSON)
            for cycle in 1...4 {
                let profile = try await addProfile(user)
                let callsBefore = fake.requestCount
                try await requestReport(user, profile, workers)
                if cycle <= 2 {
                    try await RuntimeTestEnvironment.eventually(
                        "cycle \(cycle): the LLM is writing",
                        timeout: .seconds(30)
                    ) {
                        fake.requestCount == callsBefore + 1
                    }
                    _ = try await pool.withConnection { database in
                        try database.execute("DELETE FROM user_profiles WHERE id = $1", [profile.uuid])
                    }
                    try await RuntimeTestEnvironment.eventually(
                        "cycle \(cycle): the refund is decided",
                        timeout: .seconds(30)
                    ) {
                        try await pool.withConnection { database in
                            try !database.query(
                                """
                                SELECT 1 FROM credit_ledger WHERE user_id = $1 AND profile_id = $2
                                    AND entry IN ('refunded', 'refund-withheld')
                                """,
                                [user.uuid, profile.uuid]
                            ).isEmpty
                        }
                    }
                } else {
                    try await RuntimeTestEnvironment.eventually("cycle \(cycle): refused", timeout: .seconds(30)) {
                        try await pool.withConnection { database in
                            try !database.query(
                                "SELECT 1 FROM jobs WHERE kind = 'report.request' AND user_id = $1 AND status = 'failed'",
                                [user.uuid]
                            ).isEmpty
                        }
                    }
                }
            }
            let balance = try await journey.ledger.balance(user)
            let entries = try await pool.withConnection { database in
                try database.query(
                    "SELECT entry FROM credit_ledger WHERE user_id = $1 ORDER BY id",
                    [user.uuid]
                ).map { try $0.decode(String.self, "entry") }
            }
            let metered = try await paidCalls(user, purpose: "report")
            #expect(fake.requestCount == 2, "LLM calls made: \(fake.requestCount)")
            #expect(metered.calls == 2 && metered.tokens > 0, "metered: \(metered)")
            #expect(balance.available == 0 && balance.balanced, "\(balance)")
            #expect(entries == ["issued", "consumed", "refunded", "consumed", "refund-withheld"], "\(entries)")
        } catch {
            await workers.stop()
            throw error
        }
        await workers.stop()
    }

    /// F2: with the day's LLM budget at 0 the built-in writer writes the report, and no call
    /// reaches the LLM.
    @Test func pastTheDailyBudgetTheBuiltInWriterWritesAndNoCallIsMade() async throws {
        let fake = try LLMReportTests.fake()
        defer { fake.stop() }
        let workers = try await journey.startWorkers(
            reportEnvironment: Self.llmEnvironment.merging([
                "LLM_BASE_URL": fake.baseURL.absoluteString, "LLM_DAILY_BUDGET_USD": "0",
            ]) { $1 }
        )
        do {
            let (user, profile) = try await journey.buyer(chart: ReportJourneyTests.chartJSON)
            try await requestReport(user, profile, workers)
            try await RuntimeTestEnvironment.eventually("the report is stored", timeout: .seconds(30)) {
                try await pool.withConnection { database in
                    try !database.query("SELECT 1 FROM report_purchases WHERE profile_id = $1", [profile.uuid]).isEmpty
                }
            }
            let writer = try await pool.withConnection { database in
                try database.query("SELECT writer FROM report_purchases WHERE profile_id = $1", [profile.uuid]).first?
                    .decode(String.self, "writer")
            }
            #expect(writer == "built-in")
            #expect(fake.requestCount == 0)
            #expect(try await paidCalls(user, purpose: "report").calls == 0)
        } catch {
            await workers.stop()
            throw error
        }
        await workers.stop()
    }
}

extension PaidWorkTests {
    /// F2 in the handler: with the images budget spent, a paid picture is drawn by the fallback
    /// (the built-in illustrator) and no call reaches the images API; a handler without a
    /// fallback fails the page `paid-call-refused` instead of paying.
    @Test func aRefusedPictureIsDrawnBuiltInOrNotAtAll() async throws {
        let stories = try await StoryHandlerTests()
        let images = try OpenAIImagesFake(apiKey: "sk-images-test")
        defer { images.stop() }
        let root = StoryHandlerTests.storageRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let paid = ImageAPIIllustrator(
            client: ImageClient(
                configuration: try ImageConfiguration(
                    baseURL: images.baseURL,
                    model: "fake-image-model",
                    apiKey: "sk-images-test",
                    size: "512x512"
                )
            )
        )
        let ledger = PaidCallLedger(
            limits: PaidCallLimits(dailyBudgetUSD: [.llm: 50, .images: 0]),
            pool: stories.pool,
            metrics: WorkerMetrics(),
            logger: RuntimeTestEnvironment.logger
        )
        for fallback in [try BuiltInIllustrator() as (any StoryIllustrator)?, nil] {
            let (generated, _) = try await stories.story(pages: 3)
            let handler = StoryIllustrateHandler(
                pool: stories.pool,
                illustrator: paid,
                storage: try IllustrationStorage(root: root),
                logger: RuntimeTestEnvironment.logger,
                pricePerImageUSD: 0.04,
                paidCalls: ledger,
                fallback: fallback
            )
            let request = StoryIllustrateRequest(jobID: .random(), userID: generated.userID, storyID: generated.storyID)
            let outcome = try await stories.run(handler, request, type: .storyIllustrate, jobID: request.jobID)
            let states = try await stories.pool.withConnection { database in
                try database.query(
                    "SELECT illustration_status, illustrator FROM stories.pages WHERE story_id = $1 ORDER BY page_number",
                    [generated.storyID.uuid]
                ).map {
                    try
                        "\($0.decode(String.self, "illustration_status")):\($0.decode(String?.self, "illustrator") ?? "")"
                }
            }
            if fallback != nil {
                #expect(outcome.status == .succeeded)
                #expect(states == Array(repeating: "generated:built-in", count: 3))
            } else {
                #expect(outcome.status != .succeeded)
                #expect(
                    outcome.result?["failedPages"]?.arrayValue?.allSatisfy { $0["code"] == "paid-call-refused" } == true
                )
                #expect(states.allSatisfy { $0.hasPrefix("failed") })
            }
        }
        #expect(images.requestCount == 0)
    }
}

extension GatewayStoriesTests {
    /// F2 through the gateway and a story-worker drawing with the images fake: the user's third
    /// story of the day and the redraw past the day's redraw quota are answered 429 with their
    /// codes and Retry-After; past the user's daily pictures the built-in illustrator draws, so
    /// a story.illustrate published straight to the broker (as astroctl could) makes no image
    /// call either. Every picture drawn is in paid_calls, priced.
    @Test func dailyQuotasAndThePerUserPictureBoundStopPaidWork() async throws {
        let images = try OpenAIImagesFake()
        defer { images.stop() }
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("paid-work-\(UUID())")
        try FileManager.default.createDirectory(at: storage, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: storage) }
        let (worker, publisher) = try await startStoryWorker(
            images: images,
            storage: storage,
            environment: ["IMAGE_PRICE_PER_IMAGE_USD": "0.04", "IMAGE_CALLS_PER_USER_DAY": "12"]
        )
        defer { worker.stopWaiting() }
        let running = try await GatewayHarness.launch(
            environment: [
                "STORY_STORAGE_ROOT": storage.path, "STORY_GENERATIONS_PER_DAY": "2",
                "ILLUSTRATION_REDRAWS_PER_DAY": "18",
            ],
            label: "gateway-paid-work"
        )
        let processes = GatewayHarness.Processes(
            processes: running.processes.processes + [worker]
        )
        defer { processes.stop() }
        let base = running.base
        let (user, token) = try await GatewayHarness.register(base)
        let storyBody: JSONValue = [
            "childName": "Mia", "ageGroup": 1, "theme": "courage", "mainCharacter": "Felix the Fox", "language": "en",
            "pageCount": 9,
        ]
        var stories: [String] = []
        for _ in 1...2 {
            let posted = try await request("POST", "\(base)/v1/stories", token: token, body: storyBody)
            #expect(posted.status == 202, "\(String(describing: posted.json))")
            let job = try #require(posted.json?["jobId"]?.stringValue)
            #expect(
                try await finished(base, job: job, token: token, processes: processes).json?["status"] == "succeeded"
            )
            stories.append(try #require(posted.json?["storyId"]?.stringValue))
        }
        let third = try await request("POST", "\(base)/v1/stories", token: token, body: storyBody)
        #expect(
            third.status == 429 && third.json?["code"] == "story-quota-exceeded",
            "\(String(describing: third.json))"
        )
        #expect(Int(third.headers["retry-after"] ?? "") ?? 0 > 0)

        // Four forced redraws of 9 pages: the quota (18 pages) takes two; the worker's bound
        // (12 pictures a day) draws 12 through the images API and the rest built-in.
        let redraw: JSONValue = ["pages": .array((1...9).map { .number(Double($0)) }), "force": true]
        var accepted = 0
        var refused: [HTTPAnswer] = []
        for _ in 1...4 {
            let answer = try await request(
                "POST",
                "\(base)/v1/stories/\(stories[0])/illustrations",
                token: token,
                body: redraw
            )
            if answer.status == 202 {
                accepted += 1
                _ = try await finished(
                    base,
                    job: try #require(answer.json?["jobId"]?.stringValue),
                    token: token,
                    processes: processes
                )
            } else {
                refused.append(answer)
            }
        }
        #expect(accepted == 2)
        #expect(
            refused.count == 2 && refused.allSatisfy { $0.status == 429 && $0.json?["code"] == "redraw-quota-exceeded" }
        )
        #expect(images.requestCount == 12, "image calls: \(images.requestCount)")

        // Straight to the broker, past the gateway: the worker's bound still holds.
        let second = stories[1]
        try await ReportJourneyTests.publishJob(
            .storyIllustrate,
            StoryIllustrateRequest(
                jobID: .random(),
                userID: UserID(try #require(UUID(uuidString: user))),
                storyID: StoryID(try #require(UUID(uuidString: stories[1]))),
                pages: Array(1...9),
                force: true
            ),
            with: publisher
        )
        try await RuntimeTestEnvironment.eventually("the published redraw is drawn", timeout: .seconds(60)) {
            try await pool.withConnection { database in
                try database.query(
                    """
                    SELECT count(*)::int AS n FROM stories.pages
                    WHERE story_id = $1::uuid AND illustration_status = 'generated' AND illustrator = 'built-in'
                    """,
                    [second]
                ).first?.decode(Int.self, "n") == 9
            }
        }
        #expect(images.requestCount == 12)
        let metered = try await pool.withConnection { database in
            try database.query(
                """
                SELECT count(*)::int AS calls, coalesce(sum(cost_usd), 0)::text AS cost FROM paid_calls
                WHERE user_id = $1::uuid AND purpose = 'illustration'
                """,
                [user]
            ).first.map { (try $0.decode(Int.self, "calls"), try $0.decode(String.self, "cost")) }
        }
        #expect(metered?.0 == 12 && metered.flatMap { Decimal(string: $0.1) } == Decimal(string: "0.48"))
        await publisher.close()
    }
}
