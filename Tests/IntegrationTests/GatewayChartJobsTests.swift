import AstroDomain
import Foundation
import Maintenance
import Postgres
import Testing
import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The chart jobs beyond the natal chart through the real gateway: requests refused with the
/// job's own codes before anything is published, other users' profiles, idempotency, and the
/// stored results served to their user only.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct GatewayChartJobsTests {
    typealias HTTPAnswer = GatewayHarness.HTTPAnswer

    static func request(
        _ method: String,
        _ url: String,
        token: String?,
        body: JSONValue? = nil,
        headers: [String: String] = [:]
    ) async throws -> HTTPAnswer {
        try await GatewayHarness.request(method, url, token: token, body: body, headers: headers)
    }

    /// A profile of the caller with this name, through the gateway; waits for its chart.
    static func profile(
        _ base: String,
        token: String,
        name: String,
        birthDate: String = "1990-10-07",
        logs: () -> String
    ) async throws -> String {
        let body = GatewayResourcesTests.profile(["name": .string(name), "birthDate": .string(birthDate)])
        let created = try await request("POST", "\(base)/v1/profiles", token: token, body: body)
        let jobID = try GatewayResourcesTests.accepted(created)
        let job = try await GatewayResourcesTests.finished(base, jobID, token: token, logs: logs)
        #expect(job["status"] == "succeeded", "\(job)")
        return try #require(job["result"]?["profileId"]?.stringValue)
    }

    /// The chart jobs the gateway recorded for `user` (every accepted request records one).
    static func recordedChartJobs(_ pool: PostgresPool, user: UserID) async throws -> Int {
        try await pool.withConnection { database in
            try database.query(
                "SELECT count(*)::int AS n FROM gateway_jobs WHERE user_id = $1 AND kind LIKE 'chart.%' AND kind <> 'chart.calculate'",
                [user.uuid]
            ).first?.decode(Int.self, "n") ?? -1
        }
    }

    static func adminPool() async throws -> PostgresPool {
        PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
    }

    @Test func badRequestsAreRefusedBeforeAnythingIsPublished() async throws {
        let gateway = try await GatewayHarness.launch(chartWorker: true, label: "chart-jobs-refusals")
        defer { gateway.processes.stop() }
        let base = gateway.base
        let logs = { gateway.processes.output }
        let pool = try await Self.adminPool()
        defer { Task { await pool.close() } }
        let (userText, token) = try await GatewayHarness.register(base)
        let user = try #require(UserID(userText))
        let (_, otherToken) = try await GatewayHarness.register(base)
        let me = try await Self.profile(base, token: token, name: "Me", logs: logs)
        let partner = try await Self.profile(base, token: token, name: "Partner", birthDate: "1992-03-14", logs: logs)
        let stranger = try await Self.profile(base, token: otherToken, name: "Stranger", logs: logs)
        // A profile of the caller whose chart is not stored yet (as the chart-worker writes it).
        let chartless = ProfileID.random()
        try await pool.withConnection { database in
            _ = try database.execute(
                """
                INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                VALUES ($1, $2, 'Chartless', '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52)
                """,
                [chartless.uuid, user.uuid]
            )
        }

        let refusals: [(path: String, body: JSONValue?, raw: String?, status: Int, code: String)] = [
            ("\(me)/synastry", nil, "[1, 2]", 400, "invalid-json"),
            ("\(me)/synastry", nil, "{", 400, "invalid-json"),
            ("\(me)/synastry", ["partnerProfileId": .string(partner), "jobId": "x"], nil, 400, "unexpected-field"),
            ("\(me)/synastry", ["partnerProfileId": .string(partner), "userId": "x"], nil, 400, "unexpected-field"),
            ("\(me)/synastry", [:], nil, 422, "missing-field"),
            ("\(me)/synastry", ["partnerProfileId": 7], nil, 422, "invalid-field-type"),
            ("\(me)/synastry", ["partnerProfileId": "not-a-uuid"], nil, 422, "invalid-id"),
            ("\(me)/synastry", ["partnerProfileId": .string(me)], nil, 422, "same-profile"),
            ("\(me)/synastry", ["partnerProfileId": .string(partner), "angleMaxOrb": 9], nil, 422, "invalid-orb"),
            ("\(me)/synastry", ["partnerProfileId": .string(stranger)], nil, 404, "partner-not-found"),
            ("\(stranger)/synastry", ["partnerProfileId": .string(me)], nil, 404, "profile-not-found"),
            (
                "\(me)/synastry", ["partnerProfileId": .string(chartless.description)], nil, 409,
                "partner-chart-not-found"
            ),
            ("\(me)/transits", ["from": "2027-01-01"], nil, 422, "missing-field"),
            ("\(me)/transits", ["from": "2027-01-01", "to": "2027-13-01"], nil, 422, "invalid-date"),
            ("\(me)/transits", ["from": "2027-01-01", "to": "2028-01-03"], nil, 422, "invalid-range"),
            ("\(me)/transits", ["from": "2027-02-01", "to": "2027-01-01"], nil, 422, "invalid-range"),
            ("\(me)/transits", ["from": "1899-12-31", "to": "1900-02-01"], nil, 422, "invalid-range"),
            ("\(chartless)/transits", ["from": "2027-01-01", "to": "2027-02-01"], nil, 409, "chart-not-found"),
            ("\(me)/returns", ["kind": "lunar-return"], nil, 422, "invalid-kind"),
            ("\(me)/returns", ["kind": "solar-return"], nil, 422, "invalid-year"),
            ("\(me)/returns", ["kind": "solar-return", "year": 2101], nil, 422, "invalid-year"),
            ("\(me)/returns", ["kind": "progressed"], nil, 422, "missing-field"),
            (
                "\(me)/returns", ["kind": "solar-return", "year": 2027, "place": ["latitude": 91, "longitude": 0]],
                nil, 422, "invalid-place"
            ),
            ("\(me)/wheels", ["wheel": "pie"], nil, 422, "invalid-wheel"),
            ("\(me)/wheels", ["wheel": "natal", "theme": "sepia"], nil, 422, "invalid-theme"),
            ("\(me)/wheels", ["wheel": "synastry"], nil, 422, "missing-field"),
            ("\(me)/wheels", ["wheel": "natal", "partnerProfileId": .string(partner)], nil, 422, "invalid-field-type"),
            (
                "\(me)/wheels", ["wheel": "synastry", "at": "2027-01-01", "partnerProfileId": .string(partner)], nil,
                422,
                "invalid-field-type"
            ),
            ("\(me)/wheels", ["wheel": "transits", "at": "3000-01-01"], nil, 422, "invalid-range"),
            (
                "\(me)/wheels", ["wheel": "synastry", "partnerProfileId": .string(stranger)], nil, 404,
                "partner-not-found"
            ),
            ("not-a-uuid/wheels", ["wheel": "natal"], nil, 404, "not-found"),
        ]
        for refusal in refusals {
            let url = "\(base)/v1/profiles/\(refusal.path)"
            let answer: HTTPAnswer
            if let raw = refusal.raw {
                var request = URLRequest(url: URL(string: url)!)
                request.httpMethod = "POST"
                request.httpBody = Data(raw.utf8)
                request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                let (data, response) = try await URLSession.shared.data(for: request)
                answer = HTTPAnswer(
                    status: (response as! HTTPURLResponse).statusCode,
                    headers: [:],
                    json: try? JSONValue.parse(data)
                )
            } else {
                answer = try await Self.request("POST", url, token: token, body: refusal.body)
            }
            #expect(
                answer.status == refusal.status && answer.json?["code"]?.stringValue == refusal.code,
                "\(refusal.path) \(String(describing: refusal.body ?? .string(refusal.raw ?? ""))): \(answer.status) \(String(describing: answer.json))"
            )
        }
        #expect(try await Self.recordedChartJobs(pool, user: user) == 0)
        // Without a token: 401, nothing recorded either.
        let anonymous = try await Self.request(
            "POST",
            "\(base)/v1/profiles/\(me)/synastry",
            token: nil,
            body: ["partnerProfileId": .string(partner)]
        )
        #expect(anonymous.status == 401)

        // A good request: 202 with the job; the same Idempotency-Key answers the same job, and
        // with another body 422.
        let key = ["Idempotency-Key": "synastry-\(UUID())"]
        let body: JSONValue = ["partnerProfileId": .string(partner), "angleMaxOrb": 3]
        let first = try await Self.request(
            "POST",
            "\(base)/v1/profiles/\(me)/synastry",
            token: token,
            body: body,
            headers: key
        )
        let jobID = try GatewayResourcesTests.accepted(first)
        let again = try await Self.request(
            "POST",
            "\(base)/v1/profiles/\(me)/synastry",
            token: token,
            body: body,
            headers: key
        )
        #expect(try GatewayResourcesTests.accepted(again) == jobID)
        let reused = try await Self.request(
            "POST",
            "\(base)/v1/profiles/\(partner)/synastry",
            token: token,
            body: ["partnerProfileId": .string(me)],
            headers: key
        )
        #expect(reused.status == 422 && reused.json?["code"] == "idempotency-key-reused")
        #expect(try await Self.recordedChartJobs(pool, user: user) == 1)
        // The job is the caller's to read; another user's token does not find it.
        let job = try await Self.request("GET", "\(base)/v1/jobs/\(jobID)", token: token)
        #expect(job.status == 200 && job.json?["type"] == "chart.synastry", "\(String(describing: job.json))")
        #expect(try await Self.request("GET", "\(base)/v1/jobs/\(jobID)", token: otherToken).status == 404)

        // Results: unknown and malformed ids 404, a bad format 400.
        for id in [UUID().uuidString.lowercased(), "nope"] {
            let missing = try await Self.request("GET", "\(base)/v1/chart-results/\(id)", token: token)
            #expect(missing.status == 404 && missing.json?["code"] == "not-found", "\(id)")
        }
        let badFormat = try await Self.request(
            "GET",
            "\(base)/v1/chart-results/\(UUID().uuidString.lowercased())?format=xml",
            token: token
        )
        #expect(badFormat.status == 400 && badFormat.json?["code"] == "invalid-format")
        #expect(!gateway.processes.output.contains("status not in the route table"))
    }
    /// Waits for a chart job through `GET /v1/jobs/{id}?wait=`; returns its result.
    static func result(_ base: String, _ jobID: String, token: String, logs: () -> String) async throws -> JSONValue {
        let job = try await GatewayResourcesTests.finished(base, jobID, token: token, logs: logs)
        #expect(job["status"] == "succeeded", "\(job)\n\(logs())")
        return try #require(job["result"])
    }

    /// Two profiles → a synastry through the gateway and the real chart-worker → the stored result
    /// served to its user only; the same request again finds it (cached, same id); a synastry
    /// wheel as SVG, likewise.
    @Test func aSynastryFromRequestToStoredResult() async throws {
        let gateway = try await GatewayHarness.launch(chartWorker: true, label: "chart-jobs-journey")
        defer { gateway.processes.stop() }
        let base = gateway.base
        let logs = { gateway.processes.output }
        let pool = try await Self.adminPool()
        defer { Task { await pool.close() } }
        let (_, token) = try await GatewayHarness.register(base)
        let (_, otherToken) = try await GatewayHarness.register(base)
        let me = try await Self.profile(base, token: token, name: "Me", logs: logs)
        let partner = try await Self.profile(base, token: token, name: "Partner", birthDate: "1992-03-14", logs: logs)

        // The caller's event stream, open before the job: chart.computed reaches it.
        let stream = try await GatewayEventsTests.SSEClient(base, token: token)
        defer { stream.close() }
        try await stream.waitUntilOpen()

        let body: JSONValue = ["partnerProfileId": .string(partner)]
        let first = try await Self.request("POST", "\(base)/v1/profiles/\(me)/synastry", token: token, body: body)
        let firstJob = try GatewayResourcesTests.accepted(first)
        let firstResult = try await Self.result(base, firstJob, token: token, logs: logs)
        #expect(firstResult["kind"] == "synastry" && firstResult["cached"] == .bool(false), "\(firstResult)")
        let resultID = try #require(firstResult["resultId"]?.stringValue)
        let computed = try await stream.waitFor("chart.computed of the synastry") {
            $0.type == "chart.computed" && $0.data?["jobId"]?.stringValue == firstJob
        }
        #expect(computed.data?["resultId"]?.stringValue == resultID && computed.data?["kind"] == "synastry")

        let stored = try await Self.request("GET", "\(base)/v1/chart-results/\(resultID)", token: token)
        #expect(stored.status == 200, "\(String(describing: stored.json))")
        #expect(stored.headers["content-type"] == "application/json")
        #expect(stored.headers["etag"] == "\"\(resultID)\"")
        #expect(stored.headers["cache-control"] == "private, max-age=3600")
        #expect(stored.json?["id"]?.stringValue == resultID)
        #expect(stored.json?["kind"] == "synastry")
        #expect(stored.json?["profileId"]?.stringValue == me)
        #expect(stored.json?["partnerProfileId"]?.stringValue == partner)
        #expect(stored.json?["parameters"]?["partnerProfileId"]?.stringValue == partner)
        for part in ["synastry", "compatibility", "composite", "davison"] {
            #expect(stored.json?["result"]?[part] != nil, "result.\(part) missing")
        }
        let aspects = stored.json?["result"]?["synastry"]?["aspects"]?.arrayValue ?? []
        #expect(!aspects.isEmpty, "no synastry aspects: \(String(describing: stored.json?["result"]?["synastry"]))")

        // Revalidation, another user, a format the result does not have.
        let unchanged = try await Self.request(
            "GET",
            "\(base)/v1/chart-results/\(resultID)",
            token: token,
            headers: ["If-None-Match": "\"\(resultID)\""]
        )
        #expect(unchanged.status == 304)
        for headers in [[:], ["If-None-Match": "\"\(resultID)\""]] {
            let foreign = try await Self.request(
                "GET",
                "\(base)/v1/chart-results/\(resultID)",
                token: otherToken,
                headers: headers
            )
            #expect(foreign.status == 404 && foreign.json?["code"] == "not-found", "\(headers)")
        }
        let notSVG = try await Self.request("GET", "\(base)/v1/chart-results/\(resultID)?format=svg", token: token)
        #expect(notSVG.status == 400 && notSVG.json?["code"] == "invalid-format")

        // A result unused for hours is touched when served (retention reads last_used_at).
        try await pool.withConnection { database in
            _ = try database.execute(
                "UPDATE chart_results SET last_used_at = now() - interval '2 hours' WHERE id = $1::uuid",
                [resultID]
            )
        }
        #expect(try await Self.request("GET", "\(base)/v1/chart-results/\(resultID)", token: token).status == 200)
        let touched = try await pool.withConnection { database in
            try database.query(
                "SELECT last_used_at > now() - interval '1 minute' AS recent FROM chart_results WHERE id = $1::uuid",
                [resultID]
            ).first?.decode(Bool.self, "recent")
        }
        #expect(touched == true)

        // The same request again: a new job, the same stored result, nothing computed.
        let second = try await Self.request("POST", "\(base)/v1/profiles/\(me)/synastry", token: token, body: body)
        let secondResult = try await Self.result(
            base,
            try GatewayResourcesTests.accepted(second),
            token: token,
            logs: logs
        )
        #expect(secondResult["resultId"]?.stringValue == resultID)
        #expect(secondResult["cached"] == .bool(true))

        // A synastry wheel: SVG with both charts' planets; again, the same id from the cache.
        let wheelBody: JSONValue = ["wheel": "synastry", "partnerProfileId": .string(partner), "theme": "dark"]
        var wheelIDs: [String] = []
        for round in 0..<2 {
            let wheel = try await Self.request(
                "POST",
                "\(base)/v1/profiles/\(me)/wheels",
                token: token,
                body: wheelBody
            )
            let wheelResult = try await Self.result(
                base,
                try GatewayResourcesTests.accepted(wheel),
                token: token,
                logs: logs
            )
            #expect(wheelResult["kind"] == "wheel" && wheelResult["cached"] == .bool(round == 1), "\(wheelResult)")
            wheelIDs.append(try #require(wheelResult["resultId"]?.stringValue))
        }
        #expect(wheelIDs.count == 2 && wheelIDs[0] == wheelIDs[1] && wheelIDs[0] != resultID)
        let svg = try await GatewayChartWheelTests.get("\(base)/v1/chart-results/\(wheelIDs[0])", token: token)
        #expect(svg.status == 200)
        #expect(svg.headers["content-type"] == "image/svg+xml; charset=utf-8")
        let parsed = WheelXML.parse(svg.body)
        #expect(parsed.isValid && parsed.rootName == "svg", "\(parsed.error ?? "")")
        #expect(
            parsed.titles.filter { $0.hasPrefix("Sun ") && !$0.contains(", orb ") }.count == 2,
            "both rings' Sun: \(parsed.titles.prefix(40))"
        )
        let wheelJSON = try await Self.request(
            "GET",
            "\(base)/v1/chart-results/\(wheelIDs[0])?format=json",
            token: token
        )
        #expect(wheelJSON.json?["kind"] == "wheel")
        #expect(wheelJSON.json?["svg"]?.stringValue?.utf8.count == svg.body.count)
        #expect(wheelJSON.json?["parameters"]?["theme"] == "dark")

        // Transits for a month and a solar return: their stored documents, under their own kinds.
        for (route, body, kind) in [
            ("transits", ["from": "2027-01-01", "to": "2027-02-01"] as JSONValue, "transits"),
            ("returns", ["kind": "solar-return", "year": 2027] as JSONValue, "solar-return"),
            ("returns", ["kind": "progressed", "date": "2027-06-01"] as JSONValue, "progressed"),
        ] {
            let asked = try await Self.request("POST", "\(base)/v1/profiles/\(me)/\(route)", token: token, body: body)
            let done = try await Self.result(base, try GatewayResourcesTests.accepted(asked), token: token, logs: logs)
            #expect(done["kind"]?.stringValue == kind, "\(done)")
            let id = try #require(done["resultId"]?.stringValue)
            let served = try await Self.request("GET", "\(base)/v1/chart-results/\(id)", token: token)
            #expect(served.status == 200 && served.json?["kind"]?.stringValue == kind)
            guard case .object(let document)? = served.json?["result"] else {
                Issue.record("\(kind): no result document in \(String(describing: served.json))")
                continue
            }
            #expect(!document.isEmpty)
        }
        #expect(!gateway.processes.output.contains("status not in the route table"))
    }
}

