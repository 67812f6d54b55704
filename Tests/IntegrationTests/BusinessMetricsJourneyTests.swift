import AMQP
import AstroDomain
import Billing
import Foundation
import Stories
import TestProcesses
import Testing
import WorkerRuntime

@testable import StoryService

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Issue 17: after a small paid journey through real billing-worker and report-worker processes,
/// their `/metrics` show the business counters with exactly the journey's figures — counted once
/// per committed fact, never for a duplicate delivery or a refused purchase's credits.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct BusinessMetricsJourneyTests {
    let ledger: BillingLedgerIntegrationTests

    init() async throws {
        ledger = try await BillingLedgerIntegrationTests()
    }

    /// A worker process and its health port.
    struct WorkerProcess {
        var process: ChildProcess
        var port: Int
    }

    /// Starts the billing-worker and the report-worker on the contract's (emptied) queues, each as
    /// its own broker user and database role, with a health port of its own.
    func startWorkers(
        reportEnvironment: [String: String] = [:]
    ) async throws -> (AMQPPublisher, billing: WorkerProcess, report: WorkerProcess) {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(
            purging: JobType.all.filter { $0 != .chartCalculate }
        )
        // Earlier suites may leave report.generate jobs in the outbox that their stopped
        // billing-workers never relayed; this suite's relay would hand them over, and the
        // report-worker's counters would include their failures. Counted here: this suite's jobs.
        _ = try await ledger.pool.withConnection { database in
            try database.execute(
                "UPDATE outbox SET sent_at = now() WHERE sent_at IS NULL AND routing_key = $1",
                [JobType.reportGenerate.rawValue]
            )
        }
        var started: [WorkerProcess] = []
        for worker in ["billing-worker", "report-worker"] {
            let billing = worker == "billing-worker"
            let process = try await ChildProcess.product(
                worker,
                environment: [
                    "AMQP_URL": try RuntimeTestEnvironment.amqpURL(
                        as: billing ? BrokerAccess.billingWorker : BrokerAccess.reportWorker
                    ),
                    "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(
                        as: billing ? .billingWorker : .reportWorker
                    ),
                    // Any free health port, which the worker logs at info.
                    "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "info", "MIGRATE_ON_START": "false",
                    "BILLING_ENVIRONMENT": "Sandbox",
                    "BILLING_TRUSTED_ROOTS": BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der")
                        .path,
                    "LEDGER_AUDIT_INTERVAL_SECONDS": "10",
                ].merging(billing ? [:] : reportEnvironment) { _, new in new },
                label: "metrics-\(worker)"
            )
            // (Should this throw, `process` and `started` are released: ChildProcess kills them.)
            started.append(WorkerProcess(process: process, port: try await process.healthPort()))
        }
        try await RuntimeTestEnvironment.eventually(
            "both workers consume (logs \(started.map(\.process.log.path)))",
            timeout: .seconds(60)
        ) {
            let generate = try await publisher.queueState(JobType.reportGenerate.rawValue).consumerCount
            let request = try await publisher.queueState(JobType.reportRequest.rawValue).consumerCount
            return generate > 0 && request > 0
        }
        return (publisher, started[0], started[1])
    }

    /// A worker's `/metrics` text.
    static func metrics(_ worker: WorkerProcess) async throws -> String {
        let url = try #require(URL(string: "http://127.0.0.1:\(worker.port)/metrics"))
        let (data, _) = try await URLSession.shared.data(from: url)
        return String(decoding: data, as: UTF8.self)
    }

    /// The value of `name{labels}` in a text exposition (nil when the series is absent).
    static func value(_ name: String, _ labels: String = "", in text: String) -> Double? {
        let prefix = labels.isEmpty ? "\(name) " : "\(name){\(labels)} "
        return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count)) }
    }

    @Test func thePaidJourneyShowsInTheWorkersBusinessCounters() async throws {
        let (publisher, billing, report) = try await startWorkers()
        defer { for worker in [billing, report] { worker.process.stopWaiting() } }
        // One profile with a chart (its report is written), one whose chart cannot be read (its
        // credit comes back).
        let (user, profile, broken) = try await ReportJourneyTests.userWithReadableAndBrokenChart(ledger)
        func publish(_ type: JobType, _ body: some Encodable) async throws {
            try await ReportJourneyTests.publishJob(type, body, with: publisher)
        }
        // A pack of five credits, its transaction sent twice (the second grants nothing), and a
        // purchase of a product the catalog does not sell (refused).
        let (jws, _) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack5",
            user: user
        )
        for _ in 1...2 {
            try await publish(
                .billingVerifyPurchase,
                VerifyPurchaseRequest(jobID: .random(), userID: user, signedTransaction: jws)
            )
        }
        let (unknown, _) = try BillingLedgerIntegrationTests.signedPurchase("com.example.not-for-sale", user: user)
        try await publish(
            .billingVerifyPurchase,
            VerifyPurchaseRequest(jobID: .random(), userID: user, signedTransaction: unknown)
        )
        try await RuntimeTestEnvironment.eventually(
            "the verified purchase issues the user 5 credits (credits available)",
            timeout: .seconds(30),
            observe: { try await ledger.balance(user).available },
            until: { $0 == 5 }
        )
        for target in [profile, broken] {
            try await publish(
                .reportRequest,
                ReportRequest(jobID: .random(), userID: user, profileID: target, area: .career, language: .en)
            )
        }
        try await RuntimeTestEnvironment.eventually("one report written, one credit refunded", timeout: .seconds(30)) {
            let text = try await Self.metrics(billing)
            return Self.value("astro_credits_refunded_total", #"area="career""#, in: text) == 1
                && Self.value("astro_purchases_rejected_total", #"reason="unknown-product""#, in: text) == 1
        }

        let billingText = try await Self.metrics(billing)
        #expect(Self.value("astro_purchases_verified_total", in: billingText) == 1)
        #expect(Self.value("astro_credits_issued_total", #"area="any""#, in: billingText) == 5)
        #expect(Self.value("astro_purchases_rejected_total", #"reason="unknown-product""#, in: billingText) == 1)
        #expect(Self.value("astro_credits_consumed_total", #"area="career""#, in: billingText) == 2)
        #expect(Self.value("astro_credits_refunded_total", #"area="career""#, in: billingText) == 1)
        #expect(Self.value("astro_credits_revoked_total", in: billingText) == nil)
        // The billing-worker's probes: the audit finds the ledger balanced, the outbox drained.
        try await RuntimeTestEnvironment.eventually("the ledger audit ran", timeout: .seconds(20)) {
            Self.value("astro_ledger_unbalanced_users", in: try await Self.metrics(billing)) != nil
        }
        let probed = try await Self.metrics(billing)
        #expect(Self.value("astro_ledger_unbalanced_users", in: probed) == 0)
        #expect((Self.value("astro_outbox_oldest_unsent_age_seconds", in: probed) ?? -1) >= 0)
        // Readiness is refreshed every 2 s: the gauge follows it.
        try await RuntimeTestEnvironment.eventually("the billing-worker reports ready", timeout: .seconds(10)) {
            Self.value("astro_worker_ready", in: try await Self.metrics(billing)) == 1
        }

        let reportText = try await Self.metrics(report)
        #expect(
            Self.value("astro_reports_total", #"area="career",language="en",writer="built-in""#, in: reportText) == 1
        )
        // The built-in writer spends no tokens.
        #expect(Self.value("astro_llm_cost_usd_total", #"purpose="report""#, in: reportText) == nil)
        #expect(Self.value("astro_jobs_total", #"queue="report.generate",outcome="failed""#, in: reportText) == 1)
        await publisher.close()
    }

    /// An LLM-written report: the report-worker's token and cost counters equal what it stored
    /// with the report (prompt and completion tokens, cost at the configured prices).
    @Test func anLLMReportsTokensAndCostAreCountedAsStored() async throws {
        let fake = try LLMReportTests.fake()
        let (publisher, billing, report) = try await startWorkers(reportEnvironment: [
            "LLM_BASE_URL": fake.baseURL.absoluteString, "LLM_MODEL": "test-model", "LLM_API_KEY": LLMReportTests.key,
            "LLM_PRICE_INPUT_PER_1M_USD": "2.5", "LLM_PRICE_OUTPUT_PER_1M_USD": "10",
        ])
        defer { for worker in [billing, report] { worker.process.stopWaiting() } }
        let journey = try await ReportJourneyTests()
        let (user, profile) = try await journey.buyer(chart: ReportJourneyTests.chartJSON)
        try await ReportJourneyTests.publishJob(
            .reportRequest,
            ReportRequest(jobID: .random(), userID: user, profileID: profile, area: .health, language: .uk),
            with: publisher
        )
        try await RuntimeTestEnvironment.eventually("the report is counted", timeout: .seconds(30)) {
            let text = try await Self.metrics(report)
            return Self.value("astro_reports_total", #"area="health",language="uk",writer="llm""#, in: text) == 1
        }
        let row = try #require(
            try await journey.ledger.pool.withConnection { database in
                try database.query(
                    """
                    SELECT prompt_tokens, completion_tokens, cost_usd::float8 AS cost
                    FROM report_purchases WHERE profile_id = $1
                    """,
                    [profile.uuid]
                ).first
            }
        )
        let text = try await Self.metrics(report)
        let prompt = try row.decode(Int.self, "prompt_tokens")
        let completion = try row.decode(Int.self, "completion_tokens")
        #expect(prompt > 0 && completion > 0)
        #expect(Self.value("astro_llm_tokens_total", #"purpose="report",kind="prompt""#, in: text) == Double(prompt))
        #expect(
            Self.value("astro_llm_tokens_total", #"purpose="report",kind="completion""#, in: text) == Double(completion)
        )
        let cost = try #require(Self.value("astro_llm_cost_usd_total", #"purpose="report""#, in: text))
        #expect(abs(cost - (try row.decode(Double.self, "cost"))) < 1e-6)
        #expect(cost > 0)
        await publisher.close()
    }

    /// Pictures are priced per picture when they are drawn (`PaidCallLedger`), and only the
    /// images API's; the job's own measurements count pages and pictures (no server needed).
    @Test func storiesCountTheirPagesAndPicturesAndPriceOnlyTheImagesAPI() {
        let story = WrittenStory(title: "t", pages: ["a", "b", "c"], writer: "llm:m", version: "1")
        let written = StoryMeasurements.written(story, language: .uk)
        #expect(written.map(\.metric) == [.stories, .storyPages])
        #expect(written[0].labelValues == ["uk", "llm"] && written[1].amount == 3)
        let drawn = StoryMeasurements.illustrated(pages: 2, illustrator: "images:gpt-image-1")
        #expect(drawn.map(\.metric) == [.storyIllustrations])
        #expect(drawn[0].labelValues == ["images-api"] && drawn[0].amount == 2)
        let picture = PaidCallLedger.measurements(
            PaidCallUsage(
                purpose: .illustration,
                model: "images:gpt-image-1",
                images: 1,
                costUSD: Decimal(string: "0.04")!
            )
        )
        #expect(picture.map(\.metric) == [.paidCalls, .imageCost])
        #expect(picture[0].labelValues == ["images", "illustration"] && abs(picture[1].amount - 0.04) < 1e-12)
        #expect(StoryMeasurements.illustrated(pages: 0, illustrator: "built-in").isEmpty)
    }
}
