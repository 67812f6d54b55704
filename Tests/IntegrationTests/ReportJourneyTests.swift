import AMQP
import AstroDomain
import Billing
import Foundation
import Postgres
import ReportService
import Reports
import Schema
import StoreKitVerification
import TestProcesses
import Testing
import WorkerRuntime

/// The paid journey: a verified purchase, report.request spending the credit, report.generate
/// writing the report; and a report that cannot be written giving the credit back.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ReportJourneyTests {
    static let chartJSON: String = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("ReportsTests/Fixtures/kyiv-1990-10-07.json")
        return try! String(contentsOf: url, encoding: .utf8)
    }()
    static let writer = try! BuiltInReportWriter()

    let ledger: BillingLedgerIntegrationTests

    init() async throws {
        ledger = try await BillingLedgerIntegrationTests()
    }

    /// A user with one profile whose stored chart is `chart` and one credit of `product`.
    func buyer(
        chart: String,
        product: String = "com.astrosvitla.report.credit.single"
    ) async throws -> (
        UserID, ProfileID
    ) {
        let (user, profile) = try await ledger.userWithProfile(chart: false)
        _ = try await ledger.pool.withConnection { database in
            try database.execute(
                """
                INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                VALUES ($1, $2, $3::jsonb, 'placidus', 'test', 'test')
                """,
                [UUID(), profile.uuid, chart]
            )
        }
        _ = try await ledger.purchase(
            try BillingLedgerIntegrationTests.signedPurchase(product, user: user).jws,
            user: user
        )
        return (user, profile)
    }

    /// report.request run through its handler; returns the report.generate job it queued.
    func spend(
        _ user: UserID,
        _ profile: ProfileID,
        _ area: ReportArea,
        _ language: ReportLanguage
    ) async throws
        -> JSONValue
    {
        let outcome = try await ledger.request(user, profile, area, language)
        let message = try #require(outcome.messages.first { $0.routingKey == "report.generate" })
        return try JSONDecoder().decode(JSONValue.self, from: message.body)
    }

    @Test func aSpentCreditBecomesAStoredReport() async throws {
        let (user, profile) = try await buyer(chart: Self.chartJSON)
        let generate = try await spend(user, profile, .career, .uk)
        let handler = ReportGenerateHandler(writer: Self.writer)
        let outcome = try await ledger.run(handler, generate, type: .reportGenerate)
        #expect(outcome.status == .succeeded)
        #expect(outcome.messages.map(\.routingKey) == ["report.completed"])
        let row = try await ledger.pool.withConnection { database in
            try database.query(
                "SELECT report_text, word_count, price::text AS price, writer, prompt_version FROM report_purchases WHERE profile_id = $1",
                [profile.uuid]
            ).first
        }
        let text = try #require(try row?.decode(String.self, "report_text"))
        #expect(text.contains("Ключові впливи"))
        #expect(BuiltInReportWriter.wordRange.contains(try #require(try row?.decode(Int.self, "word_count"))))
        #expect(try row?.decode(String.self, "price") == "4.99")
        #expect(try row?.decode(String.self, "prompt_version").hasPrefix("kb-uk-") == true)
        // A second delivery of the same job writes nothing new.
        let again = try await ledger.run(handler, generate, type: .reportGenerate)
        #expect(again.result?["alreadyWritten"] == true)
        let reports = try await ledger.pool.withConnection { database in
            try database.query("SELECT count(*)::int AS n FROM report_purchases WHERE profile_id = $1", [profile.uuid])
                .first?.decode(Int.self, "n")
        }
        #expect(reports == 1)
        #expect(try await ledger.balance(user).consumed == 1)
    }

    /// Issue 14: report.generate names a credit; a job whose credit says otherwise (another
    /// profile, area, language or user) is dead-lettered, writes nothing and refunds nothing.
    @Test func aForgedReportJobIsRefused() async throws {
        let (user, profile) = try await buyer(chart: Self.chartJSON)
        let (_, otherProfile) = try await buyer(chart: Self.chartJSON)
        let genuine = try await spend(user, profile, .career, .en)
        guard case .object(let fields) = genuine else { return }
        let handler = ReportGenerateHandler(writer: Self.writer)
        let forgeries: [[String: JSONValue]] = [
            ["profileId": .string(otherProfile.description)], ["area": "health"], ["language": "uk"],
            ["userId": .string(UserID.random().description)], ["transactionId": "2000000000000001"],
            ["creditId": .string(UUID().uuidString.lowercased())],
        ]
        for change in forgeries {
            var forged = fields.merging(change) { _, new in new }
            forged["jobId"] = .string(JobID.random().description)
            do {
                _ = try await ledger.run(handler, .object(forged), type: .reportGenerate)
                Issue.record("a forged report.generate was written: \(change)")
            } catch let rejection as JobRejection {
                #expect(["credit-mismatch", "credit-not-found"].contains(rejection.code))
                let envelope = JobEnvelope(
                    jobID: .random(),
                    type: .reportGenerate,
                    body: try JSONCoding.encoder.encode(JSONValue.object(forged))
                )
                #expect(handler.compensation(for: envelope, error: rejection.jobError).isEmpty)
            }
        }
        let reports = try await ledger.pool.withConnection { database in
            try database.query(
                "SELECT count(*)::int AS n FROM report_purchases WHERE profile_id = ANY(ARRAY[$1, $2]::uuid[])",
                [profile.uuid, otherProfile.uuid]
            ).first?.decode(Int.self, "n")
        }
        #expect(reports == 0)
        // The genuine job is still written.
        #expect(try await ledger.run(handler, genuine, type: .reportGenerate).status == .succeeded)
    }

    @Test func aReportThatCannotBeWrittenRefundsItsCredit() async throws {
        let (user, profile) = try await buyer(chart: "{}")
        let generate = try await spend(user, profile, .health, .en)
        let handler = ReportGenerateHandler(writer: Self.writer)
        let outcome = try await ledger.run(handler, generate, type: .reportGenerate)
        guard case .failed(let error) = outcome.status else {
            Issue.record("wrote a report from an unreadable chart")
            return
        }
        #expect(error.code == "chart-unreadable")
        #expect(outcome.messages.map(\.routingKey) == ["billing.refund-credit", "report.failed"])
        // The refund, run through the billing handler, makes the credit available again.
        let refund = try JSONDecoder().decode(JSONValue.self, from: outcome.messages[0].body)
        let refunded = try await ledger.run(RefundCreditHandler(), refund, type: .billingRefundCredit)
        #expect(refunded.messages.map(\.routingKey) == ["billing.credit-refunded"])
        let balance = try await ledger.balance(user)
        #expect(balance.available == 1 && balance.refunded == 1 && balance.balanced)
        // A job dead-lettered after its retries is compensated the same way.
        let envelope = JobEnvelope(
            jobID: .random(),
            type: .reportGenerate,
            body: try JSONCoding.encoder.encode(generate)
        )
        let compensation = handler.compensation(for: envelope, error: JobError(code: "retries-exhausted", message: "x"))
        #expect(compensation.map(\.routingKey) == ["billing.refund-credit"])
    }

    /// A billing-worker and a report-worker process on the contract's (emptied) queues.
    final class Workers: Sendable {
        let publisher: AMQPPublisher
        /// Killed when released unstopped (`ChildProcess`): a test that throws before `stop()`
        /// leaves none running.
        let processes: [ChildProcess]
        let databaseURL: String
        init(publisher: AMQPPublisher, processes: [ChildProcess], databaseURL: String) {
            self.publisher = publisher
            self.processes = processes
            self.databaseURL = databaseURL
        }
        /// What the workers logged, each log headed by its path.
        var output: String { GatewayHarness.Processes(processes: processes).output }
        func stop() async {
            for process in processes { process.send(SIGTERM) }
            for process in processes { await process.stop() }
            await publisher.close()
        }
    }

    /// - Parameter environment: extra settings of both workers (the trace test's OTLP endpoint).
    func startWorkers(
        reportEnvironment: [String: String] = [:],
        environment: [String: String] = [:]
    ) async throws -> Workers {
        let database = try await RuntimeTestEnvironment.database()
        let databaseURL =
            "postgres://\(database.user):\(database.password ?? "")@\(database.host):\(database.port)/\(database.database)"
        let publisher = try await RuntimeTestEnvironment.contractPublisher(
            purging: JobType.all.filter { $0 != .chartCalculate }
        )
        var processes: [ChildProcess] = []
        for worker in ["billing-worker", "report-worker"] {
            // Each worker runs as its own least-privilege role, as deployed.
            let role: WorkerRole = worker == "billing-worker" ? .billingWorker : .reportWorker
            processes.append(
                try await ChildProcess.product(
                    worker,
                    environment: [
                        "AMQP_URL": try RuntimeTestEnvironment.amqpURL(
                            as: worker == "billing-worker" ? BrokerAccess.billingWorker : BrokerAccess.reportWorker
                        ),
                        "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: role),
                        "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "warning",
                        "MIGRATE_ON_START": "false", "BILLING_ENVIRONMENT": "Sandbox",
                        "BILLING_TRUSTED_ROOTS": BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der")
                            .path,
                    ].merging(environment) { _, new in new }
                        .merging(worker == "report-worker" ? reportEnvironment : [:]) { _, new in new },
                    label: "journey-\(worker)"
                )
            )
        }
        let workers = Workers(publisher: publisher, processes: processes, databaseURL: databaseURL)
        do {
            try await RuntimeTestEnvironment.eventually("both workers consume", timeout: .seconds(60)) {
                let generate = try await publisher.queueState(JobType.reportGenerate.rawValue).consumerCount
                let request = try await publisher.queueState(JobType.reportRequest.rawValue).consumerCount
                return generate > 0 && request > 0
            }
        } catch {
            await workers.stop()
            throw TestFailure("\(error)\n\(workers.output.suffix(6_000))")
        }
        return workers
    }

    @Test func astroctlRequestsWaitsAndShowsTheReport() async throws {
        let workers = try await startWorkers()
        let (user, profile) = try await buyer(chart: Self.chartJSON)
        let environment = [
            "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.client),
            "DATABASE_URL": workers.databaseURL,
        ]
        let astroctl = ProcessRunner.productPath("astroctl")
        let arguments = [
            "report", "request", "--user", user.description, "--profile", profile.description, "--area", "general",
            "--language", "en", "--wait", "--timeout", "60",
        ]
        let done = try await ProcessRunner.run(astroctl, arguments, environment: environment)
        #expect(done.status == 0, "\(done.error)")
        #expect(done.output.contains("Key influences") && done.output.contains("Practical recommendations"))
        let reportID = try #require(
            try await ledger.pool.withConnection { database in
                try database.query("SELECT id FROM report_purchases WHERE profile_id = $1", [profile.uuid]).first?
                    .decode(UUID.self, "id")
            }
        )
        let shown = try await ProcessRunner.run(
            astroctl,
            ["report", "show", reportID.uuidString.lowercased()],
            environment: environment
        )
        #expect(shown.status == 0, "\(shown.error)")
        #expect(shown.output.contains("general/en"))
        // The only credit is spent: another report is refused, with the reason.
        var other = arguments
        other[other.firstIndex(of: "general")!] = "career"
        let refused = try await ProcessRunner.run(astroctl, other, environment: environment)
        #expect(refused.status == 1)
        #expect(refused.error.contains("insufficient-credits"))
        await workers.stop()
    }

    @Test func astroctlPreviewWritesOffline() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("chart-\(UUID()).json")
        try Data(Self.chartJSON.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let astroctl = ProcessRunner.productPath("astroctl")
        let preview = try await ProcessRunner.run(
            astroctl,
            ["report", "preview", "--chart", file.path, "--area", "finances", "--language", "uk"]
        )
        #expect(preview.status == 0, "\(preview.error)")
        #expect(preview.output.contains("Ключові впливи"))
        let bad = try await ProcessRunner.run(
            astroctl,
            ["report", "preview", "--chart", "/nonexistent", "--area", "career"]
        )
        #expect(bad.status != 0)
        #expect(bad.error.contains("--chart"))
    }

    @Test func theWholeJourneyThroughTheWorkers() async throws {
        let workers = try await startWorkers()
        let publisher = workers.publisher
        // One good report, one whose chart cannot be read.
        let (user, profile, broken) = try await Self.userWithReadableAndBrokenChart(ledger)
        func publish(_ type: JobType, _ body: some Encodable) async throws {
            try await Self.publishJob(type, body, with: publisher)
        }
        let (jws, _) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack5",
            user: user
        )
        try await publish(
            .billingVerifyPurchase,
            VerifyPurchaseRequest(jobID: .random(), userID: user, signedTransaction: jws)
        )
        try await RuntimeTestEnvironment.eventually(
            "the verified purchase issues the user 5 credits (credits available)",
            timeout: .seconds(30),
            observe: { try await ledger.balance(user).available },
            until: { $0 == 5 }
        )
        try await publish(
            .reportRequest,
            ReportRequest(jobID: .random(), userID: user, profileID: profile, area: .career, language: .en)
        )
        try await publish(
            .reportRequest,
            ReportRequest(jobID: .random(), userID: user, profileID: broken, area: .career, language: .en)
        )
        try await RuntimeTestEnvironment.eventually("one report stored and one credit refunded", timeout: .seconds(30))
        {
            let balance = try await ledger.balance(user)
            let reports = try await ledger.pool.withConnection { database in
                try database.query("SELECT count(*)::int AS n FROM report_purchases WHERE user_id = $1", [user.uuid])
                    .first?.decode(Int.self, "n") ?? 0
            }
            return reports == 1 && balance.refunded == 1
        }
        let balance = try await ledger.balance(user)
        #expect(balance.available == 4 && balance.consumed == 2 && balance.refunded == 1 && balance.balanced)
        await workers.stop()
    }
}

