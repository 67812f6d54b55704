import AMQP
import AstroDomain
import Billing
import Foundation
import Postgres
import Schema
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The app's resources through the real gateway, in front of the real broker, database and the
/// real chart-, billing- and report-worker processes (each on its own least-privilege roles):
/// profiles and their charts, purchases, credits, the ledger and reports; another user's ids,
/// malformed ids, page bounds, and a delete.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct GatewayResourcesTests {
    typealias HTTPAnswer = GatewayHarness.HTTPAnswer

    static func request(
        _ method: String,
        _ url: String,
        token: String? = nil,
        body: JSONValue? = nil,
        headers: [String: String] = [:]
    ) async throws -> HTTPAnswer {
        try await GatewayHarness.request(method, url, token: token, body: body, headers: headers)
    }

    /// A profile request body with these members of `profile` changed.
    static func profile(_ changes: [String: JSONValue] = [:]) -> JSONValue {
        guard case .object(var body) = GatewayHarness.profile, case .object(var profile)? = body["profile"] else {
            return GatewayHarness.profile
        }
        profile.merge(changes) { _, new in new }
        body["profile"] = .object(profile)
        return .object(body)
    }

    /// A billing-worker and a report-worker (the built-in expert-rules writer: no LLM) as their
    /// own database roles and broker users, trusting the test PKI's root.
    /// - Parameter environment: more variables for both workers (e.g. `USER_EXPORT_MAX_BYTES`).
    static func startBillingAndReportWorkers(
        environment extra: [String: String] = [:]
    ) async throws -> GatewayHarness.Processes {
        var processes: [ChildProcess] = []
        for (product, role, broker) in [
            ("billing-worker", WorkerRole.billingWorker, BrokerAccess.billingWorker),
            ("report-worker", WorkerRole.reportWorker, BrokerAccess.reportWorker),
        ] {
            let process = try await GatewayHarness.start(
                product,
                environment: [
                    "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: broker),
                    "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: role),
                    "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "warning", "MIGRATE_ON_START": "false",
                    "BILLING_ENVIRONMENT": "Sandbox",
                    "BILLING_TRUSTED_ROOTS": BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der")
                        .path,
                ].merging(extra) { _, new in new },
                label: "resources-\(product)"
            )
            processes.append(process)
        }
        return GatewayHarness.Processes(processes: processes)
    }

    /// Polls a job until it is finished; returns its last answer.
    static func finished(_ base: String, _ jobID: String, token: String, logs: () -> String) async throws -> JSONValue {
        var last: HTTPAnswer?
        do {
            try await RuntimeTestEnvironment.eventually("job \(jobID) finishes", timeout: .seconds(60)) {
                last = try await request("GET", "\(base)/v1/jobs/\(jobID)", token: token)
                return ["succeeded", "failed", "dead"].contains(last?.json?["status"]?.stringValue ?? "")
            }
        } catch {
            Issue.record("last answer: \(String(describing: last?.json))\n\(logs())")
            throw error
        }
        return try #require(last?.json)
    }

    /// A 202 with a job id and its Location.
    static func accepted(_ answer: HTTPAnswer, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        #expect(answer.status == 202, "\(String(describing: answer.json))", sourceLocation: sourceLocation)
        let jobID = try #require(answer.json?["jobId"]?.stringValue, sourceLocation: sourceLocation)
        #expect(answer.headers["location"] == "/v1/jobs/\(jobID)", sourceLocation: sourceLocation)
        return jobID
    }

    static func expectNotFound(
        _ answer: HTTPAnswer,
        code: String = "not-found",
        _ what: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(
            answer.status == 404,
            "\(what): \(answer.status) \(String(describing: answer.json))",
            sourceLocation: sourceLocation
        )
        #expect(answer.headers["content-type"] == "application/problem+json", "\(what)", sourceLocation: sourceLocation)
        #expect(answer.json?["code"]?.stringValue == code, "\(what)", sourceLocation: sourceLocation)
    }

    @Test func theJourneyOfAProfileAPurchaseAndAReport() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: JobType.all)
        defer { Task { await publisher.close() } }
        let gateway = try await GatewayHarness.launch(chartWorker: true, label: "resources-gateway")
        defer { gateway.processes.stop() }
        let workers = try await Self.startBillingAndReportWorkers()
        defer { workers.stop() }
        let base = gateway.base
        let logs = { gateway.processes.output + "\n" + workers.output }
        try await ChildProcess.eventually(
            "the billing-worker consumes report.request and the report-worker report.generate",
            on: workers.processes
        ) {
            let request = try await publisher.queueState(JobType.reportRequest.rawValue).consumerCount
            let generate = try await publisher.queueState(JobType.reportGenerate.rawValue).consumerCount
            return request > 0 && generate > 0
        }
        let (userText, token) = try await GatewayHarness.register(base)
        let user = try #require(UserID(userText))
        let (_, otherToken) = try await GatewayHarness.register(base)

        // A profile: its job, then the profile and its stored chart.
        let created = try Self.accepted(
            try await Self.request("POST", "\(base)/v1/profiles", token: token, body: Self.profile())
        )
        let createdJob = try await Self.finished(base, created, token: token, logs: logs)
        #expect(createdJob["status"] == "succeeded", "\(createdJob)")
        let profileID = try #require(createdJob["result"]?["profileId"]?.stringValue)
        let chart = try await Self.request("GET", "\(base)/v1/profiles/\(profileID)/chart", token: token)
        #expect(chart.status == 200)
        #expect(chart.headers["content-type"] == "application/json")
        #expect(chart.json?["birthTime"] == "15:00")
        #expect(chart.json?["planets"]?.arrayValue?.count == 10)
        let shown = try await Self.request("GET", "\(base)/v1/profiles/\(profileID)", token: token)
        #expect(shown.status == 200)
        #expect(shown.json?["name"] == "Me")
        #expect(shown.json?["birthDate"] == "1990-10-07" && shown.json?["birthTime"] == "15:00")
        #expect(shown.json?["latitude"] == 50.4501 && shown.json?["timezone"] == "Europe/Kyiv")
        let chartID = try #require(shown.json?["chart"]?["chartId"]?.stringValue)
        #expect(shown.json?["chart"]?["id"]?.stringValue == chartID, "the old name answers the same id")
        #expect(shown.json?["chart"]?["houseSystem"] == "placidus")
        let listed = try await Self.request("GET", "\(base)/v1/profiles", token: token)
        #expect(listed.status == 200)
        #expect(listed.json?["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == [profileID])
        #expect(listed.json?["nextCursor"] == nil)

        // PUT: validated as POST is, then the same profile with new birth data and a new chart.
        let invalid = try await Self.request(
            "PUT",
            "\(base)/v1/profiles/\(profileID)",
            token: token,
            body: Self.profile(["latitude": 95])
        )
        #expect(invalid.status == 422 && invalid.json?["code"] == "latitude-out-of-range")
        let mismatch = try await Self.request(
            "PUT",
            "\(base)/v1/profiles/\(profileID)",
            token: token,
            body: Self.profile(["id": .string(UUID().uuidString)])
        )
        #expect(mismatch.status == 400 && mismatch.json?["code"] == "profile-id-mismatch")
        let update = Self.profile(["name": "Me, later", "birthTime": "16:30", "id": .string(profileID.uppercased())])
        let key = UUID().uuidString
        let put = try await Self.request(
            "PUT",
            "\(base)/v1/profiles/\(profileID)",
            token: token,
            body: update,
            headers: ["Idempotency-Key": key]
        )
        let updated = try Self.accepted(put)
        let putAgain = try await Self.request(
            "PUT",
            "\(base)/v1/profiles/\(profileID)",
            token: token,
            body: update,
            headers: ["Idempotency-Key": key]
        )
        #expect(try Self.accepted(putAgain) == updated)
        let reused = try await Self.request(
            "PUT",
            "\(base)/v1/profiles/\(profileID)",
            token: token,
            body: Self.profile(["birthTime": "17:00"]),
            headers: ["Idempotency-Key": key]
        )
        #expect(reused.status == 422 && reused.json?["code"] == "idempotency-key-reused")
        let updateJob = try await Self.finished(base, updated, token: token, logs: logs)
        #expect(updateJob["status"] == "succeeded", "\(updateJob)")
        #expect(updateJob["result"]?["profileId"]?.stringValue == profileID)
        let rechart = try await Self.request("GET", "\(base)/v1/profiles/\(profileID)/chart", token: token)
        #expect(rechart.json?["birthTime"] == "16:30")
        #expect(rechart.json?["ascendant"] != chart.json?["ascendant"])
        let reshown = try await Self.request("GET", "\(base)/v1/profiles/\(profileID)", token: token)
        #expect(reshown.json?["name"] == "Me, later" && reshown.json?["birthTime"] == "16:30")
        #expect(reshown.json?["chart"]?["chartId"]?.stringValue == chartID)

        // Purchases with dev-signed transactions: five any-area credits and one career credit.
        let pack = try BillingLedgerIntegrationTests.signedPurchase("com.astrosvitla.report.credit.pack5", user: user)
        let career = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.astroinsight.report.career",
            user: user
        )
        var purchaseJobs: [String] = []
        for jws in [pack.jws, career.jws] {
            purchaseJobs.append(
                try Self.accepted(
                    try await Self.request(
                        "POST",
                        "\(base)/v1/purchases",
                        token: token,
                        body: ["signedTransaction": .string(jws)]
                    )
                )
            )
        }
        for job in purchaseJobs {
            let done = try await Self.finished(base, job, token: token, logs: logs)
            #expect(done["status"] == "succeeded", "\(done)")
        }
        let credits = try await Self.request("GET", "\(base)/v1/credits", token: token)
        #expect(credits.status == 200)
        #expect(credits.json?["available"] == 6)
        #expect(credits.json?["byArea"]?["any"] == 5 && credits.json?["byArea"]?["career"] == 1)
        #expect(credits.json?["byArea"]?["health"] == 0)

        // Another user sending this user's transaction gets nothing from it.
        let stolen = try Self.accepted(
            try await Self.request(
                "POST",
                "\(base)/v1/purchases",
                token: otherToken,
                body: ["signedTransaction": .string(pack.jws)]
            )
        )
        let stolenJob = try await Self.finished(base, stolen, token: otherToken, logs: logs)
        #expect(stolenJob["status"] != "succeeded")
        #expect(stolenJob["error"]?["code"] == "account-mismatch", "\(stolenJob)")
        #expect(try await Self.request("GET", "\(base)/v1/credits", token: otherToken).json?["available"] == 0)

        // A report: the request spends the career credit, the report-worker writes the report.
        let requested = try Self.accepted(
            try await Self.request(
                "POST",
                "\(base)/v1/reports",
                token: token,
                body: ["profileId": .string(profileID), "area": "career", "language": "en"]
            )
        )
        // The job succeeds when the report exists (its report.generate is composed in), and
        // its result names it: the list holds it at once, no waiting.
        let requestJob = try await Self.finished(base, requested, token: token, logs: logs)
        #expect(requestJob["status"] == "succeeded", "\(requestJob)")
        let reportJobID = try #require(requestJob["result"]?["reportJobId"]?.stringValue, "\(requestJob)")
        let namedReport = try #require(requestJob["result"]?["reportId"]?.stringValue, "\(requestJob)")
        let reports: HTTPAnswer? = try await Self.request(
            "GET",
            "\(base)/v1/reports?profileId=\(profileID)",
            token: token
        )
        #expect(reports?.json?["items"]?.arrayValue?.count == 1, "\(String(describing: reports?.json))\n\(logs())")
        // The follow-up job the result names is the caller's to read too.
        let followUp = try await Self.request("GET", "\(base)/v1/jobs/\(reportJobID)", token: token)
        #expect(
            followUp.status == 200 && followUp.json?["type"] == "report.generate",
            "\(String(describing: followUp.json))"
        )
        #expect(followUp.json?["result"]?["reportId"]?.stringValue == namedReport)
        let summary = try #require(reports?.json?["items"]?.arrayValue?.first)
        #expect(summary["area"] == "career" && summary["language"] == "en" && summary["text"] == nil)
        let reportID = try #require(summary["id"]?.stringValue)
        #expect(reportID == namedReport)
        let report = try await Self.request("GET", "\(base)/v1/reports/\(reportID)", token: token)
        #expect(report.status == 200)
        #expect(report.json?["profileId"]?.stringValue == profileID)
        #expect(report.json?["text"]?.stringValue?.contains("Key influences") == true)
        #expect(report.json?["wordCount"] != nil && report.json?["writer"] != nil)
        let all = try await Self.request("GET", "\(base)/v1/reports", token: token)
        #expect(all.json?["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == [reportID])
        let afterReport = try await Self.request("GET", "\(base)/v1/credits", token: token)
        #expect(afterReport.json?["available"] == 5 && afterReport.json?["byArea"]?["career"] == 0)

        // The same report again costs nothing.
        let again = try Self.accepted(
            try await Self.request(
                "POST",
                "\(base)/v1/reports",
                token: token,
                body: ["profileId": .string(profileID), "area": "career", "language": "en"]
            )
        )
        let againJob = try await Self.finished(base, again, token: token, logs: logs)
        #expect(againJob["result"]?["alreadyDelivered"] == true, "\(againJob)")
        #expect(try await Self.request("GET", "\(base)/v1/credits", token: token).json?["available"] == 5)

        // The ledger: six grants, then the consumption by the report request, newest first.
        let ledger = try await Self.request("GET", "\(base)/v1/ledger", token: token)
        #expect(ledger.status == 200)
        let entries = try #require(ledger.json?["items"]?.arrayValue)
        #expect(entries.map { $0["entry"]?.stringValue ?? "" } == ["consumed"] + Array(repeating: "issued", count: 6))
        #expect(entries.first?["jobId"]?.stringValue == requested)
        #expect(entries.first?["profileId"]?.stringValue == profileID && entries.first?["area"] == "career")
        #expect(
            Set(entries.compactMap { $0["transactionId"]?.stringValue }) == [pack.transactionID, career.transactionID]
        )
        #expect(ledger.json?["nextCursor"] == nil)

        // Another user: every route answers 404 for this user's ids, and shows nothing of them.
        let foreign: [(String, String, JSONValue?)] = [
            ("GET", "/v1/profiles/\(profileID)", nil),
            ("PUT", "/v1/profiles/\(profileID)", Self.profile()),
            ("DELETE", "/v1/profiles/\(profileID)", nil),
            ("GET", "/v1/profiles/\(profileID)/chart", nil),
            ("GET", "/v1/reports/\(reportID)", nil),
            ("GET", "/v1/reports?profileId=\(profileID)", nil),
            ("GET", "/v1/jobs/\(requested)", nil),
        ]
        for (method, path, body) in foreign {
            Self.expectNotFound(
                try await Self.request(method, base + path, token: otherToken, body: body),
                "another user: \(method) \(path)"
            )
        }
        Self.expectNotFound(
            try await Self.request(
                "POST",
                "\(base)/v1/reports",
                token: otherToken,
                body: ["profileId": .string(profileID), "area": "career", "language": "uk"]
            ),
            code: "profile-not-found",
            "another user: POST /v1/reports"
        )
        for path in ["/v1/profiles", "/v1/reports", "/v1/ledger"] {
            let empty = try await Self.request("GET", base + path, token: otherToken)
            #expect(empty.status == 200 && empty.json?["items"] == [], "\(path): \(String(describing: empty.json))")
        }

        // Malformed and unknown ids: 404 everywhere, as another user's.
        let compact = profileID.replacingOccurrences(of: "-", with: "")
        let malformed = [
            "nope", compact, "%7B\(profileID)%7D", profileID + "0", String(profileID.dropLast()),
            String(repeating: "a", count: 2000),
            "%20\(profileID)", UUID().uuidString.lowercased(),
        ]
        for id in malformed {
            for (method, path, body) in [
                ("GET", "/v1/profiles/\(id)", nil), ("PUT", "/v1/profiles/\(id)", Self.profile()),
                ("DELETE", "/v1/profiles/\(id)", nil), ("GET", "/v1/profiles/\(id)/chart", nil),
                ("GET", "/v1/reports/\(id)", nil), ("GET", "/v1/reports?profileId=\(id)", nil),
            ] as [(String, String, JSONValue?)] {
                let answer = try await Self.request(method, base + path, token: token, body: body)
                #expect(answer.status == 404, "\(method) \(path.prefix(80)): \(answer.status)")
            }
        }

        // Delete: the profile, its chart and its report go; the money records stay.
        let deleted = try await Self.request("DELETE", "\(base)/v1/profiles/\(profileID)", token: token)
        #expect(deleted.status == 204, "\(String(describing: deleted.json))")
        for (method, path, body) in [
            ("GET", "/v1/profiles/\(profileID)", nil), ("GET", "/v1/profiles/\(profileID)/chart", nil),
            ("PUT", "/v1/profiles/\(profileID)", Self.profile()), ("DELETE", "/v1/profiles/\(profileID)", nil),
            ("GET", "/v1/reports/\(reportID)", nil), ("GET", "/v1/reports?profileId=\(profileID)", nil),
        ] as [(String, String, JSONValue?)] {
            Self.expectNotFound(
                try await Self.request(method, base + path, token: token, body: body),
                "deleted: \(path)"
            )
        }
        Self.expectNotFound(
            try await Self.request(
                "POST",
                "\(base)/v1/reports",
                token: token,
                body: ["profileId": .string(profileID), "area": "health", "language": "en"]
            ),
            code: "profile-not-found",
            "deleted: POST /v1/reports"
        )
        #expect(try await Self.request("GET", "\(base)/v1/profiles", token: token).json?["items"] == [])
        #expect(try await Self.request("GET", "\(base)/v1/reports", token: token).json?["items"] == [])
        #expect(try await Self.request("GET", "\(base)/v1/credits", token: token).json?["available"] == 5)
        let ledgerAfter = try await Self.request("GET", "\(base)/v1/ledger", token: token)
        #expect(ledgerAfter.json?["items"]?.arrayValue?.count == 7)
        #expect(ledgerAfter.json?["items"]?.arrayValue?.first?["profileId"]?.stringValue == profileID)

        // Every answer above was one openapi.yaml lists for its route.
        #expect(!gateway.processes.output.contains("status not in the route table"), "\(gateway.processes.output)")
    }

    /// Pages: bounded, complete and in order, with cursors only their own list reads back;
    /// request bodies refused before anything is published; a profile without its chart.
    @Test func pagesAreBoundedAndComplete() async throws {
        let gateway = try await GatewayHarness.launch(label: "resources-pages")
        defer { gateway.processes.stop() }
        let base = gateway.base
        let (userText, token) = try await GatewayHarness.register(base)
        let user = try #require(UserID(userText))
        let ledger = try await BillingLedgerIntegrationTests()
        defer { Task { await ledger.pool.close() } }

        // Seven profiles (one without its chart), written as the chart-worker would.
        let names = (1...7).map { String(format: "Profile %02d", $0) }
        var profiles: [String: ProfileID] = [:]
        for name in names {
            let profile = ProfileID.random()
            profiles[name] = profile
            try await ledger.pool.withConnection { database in
                try database.execute(
                    """
                    INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                    VALUES ($1, $2, $3, '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52)
                    """,
                    [profile.uuid, user.uuid, name]
                )
                if name != "Profile 07" {
                    try database.execute(
                        """
                        INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                        VALUES ($1, $2, '{"planets": []}'::jsonb, 'placidus', 'test', 'test')
                        """,
                        [UUID(), profile.uuid]
                    )
                }
            }
        }
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let query = "limit=3" + (cursor.map { "&cursor=\($0)" } ?? "")
            let page = try await Self.request("GET", "\(base)/v1/profiles?\(query)", token: token)
            #expect(page.status == 200, "\(String(describing: page.json))")
            let items = try #require(page.json?["items"]?.arrayValue)
            #expect(items.count <= 3)
            seen += items.compactMap { $0["name"]?.stringValue }
            cursor = page.json?["nextCursor"]?.stringValue
            pages += 1
        } while cursor != nil && pages < 10
        #expect(seen == names)
        #expect(pages == 3)
        let whole = try await Self.request("GET", "\(base)/v1/profiles", token: token)
        #expect(whole.json?["items"]?.arrayValue?.count == 7 && whole.json?["nextCursor"] == nil)

        // A profile without its chart: 409 `chart-not-found` for the chart and for a report.
        let chartless = try #require(profiles["Profile 07"])
        let noChart = try await Self.request("GET", "\(base)/v1/profiles/\(chartless)/chart", token: token)
        #expect(
            noChart.status == 409 && noChart.json?["code"] == "chart-not-found",
            "\(String(describing: noChart.json))"
        )
        #expect(try await Self.request("GET", "\(base)/v1/profiles/\(chartless)", token: token).json?["chart"] == .null)
        let tooEarly = try await Self.request(
            "POST",
            "\(base)/v1/reports",
            token: token,
            body: ["profileId": .string(chartless.description), "area": "career", "language": "en"]
        )
        #expect(tooEarly.status == 409 && tooEarly.json?["code"] == "chart-not-found")

        // 110 ledger entries (eleven packs of ten, through the billing handler): pages of at most 100.
        var transactions: [String] = []
        for _ in 0..<11 {
            let signed = try BillingLedgerIntegrationTests.signedPurchase(
                "com.astrosvitla.report.credit.pack10",
                user: user
            )
            transactions.append(signed.transactionID)
            _ = try await ledger.purchase(signed.jws, user: user)
        }
        let transaction = transactions[0]
        let first = try await Self.request("GET", "\(base)/v1/ledger?limit=100", token: token)
        let firstItems = try #require(first.json?["items"]?.arrayValue)
        #expect(firstItems.count == 100)
        let next = try #require(first.json?["nextCursor"]?.stringValue)
        let second = try await Self.request("GET", "\(base)/v1/ledger?limit=100&cursor=\(next)", token: token)
        let secondItems = try #require(second.json?["items"]?.arrayValue)
        #expect(secondItems.count == 10 && second.json?["nextCursor"] == nil)
        let ids = (firstItems + secondItems).compactMap { entry -> Double? in
            if case .number(let id)? = entry["id"] { return id }
            return nil
        }
        #expect(ids.count == 110 && ids == ids.sorted(by: >) && Set(ids).count == 110)
        #expect(
            try await Self.request("GET", "\(base)/v1/ledger", token: token).json?["items"]?.arrayValue?.count == 20
        )
        #expect(try await Self.request("GET", "\(base)/v1/credits", token: token).json?["byArea"]?["any"] == 110)

        // Seven reports, five of them written in one statement (one created_at: the id orders them).
        let p1 = try #require(profiles["Profile 01"])
        let p2 = try #require(profiles["Profile 02"])
        try await ledger.pool.withConnection { database in
            try database.execute(
                """
                INSERT INTO report_purchases (id, user_id, profile_id, area, language, report_text, word_count, price,
                    currency, transaction_id, purchase_date, generated_at, writer)
                SELECT gen_random_uuid(), $1, $2, area, 'en', 'text', 1, 4.99, 'USD', $3, now(), now(), 'test'
                FROM unnest(ARRAY['finances', 'career', 'relationships', 'health', 'general']) AS area
                """,
                [user.uuid, p1.uuid, transaction]
            )
            for language in ["en", "uk"] {
                try database.execute(
                    """
                    INSERT INTO report_purchases (id, user_id, profile_id, area, language, report_text, word_count,
                        price, currency, transaction_id, purchase_date, generated_at, writer)
                    VALUES (gen_random_uuid(), $1, $2, 'general', $3, 'text', 1, 4.99, 'USD', $4, now(), now(), 'test')
                    """,
                    [user.uuid, p2.uuid, language, transaction]
                )
            }
        }
        let newestFirst = try await ledger.pool.withConnection { database in
            try database.query(
                "SELECT id, profile_id FROM report_purchases WHERE user_id = $1 ORDER BY created_at DESC, id DESC",
                [user.uuid]
            ).map { (ReportID(try $0.decode(UUID.self, "id")).description, try $0.decode(UUID.self, "profile_id")) }
        }
        #expect(newestFirst.count == 7)
        for (filter, wanted) in [
            ("", newestFirst.map(\.0)), ("&profileId=\(p1)", newestFirst.filter { $0.1 == p1.uuid }.map(\.0)),
        ] {
            var listed: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                let query = "limit=2" + filter + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try await Self.request("GET", "\(base)/v1/reports?\(query)", token: token)
                #expect(page.status == 200, "\(String(describing: page.json))")
                listed += page.json?["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
                cursor = page.json?["nextCursor"]?.stringValue
                pages += 1
            } while cursor != nil && pages < 10
            #expect(listed == wanted, "filter \(filter)")
        }

        // Bounds: limit 1…100, a cursor of this list only.
        let profilesCursor = try #require(
            try await Self.request("GET", "\(base)/v1/profiles?limit=1", token: token).json?["nextCursor"]?.stringValue
        )
        for path in ["/v1/profiles", "/v1/ledger", "/v1/reports"] {
            for limit in ["0", "101", "-1", "abc", "1.5", "1&limit=2", "99999999999999999999", ""] {
                let answer = try await Self.request("GET", "\(base)\(path)?limit=\(limit)", token: token)
                #expect(answer.status == 400 && answer.json?["code"] == "invalid-limit", "\(path) limit=\(limit)")
            }
            #expect(try await Self.request("GET", "\(base)\(path)?limit=100", token: token).status == 200)
            for cursor in ["!!!", "x", String(repeating: "A", count: 600), "cDpNZQ==", "a&cursor=b"] {
                let answer = try await Self.request("GET", "\(base)\(path)?cursor=\(cursor)", token: token)
                #expect(answer.status == 400 && answer.json?["code"] == "invalid-cursor", "\(path) cursor=\(cursor)")
            }
        }
        for path in ["/v1/ledger", "/v1/reports"] {
            let answer = try await Self.request("GET", "\(base)\(path)?cursor=\(profilesCursor)", token: token)
            #expect(answer.status == 400 && answer.json?["code"] == "invalid-cursor", "a profiles cursor for \(path)")
        }

        // Bodies refused before anything is published.
        let purchases: [(JSONValue, Int, String)] = [
            ([:], 422, "missing-field"),
            (["signedTransaction": "a.b.c", "transactionId": "1"], 422, "conflicting-fields"),
            (["signedTransaction": 5], 422, "invalid-field-type"),
            (["signedTransaction": "not a jws"], 422, "invalid-signed-transaction"),
            (["transactionId": "12ab"], 422, "invalid-transaction-id"),
            (["transactionId": .string(String(repeating: "1", count: 65))], 422, "invalid-transaction-id"),
            ([1, 2], 400, "invalid-json"),
        ]
        for (body, status, code) in purchases {
            let answer = try await Self.request("POST", "\(base)/v1/purchases", token: token, body: body)
            #expect(answer.status == status && answer.json?["code"]?.stringValue == code, "\(body)")
        }
        let reports: [(JSONValue, Int, String)] = [
            (["area": "career", "language": "en"], 422, "missing-field"),
            (["profileId": "nope", "area": "career", "language": "en"], 422, "invalid-id"),
            (["profileId": .string(p1.description), "area": "love", "language": "en"], 422, "unknown-area"),
            (["profileId": .string(p1.description), "area": "career", "language": "fr"], 422, "unknown-language"),
            (["profileId": .string(p1.description), "area": 1, "language": "en"], 422, "invalid-field-type"),
            (["profileId": .string(UUID().uuidString), "area": "career", "language": "en"], 404, "profile-not-found"),
        ]
        for (body, status, code) in reports {
            let answer = try await Self.request("POST", "\(base)/v1/reports", token: token, body: body)
            #expect(answer.status == status && answer.json?["code"]?.stringValue == code, "\(body)")
        }
        // Without a token: 401 on every route.
        for (method, path) in [
            ("GET", "/v1/profiles"), ("GET", "/v1/profiles/\(p1)"), ("PUT", "/v1/profiles/\(p1)"),
            ("DELETE", "/v1/profiles/\(p1)"), ("GET", "/v1/profiles/\(p1)/chart"), ("POST", "/v1/purchases"),
            ("GET", "/v1/credits"), ("GET", "/v1/ledger"), ("POST", "/v1/reports"), ("GET", "/v1/reports"),
            ("GET", "/v1/reports/\(UUID())"),
        ] {
            #expect(try await Self.request(method, base + path).status == 401, "\(method) \(path)")
        }
        #expect(!gateway.processes.output.contains("status not in the route table"), "\(gateway.processes.output)")
    }

    /// Migration 0015: the gateway's role reads what its routes show and deletes profiles; it
    /// reads nothing else of those tables (what a report cost, the App Store's payloads) and
    /// changes nothing else.
    @Test func theGatewaysRoleReadsOnlyWhatItsRoutesShow() async throws {
        let pool = PostgresPool(
            configuration: try PostgresConfiguration(url: try await GatewayHarness.gatewayDatabaseURL()),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        defer { Task { await pool.close() } }
        let allowed: [String] = [
            """
            SELECT id, user_id, name, birth_date, birth_time, timezone, latitude, longitude, location_name, created_at,
                updated_at FROM user_profiles LIMIT 1
            """,
            "SELECT id, profile_id, chart_data, house_system, engine_version, updated_at FROM birth_charts LIMIT 1",
            """
            SELECT id, user_id, profile_id, area, language, report_text, word_count, writer, generated_at, created_at
            FROM report_purchases LIMIT 1
            """,
            """
            SELECT report_area, count(*) FROM purchase_credits
            WHERE user_id = gen_random_uuid() AND NOT consumed AND NOT revoked GROUP BY report_area
            """,
            """
            SELECT id, user_id, credit_id, transaction_id, entry, job_id, profile_id, report_area, report_language,
                reason, created_at FROM credit_ledger LIMIT 1
            """,
            "DELETE FROM user_profiles WHERE id = gen_random_uuid()",
        ]
        let refused: [String] = [
            "SELECT cost_usd FROM report_purchases", "SELECT price FROM report_purchases",
            "SELECT llm_model, prompt_tokens FROM report_purchases", "SELECT credit_id FROM report_purchases",
            "SELECT * FROM report_purchases", "SELECT input_digest FROM birth_charts",
            "SELECT id FROM purchase_credits", "SELECT user_profile_id FROM purchase_credits",
            "SELECT transaction_payload FROM purchase_records", "SELECT notification_uuid FROM credit_ledger",
            "SELECT payload FROM store_notifications", "UPDATE purchase_credits SET revoked = revoked",
            "INSERT INTO credit_ledger (user_id) VALUES (gen_random_uuid())", "DELETE FROM birth_charts",
            "DELETE FROM report_purchases", "UPDATE user_profiles SET name = name", "UPDATE birth_charts SET id = id",
            "INSERT INTO user_profiles (id) VALUES (gen_random_uuid())", "DELETE FROM users",
        ]
        for sql in allowed {
            await #expect(throws: Never.self, "\(sql)") {
                try await pool.withConnection { _ = try $0.query(SQL(unsafeSQL: sql)) }
            }
        }
        for sql in refused {
            do {
                try await pool.withConnection { _ = try $0.query(SQL(unsafeSQL: sql)) }
                Issue.record("the gateway's role may: \(sql)")
            } catch let error as PostgresError {
                #expect(error.sqlState == "42501", "\(sql): \(error)")
            }
        }
    }
}