/// Issue 29, F7 through the real gateway: at the user's quota of computed results a chart request
/// is answered 429 `chart-quota-exceeded` with `Retry-After` and nothing is published; a transit
/// result stored compact is served whole; results never read are deleted after
/// `CHART_RESULT_UNREAD_RETENTION` while read ones stay.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct GatewayChartResultBoundsTests {
    @Test func theQuotaAnswers429AndTransitsAreServedWholeAndUnreadResultsGo() async throws {
        let gateway = try await GatewayHarness.launch(
            chartWorker: true,
            environment: [ChartResultQuota.variable: "2"],
            label: "chart-jobs-quota"
        )
        defer { gateway.processes.stop() }
        let base = gateway.base
        let logs = { gateway.processes.output }
        let pool = try await GatewayChartJobsTests.adminPool()
        defer { Task { await pool.close() } }
        let (user, token) = try await GatewayHarness.register(base)
        let userID = try #require(UserID(user))
        let me = try await GatewayChartJobsTests.profile(base, token: token, name: "Me", logs: logs)
        var resultIDs: [String] = []
        for (from, to) in [("2026-03-01", "2026-03-31"), ("2026-04-01", "2026-04-30")] {
            let answer = try await GatewayChartJobsTests.request(
                "POST",
                "\(base)/v1/profiles/\(me)/transits",
                token: token,
                body: ["from": .string(from), "to": .string(to)]
            )
            let job = try GatewayResourcesTests.accepted(answer)
            let result = try await GatewayChartJobsTests.result(base, job, token: token, logs: logs)
            #expect(result["cached"] == .bool(false))
            resultIDs.append(try #require(result["resultId"]?.stringValue))
        }
        // The third: refused, and no job recorded or published.
        let refused = try await GatewayChartJobsTests.request(
            "POST",
            "\(base)/v1/profiles/\(me)/transits",
            token: token,
            body: ["from": "2026-05-01", "to": "2026-05-31"]
        )
        #expect(refused.status == 429, "\(String(describing: refused.json))")
        #expect(refused.json?["code"] == "chart-quota-exceeded")
        let retryAfter = try #require(refused.headers["retry-after"].flatMap(Int.init))
        #expect((1...86_400).contains(retryAfter))
        #expect(try await GatewayChartJobsTests.recordedChartJobs(pool, user: userID) == 2)
        let metrics = try await GatewayHarness.rawGet(GatewayHarness.metricsURL(base))
        #expect(metrics.contains(#"gateway_rate_limited_total{limit="chart-results"} 1"#), "\(metrics)")

        let first = resultIDs[0]
        // Served whole: the full TransitReport, though the row holds the compact form.
        let served = try await GatewayChartJobsTests.request(
            "GET",
            "\(base)/v1/chart-results/\(resultIDs[0])",
            token: token
        )
        #expect(served.status == 200)
        let document = try #require(served.json)
        #expect(document["kind"] == "transits" && document["id"]?.stringValue == resultIDs[0])
        let transits = try #require(document["result"]?["transits"]?.arrayValue)
        #expect(!transits.isEmpty)
        #expect(transits.first?["transiting"]?.stringValue != nil && transits.first?["hits"]?.arrayValue != nil)
        #expect(document["result"]?["format"] == nil)
        let stored = try await pool.withConnection { database in
            try database.query(
                "SELECT result::text AS r, bytes, read_at IS NOT NULL AS read FROM chart_results WHERE id = $1::uuid",
                [first]
            ).first.map {
                (
                    text: try $0.decode(String.self, "r"), bytes: try $0.decode(Int.self, "bytes"),
                    read: try $0.decode(Bool.self, "read")
                )
            }
        }
        let row = try #require(stored)
        #expect(row.read, "serving a result marks it read")
        let compact = try JSONValue.parse(Data(row.text.utf8))
        #expect(TransitReport.isCompact(compact))
        #expect(
            document["result"] == (try JSONValue.parse(Data(try TransitReport.expandedJSON(stored: row.text).utf8)))
        )
        #expect(row.bytes * 4 < (document["result"]?.jsonString().utf8.count ?? 0))

        // Both computed three days ago; only the first was read: the second goes.
        _ = try await pool.withConnection { database in
            try database.execute(
                "UPDATE chart_results SET created_at = now() - interval '3 days' WHERE user_id = $1",
                [userID.uuid]
            )
        }
        let maintenance = PostgresPool(
            configuration: try PostgresConfiguration(
                url: try await RuntimeTestEnvironment.databaseURL(as: .maintenance)
            ),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        defer { Task { await maintenance.close() } }
        let report = try await Retention(
            pool: maintenance,
            configuration: .defaults,
            logger: RuntimeTestEnvironment.logger
        )
        .run(now: Date(), dryRun: false, deadline: .now + .seconds(60))
        #expect((report.deleted[.chartResults] ?? 0) >= 1)
        let left = try await pool.withConnection { database in
            try database.query("SELECT id::text AS id FROM chart_results WHERE user_id = $1", [userID.uuid]).map {
                try $0.decode(String.self, "id")
            }
        }
        #expect(left == [resultIDs[0]])
        #expect(!gateway.processes.output.contains("status not in the route table"))
    }
}