extension ReportJourneyTests {
    /// A user with two profiles: one whose chart reads (its report is written) and one whose
    /// stored chart is `{}` (its report cannot be written, so its credit comes back).
    static func userWithReadableAndBrokenChart(
        _ ledger: BillingLedgerIntegrationTests
    ) async throws -> (user: UserID, readable: ProfileID, broken: ProfileID) {
        let (user, profile) = try await ledger.userWithProfile(chart: false)
        let (_, broken) = try await ledger.userWithProfile(chart: false)
        _ = try await ledger.pool.withConnection { database in
            try database.execute(
                "UPDATE user_profiles SET user_id = $1, name = 'Second' WHERE id = $2",
                [user.uuid, broken.uuid]
            )
            for (id, chart) in [(profile, chartJSON), (broken, "{}")] {
                try database.execute(
                    """
                    INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                    VALUES ($1, $2, $3::jsonb, 'placidus', 'test', 'test')
                    """,
                    [UUID(), id.uuid, chart]
                )
            }
        }
        return (user, profile, broken)
    }

    /// Publishes a job body to `astro.jobs` under its type, confirmed and mandatory.
    static func publishJob(_ type: JobType, _ body: some Encodable, with publisher: AMQPPublisher) async throws {
        try await publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.jobsExchange,
                routingKey: type.rawValue,
                body: try JSONCoding.encoder.encode(body),
                properties: MessageProperties(contentType: "application/json"),
                mandatory: true
            )
        )
    }
}
