import AMQP
import AstroDomain
import Billing
import Foundation
import LLMFake
import Postgres
import ReportService
import Reports
import TestProcesses
import Testing
import WorkerRuntime

/// Reports for two (issue 20, part 7): a relationships report.request naming a partner profile
/// of the same user, through the billing-worker and report-worker processes and in process.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct PairReportTests {
    static let partnerChartJSON: String = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("ReportsTests/Fixtures/sao-paulo-1985-03-21.json")
        return try! String(contentsOf: url, encoding: .utf8)
    }()
    static let pairWriter = try! PairReportWriter()

    let journey: ReportJourneyTests
    var ledger: BillingLedgerIntegrationTests { journey.ledger }

    init() async throws {
        journey = try await ReportJourneyTests()
    }

    /// A buyer (profile "Anna", one credit of `product`) and a second profile "Oleh" of the same
    /// user with its chart.
    func couple(
        product: String = "com.astrosvitla.report.credit.single"
    ) async throws -> (
        UserID, ProfileID, ProfileID
    ) {
        let (user, profile) = try await journey.buyer(chart: ReportJourneyTests.chartJSON, product: product)
        let partner = try await addProfile(to: user, name: "Oleh")
        _ = try await ledger.pool.withConnection { database in
            try database.execute("UPDATE user_profiles SET name = 'Anna' WHERE id = $1", [profile.uuid])
        }
        return (user, profile, partner)
    }

    func addProfile(to user: UserID, name: String, chart: String? = partnerChartJSON) async throws -> ProfileID {
        let profile = ProfileID.random()
        try await ledger.pool.withTransaction { database in
            try database.execute(
                """
                INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                VALUES ($1, $2, $3, '1985-03-21', '08:30', 'America/Sao_Paulo', -23.55, -46.63)
                """,
                [profile.uuid, user.uuid, name]
            )
            if let chart {
                try database.execute(
                    """
                    INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                    VALUES ($1, $2, $3::jsonb, 'placidus', 'test', 'test')
                    """,
                    [UUID(), profile.uuid, chart]
                )
            }
        }
        return profile
    }

    func body(_ request: ReportRequest) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: JSONCoding.encoder.encode(request))
    }

    func publish(_ request: ReportRequest, _ workers: ReportJourneyTests.Workers) async throws {
        try await workers.publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.jobsExchange,
                routingKey: JobType.reportRequest.rawValue,
                body: try JSONCoding.encoder.encode(request),
                properties: MessageProperties(contentType: "application/json"),
                mandatory: true
            )
        )
    }

    func job(_ id: JobID) async throws -> (status: String, code: String?)? {
        try await ledger.pool.withConnection { database in
            try database.query("SELECT status, error->>'code' AS code FROM jobs WHERE id = $1", [id.uuid]).first
                .map { (try $0.decode(String.self, "status"), try $0.decode(String?.self, "code")) }
        }
    }

    func reports(_ profile: ProfileID) async throws -> [(text: String, partner: UUID?)] {
        try await ledger.pool.withConnection { database in
            try database.query(
                "SELECT report_text, partner_profile_id FROM report_purchases WHERE profile_id = $1 ORDER BY created_at",
                [profile.uuid]
            ).map { (try $0.decode(String.self, "report_text"), try $0.decode(UUID?.self, "partner_profile_id")) }
        }
    }

    /// The journey through real workers: another user's profile as partner is refused before any
    /// credit is spent; the user's own partner gets one report for two, naming both, for one
    /// credit; the same request again delivers that report and spends nothing.
    @Test func aReportForTwoThroughTheWorkers() async throws {
        let workers = try await journey.startWorkers()
        let (user, profile, partner) = try await couple()
        let (_, strangersProfile) = try await journey.buyer(chart: Self.partnerChartJSON)

        let refused = JobID.random()
        try await publish(
            ReportRequest(
                jobID: refused,
                userID: user,
                profileID: profile,
                area: .relationships,
                language: .uk,
                partnerProfileID: strangersProfile
            ),
            workers
        )
        try await RuntimeTestEnvironment.eventually("the request is refused", timeout: .seconds(30)) {
            try await job(refused).map { ["failed", "dead"].contains($0.status) } ?? false
        }
        #expect(try await job(refused)?.code == PartnerRule.notFound.rawValue)
        var balance = try await ledger.balance(user)
        #expect(balance.consumed == 0 && balance.available == 1 && balance.balanced)

        let request = ReportRequest(
            jobID: .random(),
            userID: user,
            profileID: profile,
            area: .relationships,
            language: .uk,
            partnerProfileID: partner
        )
        try await publish(request, workers)
        try await RuntimeTestEnvironment.eventually("the report for two is stored", timeout: .seconds(30)) {
            try await !reports(profile).isEmpty
        }
        let stored = try await reports(profile)
        #expect(stored.count == 1)
        #expect(stored.first?.partner == partner.uuid)
        let text = try #require(stored.first?.text)
        #expect(text.hasPrefix("Стосунки: Anna та Oleh"))
        // Inter-aspect headings say whose point is whose, e.g. "Венера (Anna) — Марс (Oleh): тригон, орб 0°42′".
        let heading = try #require(
            text.split(separator: "\n").first { $0.contains("(Anna) — ") && $0.contains("(Oleh): ") }
        )
        #expect(heading.contains(", орб "))
        #expect(text.contains("Показник сумісності: "))
        balance = try await ledger.balance(user)
        #expect(balance.consumed == 1 && balance.available == 0 && balance.balanced)
        // The credit records what it was spent on, the partner included.
        let consumedPartner = try await ledger.pool.withConnection { database in
            try database.query(
                "SELECT consumed_partner_profile_id FROM purchase_credits WHERE user_id = $1 AND consumed",
                [user.uuid]
            ).first?.decode(UUID?.self, "consumed_partner_profile_id")
        }
        #expect(consumedPartner == partner.uuid)

        // The same request again (a new job): the report already exists, nothing is spent.
        var again = request
        again.jobID = .random()
        try await publish(again, workers)
        try await RuntimeTestEnvironment.eventually("the repeat is answered", timeout: .seconds(30)) {
            try await job(again.jobID)?.status == "succeeded"
        }
        #expect(try await reports(profile).count == 1)
        balance = try await ledger.balance(user)
        #expect(balance.consumed == 1 && balance.balanced)

        // astroctl asks for the same report for two and prints it (already delivered: free).
        let astroctl = ProcessRunner.productPath("astroctl")
        let environment = [
            "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.client),
            "DATABASE_URL": workers.databaseURL,
        ]
        let shown = try await ProcessRunner.run(
            astroctl,
            [
                "report", "request", "--user", user.description, "--profile", profile.description, "--partner",
                partner.description, "--area", "relationships", "--language", "uk", "--wait", "--timeout", "60",
            ],
            environment: environment
        )
        #expect(shown.status == 0, "\(shown.error)")
        #expect(shown.output.contains("Стосунки: Anna та Oleh"))
        let career = try await ProcessRunner.run(
            astroctl,
            [
                "report", "request", "--user", user.description, "--profile", profile.description, "--partner",
                partner.description, "--area", "career",
            ],
            environment: environment
        )
        #expect(career.status != 0 && career.error.contains(PartnerRule.notAllowed.rawValue))
        #expect(try await ledger.balance(user).consumed == 1)
        await workers.stop()
    }

    /// The schema's rule (migration 0031): one report per (profile, partner, area, language), no
    /// partner being one value; a partner only for relationships and never the profile itself.
    @Test func theSchemaKeepsOneReportPerProfilePartnerAreaAndLanguage() async throws {
        let (user, profile, partner) = try await couple()
        let states = try await ledger.pool.withConnection { database -> [String?] in
            let transaction = try #require(
                try database.query("SELECT transaction_id FROM purchase_records WHERE user_id = $1", [user.uuid])
                    .first?.decode(String.self, "transaction_id")
            )
            func insert(_ partner: ProfileID?, area: String = "relationships", self own: Bool = false) -> String? {
                do {
                    try database.execute("SAVEPOINT s")
                    try database.execute(
                        """
                        INSERT INTO report_purchases (id, user_id, profile_id, partner_profile_id, area, language,
                            report_text, word_count, price, currency, transaction_id, purchase_date, generated_at, writer)
                        VALUES ($1, $2, $3, $4, $5, 'en', 'x', 1, 0, 'USD', $6, now(), now(), 'test')
                        """,
                        [UUID(), user.uuid, profile.uuid, own ? profile.uuid : partner?.uuid, area, transaction]
                    )
                    try database.execute("RELEASE SAVEPOINT s")
                    return nil
                } catch {
                    _ = try? database.execute("ROLLBACK TO SAVEPOINT s")
                    return error.sqlState
                }
            }
            try database.execute("BEGIN")
            defer { _ = try? database.execute("ROLLBACK") }
            return [
                insert(nil), insert(nil), insert(partner), insert(partner), insert(partner, area: "career"),
                insert(nil, self: true),
            ]
        }
        // 23505 unique violation, 23514 check violation.
        #expect(states == [nil, "23505", nil, "23505", "23514", "23514"])
    }

    /// Two copies of one request for two at once (a double tap): one credit is spent, the
    /// other copy finds it in progress.
    @Test func concurrentCopiesSpendOneCredit() async throws {
        let (user, profile, partner) = try await couple(product: "com.astrosvitla.report.credit.pack5")
        let outcomes = try await withThrowingTaskGroup(of: JobOutcome.self) { group in
            for _ in 0..<4 {
                let request = ReportRequest(
                    jobID: .random(),
                    userID: user,
                    profileID: profile,
                    area: .relationships,
                    language: .uk,
                    partnerProfileID: partner
                )
                let body = try body(request)
                group.addTask { try await ledger.run(ReportRequestHandler(), body, type: .reportRequest) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { $0.messages.contains { $0.routingKey == "report.generate" } }.count == 1)
        #expect(outcomes.filter { $0.result?["inProgress"] == true }.count == 3)
        let balance = try await ledger.balance(user)
        #expect(balance.consumed == 1 && balance.available == 4 && balance.balanced)
    }

    /// The billing-worker's partner rules, each refused before anything is spent.
    @Test func partnerRulesAreCheckedBeforeSpending() async throws {
        let (user, profile, _) = try await couple()
        let (_, strangersProfile) = try await journey.buyer(chart: Self.partnerChartJSON)
        let chartless = try await addProfile(to: user, name: "No chart", chart: nil)
        let cases: [(ReportArea, ProfileID, String)] = [
            (.career, strangersProfile, PartnerRule.notAllowed.rawValue),
            (.relationships, profile, PartnerRule.sameProfile.rawValue),
            (.relationships, strangersProfile, PartnerRule.notFound.rawValue),
            (.relationships, ProfileID.random(), PartnerRule.notFound.rawValue),
            (.relationships, chartless, PartnerRule.chartNotFound.rawValue),
        ]
        for (area, partner, code) in cases {
            let request = ReportRequest(
                jobID: .random(),
                userID: user,
                profileID: profile,
                area: area,
                language: .en,
                partnerProfileID: partner
            )
            do {
                _ = try await ledger.run(ReportRequestHandler(), body(request), type: .reportRequest)
                Issue.record("spent a credit on \(area) with partner \(partner)")
            } catch let rejection as JobRejection {
                #expect(rejection.code == code)
            }
        }
        let balance = try await ledger.balance(user)
        #expect(balance.consumed == 0 && balance.available == 1 && balance.balanced)
    }

    /// With and without a partner are different reports (two credits, two rows); a refund of the
    /// report for two must name the partner; deleting the partner deletes only the report for two.
    @Test func withAndWithoutAPartnerAreDifferentReports() async throws {
        let (user, profile, partner) = try await couple(product: "com.astrosvitla.report.credit.pack5")
        let handler = ReportGenerateHandler(writer: ReportJourneyTests.writer, pairWriter: Self.pairWriter)
        var generated: [JSONValue] = []
        for partnerID in [partner, nil] {
            let request = ReportRequest(
                jobID: .random(),
                userID: user,
                profileID: profile,
                area: .relationships,
                language: .en,
                partnerProfileID: partnerID
            )
            let outcome = try await ledger.run(ReportRequestHandler(), body(request), type: .reportRequest)
            let message = try #require(outcome.messages.first { $0.routingKey == "report.generate" })
            let generate = try JSONDecoder().decode(JSONValue.self, from: message.body)
            #expect(generate["partnerProfileId"]?.stringValue == partnerID?.description)
            generated.append(generate)
            #expect(try await ledger.run(handler, generate, type: .reportGenerate).status == .succeeded)
        }
        let stored = try await reports(profile)
        #expect(stored.count == 2)
        let pair = try #require(stored.first { $0.partner == partner.uuid })
        #expect(pair.text.hasPrefix("Relationships: Anna and Oleh"))
        #expect(pair.text.contains("Anna's ") && pair.text.contains("Oleh's "))
        #expect(stored.contains { $0.partner == nil && !$0.text.contains("Oleh") })
        #expect(try await ledger.balance(user).consumed == 2)

        // A forged report.generate that drops the partner from a pair credit is refused, unrefunded.
        guard case .object(var fields) = generated[0] else { return }
        fields["partnerProfileId"] = nil
        fields["jobId"] = .string(JobID.random().description)
        do {
            _ = try await ledger.run(handler, .object(fields), type: .reportGenerate)
            Issue.record("a report.generate without the credit's partner was accepted")
        } catch let rejection as JobRejection {
            #expect(rejection.code == "credit-mismatch")
        }

        // Deleting the partner profile deletes the report for two (it quotes the partner's chart).
        _ = try await ledger.pool.withConnection { database in
            try database.execute("DELETE FROM user_profiles WHERE id = $1", [partner.uuid])
        }
        let left = try await reports(profile)
        #expect(left.count == 1 && left.first?.partner == nil)
        #expect(try await ledger.balance(user).balanced)
    }

    /// A pair report that cannot be written (the partner's chart is unreadable) refunds the
    /// credit through a refund that names the partner.
    @Test func aReportForTwoThatCannotBeWrittenIsRefunded() async throws {
        let (user, profile) = try await journey.buyer(chart: ReportJourneyTests.chartJSON)
        let partner = try await addProfile(to: user, name: "Broken", chart: "{}")
        let request = ReportRequest(
            jobID: .random(),
            userID: user,
            profileID: profile,
            area: .relationships,
            language: .uk,
            partnerProfileID: partner
        )
        let outcome = try await ledger.run(ReportRequestHandler(), body(request), type: .reportRequest)
        let message = try #require(outcome.messages.first { $0.routingKey == "report.generate" })
        let generate = try JSONDecoder().decode(JSONValue.self, from: message.body)
        let handler = ReportGenerateHandler(writer: ReportJourneyTests.writer, pairWriter: Self.pairWriter)
        let failed = try await ledger.run(handler, generate, type: .reportGenerate)
        guard case .failed(let error) = failed.status else {
            Issue.record("wrote a report from an unreadable partner chart")
            return
        }
        #expect(error.code == "partner-chart-unreadable")
        #expect(failed.messages.map(\.routingKey) == ["billing.refund-credit", "report.failed"])
        let refund = try JSONDecoder().decode(JSONValue.self, from: failed.messages[0].body)
        #expect(refund["partnerProfileId"]?.stringValue == partner.description)
        // Without the partner the refund does not match the credit, and is refused.
        guard case .object(var forged) = refund else { return }
        forged["partnerProfileId"] = nil
        forged["jobId"] = .string(JobID.random().description)
        do {
            _ = try await ledger.run(RefundCreditHandler(), .object(forged), type: .billingRefundCredit)
            Issue.record("a refund without the partner was accepted")
        } catch let rejection as JobRejection {
            #expect(rejection.code == "credit-mismatch")
        }
        let refunded = try await ledger.run(RefundCreditHandler(), refund, type: .billingRefundCredit)
        #expect(refunded.messages.map(\.routingKey) == ["billing.credit-refunded"])
        let balance = try await ledger.balance(user)
        #expect(balance.available == 1 && balance.refunded == 1 && balance.balanced)
        let ledgerPartner = try await ledger.pool.withConnection { database in
            try database.query(
                "SELECT partner_profile_id FROM credit_ledger WHERE user_id = $1 AND entry = 'refunded'",
                [user.uuid]
            ).first?.decode(UUID?.self, "partner_profile_id")
        }
        #expect(ledgerPartner == partner.uuid)
    }

    /// The LLM writer for two: the prompt names both people, labels whose point is whose and
    /// carries the score; the answer is stored as the report.
    @Test func anLLMReportForTwo() async throws {
        let (user, profile, partner) = try await couple()
        let answer = ReportJourneyTests.writer.write(chart: LLMReportTests.chart, area: .relationships, language: .en)
            .text
        let fake = try OpenAIFake(apiKey: LLMReportTests.key, defaultResponder: { _ in answer })
        let request = ReportRequest(
            jobID: .random(),
            userID: user,
            profileID: profile,
            area: .relationships,
            language: .en,
            partnerProfileID: partner
        )
        let outcome = try await ledger.run(ReportRequestHandler(), body(request), type: .reportRequest)
        let message = try #require(outcome.messages.first { $0.routingKey == "report.generate" })
        let generate = try JSONDecoder().decode(JSONValue.self, from: message.body)
        let handler = ReportGenerateHandler(
            writer: ReportJourneyTests.writer,
            pairWriter: Self.pairWriter,
            llm: .init(writer: try LLMReportTests.writer(fake), pool: ledger.pool)
        )
        let written = try await ledger.run(handler, generate, type: .reportGenerate)
        #expect(written.status == .succeeded)
        #expect(fake.requestCount == 1)
        let prompt = fake.lastRequestMessages.map(\.content).joined(separator: "\n")
        #expect(prompt.contains("Anna") && prompt.contains("Oleh"))
        #expect(prompt.contains("Anna's chart: ") && prompt.contains("Oleh's chart: "))
        #expect(prompt.contains("Compatibility score: "))
        #expect(prompt.range(of: #"1\. Anna's \w+ \w+ Oleh's \w+, \d+°\d\d′"#, options: .regularExpression) != nil)
        let stored = try await reports(profile)
        #expect(stored.count == 1 && stored.first?.partner == partner.uuid && stored.first?.text == answer)
    }

    /// POST /v1/reports with `partnerProfileId`: checked by the gateway before anything is
    /// published (422, 404, 409), then one report for two through the workers, shown with its
    /// partner in GET /v1/reports.
    @Test func theGatewayAcceptsAndChecksThePartner() async throws {
        let gateway = try await GatewayHarness.launch(label: "pair-gateway")
        let workers = try await GatewayResourcesTests.startBillingAndReportWorkers()
        defer {
            gateway.processes.stop()
            workers.stop()
        }
        let base = gateway.base
        let logs = { gateway.processes.output + workers.output }
        let (userText, token) = try await GatewayHarness.register(base)
        let (otherText, _) = try await GatewayHarness.register(base)
        let user = UserID(try #require(UUID(uuidString: userText)))
        let other = UserID(try #require(UUID(uuidString: otherText)))
        let profile = try await addProfile(to: user, name: "Anna", chart: ReportJourneyTests.chartJSON)
        let partner = try await addProfile(to: user, name: "Oleh")
        let chartless = try await addProfile(to: user, name: "Later", chart: nil)
        let sidereal = try await addProfile(
            to: user,
            name: "Sidereal",
            chart: Self.partnerChartJSON.replacing(#/"zodiac"\s*:\s*"tropical"/#, with: #""zodiac":"sidereal:lahiri""#)
        )
        let strangers = try await addProfile(to: other, name: "Oleh")
        let single = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.single",
            user: user
        )
        let bought = try GatewayResourcesTests.accepted(
            try await GatewayHarness.request(
                "POST",
                "\(base)/v1/purchases",
                token: token,
                body: ["signedTransaction": .string(single.jws)]
            )
        )
        #expect(
            try await GatewayResourcesTests.finished(base, bought, token: token, logs: logs)["status"] == "succeeded"
        )

        func post(
            _ partnerValue: JSONValue,
            area: String = "relationships",
            key: String? = nil
        ) async throws
            -> GatewayHarness.HTTPAnswer
        {
            try await GatewayHarness.request(
                "POST",
                "\(base)/v1/reports",
                token: token,
                body: [
                    "profileId": .string(profile.description), "area": .string(area), "language": "en",
                    "partnerProfileId": partnerValue,
                ],
                headers: key.map { ["Idempotency-Key": $0] } ?? [:]
            )
        }
        let refusals: [(JSONValue, String, Int, String)] = [
            (.string(partner.description), "career", 422, PartnerRule.notAllowed.rawValue),
            (.string(profile.description), "relationships", 422, PartnerRule.sameProfile.rawValue),
            ("not-a-uuid", "relationships", 422, "invalid-id"),
            (7, "relationships", 422, "invalid-field-type"),
            (.string(strangers.description), "relationships", 404, PartnerRule.notFound.rawValue),
            (.string(ProfileID.random().description), "relationships", 404, PartnerRule.notFound.rawValue),
            (.string(chartless.description), "relationships", 409, PartnerRule.chartNotFound.rawValue),
            (.string(sidereal.description), "relationships", 422, "zodiac-mismatch"),
        ]
        for (value, area, status, code) in refusals {
            let answer = try await post(value, area: area)
            #expect(
                answer.status == status && answer.json?["code"]?.stringValue == code,
                "\(value) \(area): \(answer.status) \(String(describing: answer.json))"
            )
            #expect(answer.json?["field"] == "partnerProfileId", "\(value)")
        }
        let key = UUID().uuidString
        let requested = try GatewayResourcesTests.accepted(try await post(.string(partner.description), key: key))
        // The same key with the request without a partner is another request.
        let other_request = try await GatewayHarness.request(
            "POST",
            "\(base)/v1/reports",
            token: token,
            body: ["profileId": .string(profile.description), "area": "relationships", "language": "en"],
            headers: ["Idempotency-Key": key]
        )
        #expect(other_request.status == 422 && other_request.json?["code"] == "idempotency-key-reused")
        let job = try await GatewayResourcesTests.finished(base, requested, token: token, logs: logs)
        #expect(job["status"] == "succeeded", "\(job)")
        var listed: GatewayHarness.HTTPAnswer?
        try await RuntimeTestEnvironment.eventually("the report for two is listed", timeout: .seconds(60)) {
            listed = try await GatewayHarness.request("GET", "\(base)/v1/reports?profileId=\(profile)", token: token)
            return listed?.json?["items"]?.arrayValue?.count == 1
        }
        let summary = try #require(listed?.json?["items"]?.arrayValue?.first)
        #expect(summary["partnerProfileId"]?.stringValue == partner.description)
        let reportID = try #require(summary["id"]?.stringValue)
        let report = try await GatewayHarness.request("GET", "\(base)/v1/reports/\(reportID)", token: token)
        let text = try #require(report.json?["text"]?.stringValue)
        #expect(text.hasPrefix("Relationships: Anna and Oleh"))
        #expect(text.contains("Anna's ") && text.contains(" – Oleh's "))
        let credits = try await GatewayHarness.request("GET", "\(base)/v1/credits", token: token)
        #expect(credits.json?["available"] == 0)
        #expect(try await ledger.balance(user).balanced)
    }
}
