import AMQP
import AstroDomain
import Billing
import Foundation
import LLMClient
import LLMFake
import Postgres
import ReportService
import Reports
import Testing
import WorkerRuntime

/// Reports written through an OpenAI-compatible endpoint (a local fake that behaves like one,
/// errors included): the answer checks, retries, usage and cost, and the refund when the LLM
/// fails for good — in process and through a real report-worker process.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct LLMReportTests {
    static let key = "sk-test-\(UUID().uuidString)"
    static let chart: NatalChart = try! JSONCoding.decoder.decode(
        NatalChart.self,
        from: Data(ReportJourneyTests.chartJSON.utf8)
    )
    /// Well-formed answers in each language (what a good model returns).
    static let answers: [ReportLanguage: String] = Dictionary(
        uniqueKeysWithValues: ReportLanguage.allCases.map {
            ($0, ReportJourneyTests.writer.write(chart: chart, area: .career, language: $0).text)
        }
    )

    /// Answers in the language the prompt asks for.
    static func answer(_ messages: [ChatMessage]) -> String {
        messages.contains { $0.content.contains("українською") } ? answers[.uk]! : answers[.en]!
    }

    static func fake() throws -> OpenAIFake {
        try OpenAIFake(apiKey: key, defaultResponder: { answer($0) })
    }

    static func writer(_ fake: OpenAIFake, attempts: Int = 3) throws -> LLMReportWriter {
        var configuration = try LLMConfiguration(
            baseURL: fake.baseURL,
            model: "test-model",
            apiKey: key,
            requestTimeout: .seconds(5),
            retryPolicy: .init(maxAttempts: attempts, baseDelay: .milliseconds(50), maxDelay: .milliseconds(200))
        )
        configuration.retryPolicy.deadline = .seconds(20)
        return try LLMReportWriter(
            client: LLMClient(configuration: configuration),
            model: "test-model",
            pricing: LLMPricing(inputPerMillionUSD: 2, outputPerMillionUSD: 8)
        )
    }

    @Test(arguments: ReportLanguage.allCases)
    func aGoodAnswerIsTheReportWithItsCost(language: ReportLanguage) async throws {
        let fake = try Self.fake()
        let (report, usage) = try await Self.writer(fake).write(chart: Self.chart, area: .career, language: language)
        #expect(report.text == Self.answers[language])
        #expect(report.writer == "llm:test-model")
        #expect(report.version == "prompts-\(language.rawValue)-v1")
        #expect(usage.promptTokens > 100 && usage.completionTokens > 100)
        #expect(usage.costUSD == (Decimal(usage.promptTokens) * 2 + Decimal(usage.completionTokens) * 8) / 1_000_000)
        #expect(fake.requestCount == 1)
        // The prompt is the system persona and the user message, in the asked language.
        let messages = fake.lastRequestMessages
        #expect(messages.map(\.role) == ["system", "user"])
        #expect(messages.last?.content.contains(language == .en ? "in English" : "українською") == true)
    }

    @Test func aTruncatedAnswerIsAskedForAgainOnceThenFails() async throws {
        let fake = try Self.fake()
        fake.enqueue(.truncated(content: "The Sun"))
        let (report, _) = try await Self.writer(fake).write(chart: Self.chart, area: .career, language: .en)
        #expect(report.text == Self.answers[.en])
        #expect(fake.requestCount == 2)

        fake.enqueue(.truncated(content: "The Sun"), count: 2)
        do {
            _ = try await Self.writer(fake).write(chart: Self.chart, area: .career, language: .en)
            Issue.record("accepted a truncated answer")
        } catch let error as ReportWriterError {
            #expect(error.code == "llm-rejected-answer" && error.isPermanent)
        }
    }

    @Test func anAnswerInTheWrongLanguageIsRejected() async throws {
        let fake = try Self.fake()
        fake.enqueue(.success(content: Self.answers[.en]!), count: 2)
        do {
            _ = try await Self.writer(fake).write(chart: Self.chart, area: .career, language: .uk)
            Issue.record("accepted an English answer to a Ukrainian request")
        } catch let error as ReportWriterError {
            #expect(error.code == "llm-rejected-answer")
        }
        #expect(fake.requestCount == 2)
    }

    @Test func rateLimitsAndOutagesAreRetriedAndAWrongKeyIsNot() async throws {
        let fake = try Self.fake()
        fake.enqueue(.rateLimited(retryAfter: 1))
        fake.enqueue(.serverError(status: 503))
        let (report, _) = try await Self.writer(fake).write(chart: Self.chart, area: .career, language: .en)
        #expect(report.text == Self.answers[.en])
        #expect(fake.requestCount == 3)

        // Exactly as many failures as the writer has attempts: a left-over would answer the next call.
        fake.enqueue(.serverError(status: 500), count: 2)
        do {
            _ = try await Self.writer(fake, attempts: 2).write(chart: Self.chart, area: .career, language: .en)
            Issue.record("an outage did not fail")
        } catch let error as ReportWriterError {
            #expect(!error.isPermanent)
        }
        #expect(fake.requestCount == 5)
        fake.enqueue(.unauthorized)
        do {
            _ = try await Self.writer(fake).write(chart: Self.chart, area: .career, language: .en)
            Issue.record("a rejected key did not fail")
        } catch let error as ReportWriterError {
            #expect(error.isPermanent)
            #expect(error.code == "llm-unauthorized")
        }
    }

    @Test func aPermanentlyFailingLLMRefundsTheCreditThroughTheWorkers() async throws {
        let fake = try Self.fake()
        let journey = try await ReportJourneyTests()
        let workers = try await journey.startWorkers(reportEnvironment: [
            "LLM_BASE_URL": fake.baseURL.absoluteString, "LLM_MODEL": "test-model", "LLM_API_KEY": "sk-wrong",
        ])
        let (user, profile) = try await journey.buyer(chart: ReportJourneyTests.chartJSON)
        let failures = try await RuntimeTestEnvironment.eventQueue(
            publisher: workers.publisher,
            routingKey: "report.failed"
        )
        let jobID = JobID.random()
        try await workers.publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.jobsExchange,
                routingKey: JobType.reportRequest.rawValue,
                body: try JSONCoding.encoder.encode(
                    ReportRequest(jobID: jobID, userID: user, profileID: profile, area: .career, language: .uk)
                ),
                properties: MessageProperties(contentType: "application/json"),
                mandatory: true
            )
        )
        // scripts/test-under-load.sh --fail-on-purpose sets ASTRO_TEST_FAIL_ON_PURPOSE to a file:
        // the test then waits, with the workers running, for a second refund that never comes, and
        // writes the time it gave up into that file, to show that a failing test ends alone, soon,
        // and leaves no process behind.
        let failOnPurpose = ProcessInfo.processInfo.environment["ASTRO_TEST_FAIL_ON_PURPOSE"] ?? ""
        let refunds = failOnPurpose.isEmpty ? 1 : 2
        do {
            try await RuntimeTestEnvironment.eventually(
                "\(refunds) refund(s) of the credit",
                timeout: .seconds(30),
                observe: { try await journey.ledger.balance(user) },
                until: { $0.refunded == refunds }
            )
        } catch {
            if !failOnPurpose.isEmpty {
                try? "\(Int(Date().timeIntervalSince1970))\n".write(
                    toFile: failOnPurpose,
                    atomically: true,
                    encoding: .utf8
                )
            }
            throw error
        }
        let balance = try await journey.ledger.balance(user)
        #expect(balance.available == 1 && balance.consumed == 1 && balance.balanced)
        // 401 is permanent: one call, no retries, and the failure is announced with its code.
        #expect(fake.requestCount == 1)
        let failed = try await RuntimeTestEnvironment.drain(failures, count: 1)
        #expect(failed.count == 1)
        let event = try failed.first.map { try JSONSerialization.jsonObject(with: $0.body) as? [String: Any] } ?? nil
        #expect(event?["jobId"] as? String == ReportRequestHandler.reportJobID(for: jobID).description)
        #expect(event?["requestJobId"] as? String == jobID.description)
        #expect((event?["error"] as? [String: Any])?["code"] as? String == "llm-unauthorized")
        #expect(
            try await journey.ledger.pool.withConnection { database in
                try database.query("SELECT 1 FROM report_purchases WHERE profile_id = $1", [profile.uuid]).isEmpty
            }
        )
        await workers.stop()
    }

    @Test func aReportWrittenByTheLLMIsStoredWithItsUsage() async throws {
        let fake = try Self.fake()
        let journey = try await ReportJourneyTests()
        let workers = try await journey.startWorkers(reportEnvironment: [
            "LLM_BASE_URL": fake.baseURL.absoluteString, "LLM_MODEL": "test-model", "LLM_API_KEY": Self.key,
            "LLM_PRICE_INPUT_PER_1M_USD": "2.5", "LLM_PRICE_OUTPUT_PER_1M_USD": "10",
        ])
        let (user, profile) = try await journey.buyer(chart: ReportJourneyTests.chartJSON)
        try await workers.publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.jobsExchange,
                routingKey: JobType.reportRequest.rawValue,
                body: try JSONCoding.encoder.encode(
                    ReportRequest(jobID: .random(), userID: user, profileID: profile, area: .career, language: .en)
                ),
                properties: MessageProperties(contentType: "application/json"),
                mandatory: true
            )
        )
        try await RuntimeTestEnvironment.eventually("the report is stored", timeout: .seconds(30)) {
            try await journey.ledger.pool.withConnection { database in
                try !database.query("SELECT 1 FROM report_purchases WHERE profile_id = $1", [profile.uuid]).isEmpty
            }
        }
        let row = try await journey.ledger.pool.withConnection { database in
            try database.query(
                """
                SELECT writer, llm_model, prompt_tokens, completion_tokens, cost_usd::text AS cost
                FROM report_purchases WHERE profile_id = $1
                """,
                [profile.uuid]
            ).first
        }
        #expect(try row?.decode(String.self, "writer") == "llm:test-model")
        #expect(try (row?.decode(Int.self, "prompt_tokens") ?? 0) > 100)
        #expect(try (row?.decode(Int.self, "completion_tokens") ?? 0) > 100)
        #expect(try Decimal(string: row?.decode(String.self, "cost") ?? "0")! > 0)
        await workers.stop()
    }

    /// A report.generate naming a credit that is not spent on its request (forged, or refunded
    /// meanwhile) costs no tokens: the job fails `credit-not-held` without calling the LLM.
    @Test func aJobWhoseCreditIsNotHeldSpendsNoTokens() async throws {
        let fake = try Self.fake()
        let journey = try await ReportJourneyTests()
        let (user, profile) = try await journey.buyer(chart: ReportJourneyTests.chartJSON)
        let credit = try await journey.ledger.pool.withConnection { database in
            try database.query("SELECT id, transaction_id FROM purchase_credits WHERE user_id = $1", [user.uuid]).first!
        }
        let request = ReportGenerateRequest(
            jobID: .random(),
            userID: user,
            profileID: profile,
            area: .career,
            language: .en,
            creditID: CreditID(try credit.decode(UUID.self, "id")),
            transactionID: try credit.decode(String.self, "transaction_id"),
            requestJobID: .random()
        )
        let handler = ReportGenerateHandler(
            writer: ReportJourneyTests.writer,
            llm: .init(writer: try Self.writer(fake), pool: journey.ledger.pool)
        )
        let job = JobEnvelope(jobID: request.jobID, type: .reportGenerate, body: try JSONCoding.encoder.encode(request))
        let prepared = try await handler.prepare(job)
        let outcome = try await journey.ledger.pool.withTransaction { database in
            try handler.commit(prepared, job: job, database: database)
        }
        #expect(fake.requestCount == 0, "the LLM was asked \(fake.requestCount) times")
        guard case .failed(let error) = outcome.status else {
            Issue.record("the job did not fail: \(outcome.status)")
            return
        }
        #expect(error.code == "credit-not-held")
        #expect(!outcome.messages.contains { $0.routingKey == JobType.billingRefundCredit.rawValue })
        #expect(try await journey.ledger.balance(user).available == 1)
    }
}
