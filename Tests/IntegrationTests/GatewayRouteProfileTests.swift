import AstroDomain
import Billing
import Foundation
import Hummingbird
import Postgres
import ReportService
import Testing
import WorkerRuntime

@testable import Gateway

/// Profiles and their charts, purchases, credits, the ledger and reports, in process
/// (RouteGateway). What a worker would have stored (charts, credits, reports) is written by the
/// workers' own handlers or as they write it, without their processes.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GatewayRouteProfileTests {
    static let profileBody = GatewayHarness.profile

    /// `profileBody` with `changes` to its `profile`.
    static func profile(_ changes: [String: JSONValue]) -> JSONValue {
        guard case .object(var profile)? = profileBody["profile"] else { return profileBody }
        for (key, value) in changes { profile[key] = value }
        return ["profile": .object(profile)]
    }

    /// `body` with the top-level `dstPolicy`.
    static func dstPolicy(_ policy: String, _ body: JSONValue) -> JSONValue {
        guard case .object(var members) = body else { return body }
        members["dstPolicy"] = .string(policy)
        return .object(members)
    }

    /// A stored career report of `user` for `profile`, as the billing- and report-workers' handlers
    /// write it from a purchased credit; returns its id.
    static func seedReport(
        _ gateway: RouteGateway,
        _ user: RouteGateway.User,
        _ profile: ProfileID
    ) async throws
        -> String
    {
        let ledger = try await BillingLedgerIntegrationTests()
        defer { Task { await ledger.pool.close() } }
        let purchase = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.single",
            user: user.id
        )
        _ = try await ledger.purchase(purchase.jws, user: user.id)
        let requested = try await ledger.request(user.id, profile, .career, .en)
        let message = try #require(requested.messages.first { $0.routingKey == "report.generate" }, "\(requested)")
        let generate = try JSONDecoder().decode(JSONValue.self, from: message.body)
        let written = try await ledger.run(
            ReportGenerateHandler(writer: ReportJourneyTests.writer),
            generate,
            type: .reportGenerate
        )
        try #require(written.status == .succeeded, "\(written)")
        let id = try await gateway.admin.withConnection { database in
            try database.query("SELECT id FROM report_purchases WHERE profile_id = $1", [profile.uuid]).first?
                .decode(UUID.self, "id")
        }
        return try #require(id).uuidString.lowercased()
    }

    // MARK: Profiles

    @Test func createProfileQueuesAChartCalculateForTheCallerAndRefusesBadBirthData() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let answer = try await gateway.call(.post, "/v1/profiles", token: user.token, json: Self.profileBody)
            let (jobID, body) = try await gateway.expectAccepted(answer, .chartCalculate, user: user)
            #expect(body["userId"] == .string(user.id.description))
            #expect(body["profile"]?["name"] == "Me")
            #expect(body["profile"]?["id"] == nil || body["profile"]?["id"] == .null)
            // The 202 names the profile the job creates: the chart-worker derives the same id.
            #expect(answer.json?["profileId"] == .string(ProfileID.created(by: jobID).description), "\(answer)")
            // The job is readable by its user.
            let job = try await gateway.call(.get, "/v1/jobs/\(jobID)", token: user.token)
            #expect(job.json?["type"] == "chart.calculate")

            let refusals: [(body: JSONValue?, raw: String?, status: Int, code: String, field: String?)] = [
                (nil, "[]", 400, "invalid-json", nil),
                (nil, "{", 400, "invalid-json", nil),
                (Self.profile(["id": .string(UUID().uuidString)]), nil, 400, "unexpected-field", "profile.id"),
                ([:], nil, 422, "missing-field", "profile"),
                (Self.profile(["latitude": 91]), nil, 422, "latitude-out-of-range", "profile.latitude"),
                (Self.profile(["longitude": -181]), nil, 422, "longitude-out-of-range", "profile.longitude"),
                (Self.profile(["timezone": "Mars/Olympus"]), nil, 422, "unknown-timezone", "profile.timezone"),
                (Self.profile(["birthDate": "1990-02-30"]), nil, 422, "invalid-birth-date", "profile.birthDate"),
                (Self.profile(["birthTime": "25:00"]), nil, 422, "invalid-birth-time", "profile.birthTime"),
                (Self.profile(["name": ""]), nil, 422, "invalid-name", "profile.name"),
                (Self.profile(["latitude": "north"]), nil, 422, "invalid-field-type", "profile.latitude"),
            ]
            for refusal in refusals {
                let refused = try await gateway.call(
                    .post,
                    "/v1/profiles",
                    token: user.token,
                    json: refusal.body,
                    raw: refusal.raw
                )
                gateway.expectProblem(
                    refused,
                    refusal.status,
                    refusal.code,
                    field: refusal.field,
                    "\(refusal.body.map { "\($0)" } ?? refusal.raw ?? "")"
                )
            }
            #expect(try await gateway.recordedJobs(user) == 1, "a refused request records no job")
            let oversized = try await gateway.call(
                .post,
                "/v1/profiles",
                token: user.token,
                raw: #"{"x": ""# + String(repeating: "a", count: 17_000) + #""}"#
            )
            gateway.expectProblem(oversized, 413, "body-too-large")
        }
    }

    /// What the chart-worker would refuse on the user's input is refused before anything is
    /// published: a name another of the user's profiles has (409), a birth time in a
    /// daylight-saving gap or overlap (422).
    @Test func profileWritesAreRefusedEarlyForATakenNameOrALocalTimeThatIsNotOne() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let taken = try await gateway.seedProfile(user, name: "Taken")
            let other = try await gateway.seedProfile(user, name: "Other")
            let clash = try await gateway.call(
                .post,
                "/v1/profiles",
                token: user.token,
                json: Self.profile(["name": "Taken"])
            )
            gateway.expectProblem(clash, 409, "duplicate-profile-name", field: "profile.name", "POST, a taken name")
            let renamed = try await gateway.call(
                .put,
                "/v1/profiles/\(other)",
                token: user.token,
                json: Self.profile(["name": "Taken"])
            )
            gateway.expectProblem(renamed, 409, "duplicate-profile-name", field: "profile.name", "PUT, a taken name")
            // Kyiv moved its clocks from 03:00 to 04:00 on 2021-03-28 and back on 2021-10-31.
            for (date, code) in [("2021-03-28", "nonexistent-local-time"), ("2021-10-31", "ambiguous-local-time")] {
                let refused = try await gateway.call(
                    .post,
                    "/v1/profiles",
                    token: user.token,
                    json: Self.profile(["name": "Dst", "birthDate": .string(date), "birthTime": "03:30"])
                )
                gateway.expectProblem(refused, 422, code, field: "profile.birthTime", "\(date) 03:30 in Kyiv")
            }
            #expect(try await gateway.recordedJobs(user) == 0, "a refused write records or publishes no job")

            // A profile keeps its own name; another user may use it; a policy resolves the gap.
            _ = try await gateway.expectAccepted(
                try await gateway.call(
                    .put,
                    "/v1/profiles/\(taken)",
                    token: user.token,
                    json: Self.profile(["name": "Taken"])
                ),
                .chartCalculate,
                user: user
            )
            let stranger = try await gateway.register()
            _ = try await gateway.expectAccepted(
                try await gateway.call(
                    .post,
                    "/v1/profiles",
                    token: stranger.token,
                    json: Self.profile(["name": "Taken"])
                ),
                .chartCalculate,
                user: stranger
            )
            _ = try await gateway.expectAccepted(
                try await gateway.call(
                    .post,
                    "/v1/profiles",
                    token: user.token,
                    json: Self.dstPolicy(
                        "later",
                        Self.profile(["name": "Dst", "birthDate": "2021-03-28", "birthTime": "03:30"])
                    )
                ),
                .chartCalculate,
                user: user
            )

            // A retry of an accepted request replays its 202, although its job named the profile since.
            let key = ["Idempotency-Key": UUID().uuidString]
            let first = try await gateway.call(
                .post,
                "/v1/profiles",
                token: user.token,
                json: Self.profile(["name": "Fresh"]),
                headers: key
            )
            let (jobID, _) = try await gateway.expectAccepted(first, .chartCalculate, user: user)
            _ = try await gateway.seedProfile(user, name: "Fresh")
            let retry = try await gateway.call(
                .post,
                "/v1/profiles",
                token: user.token,
                json: Self.profile(["name": "Fresh"]),
                headers: key
            )
            #expect(retry.status == 202 && retry.json?["jobId"]?.stringValue == jobID.description, "\(retry)")
        }
    }

    @Test func createProfileReplaysAnIdempotencyKeyAndRefusesItForAnotherBody() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            try await gateway.expectIdempotent(
                .post,
                "/v1/profiles",
                user: user,
                kind: .chartCalculate,
                body: Self.profileBody,
                other: .init(method: .post, uri: "/v1/profiles", body: Self.profile(["name": "Other"]))
            )
        }
    }

    @Test func profilesAreListedByNameInPagesAndReadByTheirUserOnly() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let anna = try await gateway.seedProfile(user, name: "Anna")
            _ = try await gateway.seedProfile(user, name: "Boris", chart: nil)
            _ = try await gateway.seedProfile(user, name: "Clara")
            let strangers = try await gateway.seedProfile(other, name: "Stranger")

            let first = try await gateway.call(.get, "/v1/profiles?limit=2", token: user.token)
            #expect(first.status == 200, "\(first)")
            #expect(first.json?["items"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["Anna", "Boris"])
            let cursor = try #require(first.json?["nextCursor"]?.stringValue)
            let second = try await gateway.call(.get, "/v1/profiles?limit=2&cursor=\(cursor)", token: user.token)
            #expect(second.json?["items"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["Clara"])
            #expect(second.json?["nextCursor"] == nil)
            let item = try #require(first.json?["items"]?.arrayValue?.first)
            #expect(item["id"] == .string(anna.description))
            #expect(item["profileId"] == .string(anna.description), "the id's one name, beside the old `id`")
            #expect(
                item["birthDate"] == "1990-10-07" && item["birthTime"] == "15:00" && item["timezone"] == "Europe/Kyiv"
            )
            #expect(item["chart"]?["houseSystem"] == "placidus")
            #expect(first.json?["items"]?.arrayValue?[1]["chart"] == .null, "Boris has no chart yet")

            for (query, code) in [
                ("limit=0", "invalid-limit"), ("limit=101", "invalid-limit"), ("limit=x", "invalid-limit"),
                ("limit=1&limit=2", "invalid-limit"), ("cursor=!!", "invalid-cursor"),
                ("cursor=\(Pagination.cursor(kind: "l", "5"))", "invalid-cursor"),
            ] {
                let refused = try await gateway.call(.get, "/v1/profiles?\(query)", token: user.token)
                let field = code == "invalid-limit" ? "limit" : "cursor"
                gateway.expectProblem(refused, 400, code, field: field, query)
            }

            let own = try await gateway.call(.get, "/v1/profiles/\(anna)", token: user.token)
            #expect(own.status == 200 && own.json?["name"] == "Anna", "\(own)")
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/profiles/\(strangers)", token: user.token),
                404,
                "not-found",
                "another user's profile"
            )
            let theirs = try await gateway.call(.get, "/v1/profiles", token: other.token)
            #expect(theirs.json?["items"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["Stranger"])
        }
    }

    @Test func updateProfileQueuesAnUpdateOfTheCallersProfileOnly() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let mine = try await gateway.seedProfile(user, name: "Mine")
            let strangers = try await gateway.seedProfile(other, name: "Stranger")
            let body = Self.profile(["name": "Renamed"])
            let answer = try await gateway.call(.put, "/v1/profiles/\(mine)", token: user.token, json: body)
            let (_, job) = try await gateway.expectAccepted(answer, .chartCalculate, user: user)
            #expect(job["profile"]?["id"] == .string(mine.description))
            #expect(answer.json?["profileId"] == .string(mine.description), "\(answer)")
            #expect(job["profile"]?["name"] == "Renamed")
            #expect(job["userId"] == .string(user.id.description))

            gateway.expectProblem(
                try await gateway.call(.put, "/v1/profiles/\(strangers)", token: user.token, json: body),
                404,
                "not-found",
                "another user's profile"
            )
            gateway.expectProblem(
                try await gateway.call(
                    .put,
                    "/v1/profiles/\(mine)",
                    token: user.token,
                    json: Self.profile(["id": .string(strangers.description)])
                ),
                400,
                "profile-id-mismatch",
                field: "profile.id"
            )
            gateway.expectProblem(
                try await gateway.call(
                    .put,
                    "/v1/profiles/\(mine)",
                    token: user.token,
                    json: Self.profile(["latitude": 95])
                ),
                422,
                "latitude-out-of-range",
                field: "profile.latitude"
            )
            #expect(try await gateway.recordedJobs(other) == 0)
            try await gateway.expectIdempotent(
                .put,
                "/v1/profiles/\(mine)",
                user: user,
                kind: .chartCalculate,
                body: Self.profile(["name": "Again"]),
                other: .init(method: .put, uri: "/v1/profiles/\(mine)", body: Self.profile(["name": "Else"]))
            )
        }
    }

    @Test func deleteProfileRemovesTheCallersProfileUnlessAReportIsBeingWritten() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let mine = try await gateway.seedProfile(user, name: "Mine")
            let strangers = try await gateway.seedProfile(other, name: "Stranger")
            gateway.expectProblem(
                try await gateway.call(.delete, "/v1/profiles/\(strangers)", token: user.token),
                404,
                "not-found",
                "another user's profile"
            )
            #expect(try await gateway.call(.get, "/v1/profiles/\(strangers)", token: other.token).status == 200)

            let deleted = try await gateway.call(.delete, "/v1/profiles/\(mine)", token: user.token)
            #expect(deleted.status == 204 && deleted.body.isEmpty, "\(deleted)")
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/profiles/\(mine)", token: user.token),
                404,
                "not-found"
            )
            gateway.expectProblem(
                try await gateway.call(.delete, "/v1/profiles/\(mine)", token: user.token),
                404,
                "not-found",
                "a deleted profile"
            )

            // A credit spent on a profile whose report is not written yet.
            let busy = try await gateway.seedProfile(user, name: "Busy")
            let ledger = try await BillingLedgerIntegrationTests()
            defer { Task { await ledger.pool.close() } }
            let purchase = try BillingLedgerIntegrationTests.signedPurchase(
                "com.astrosvitla.report.credit.single",
                user: user.id
            )
            _ = try await ledger.purchase(purchase.jws, user: user.id)
            _ = try await ledger.request(user.id, busy, .career, .en)
            let refused = try await gateway.call(.delete, "/v1/profiles/\(busy)", token: user.token)
            gateway.expectProblem(refused, 409, "report-in-progress")
            #expect(refused.header("Retry-After") == "30")
            #expect(try await gateway.call(.get, "/v1/profiles/\(busy)", token: user.token).status == 200)
        }
    }

    // MARK: Charts

    @Test func theStoredChartAndItsWheelAreServedToTheirUserOnly() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let mine = try await gateway.seedProfile(user, name: "Mine")
            let chartless = try await gateway.seedProfile(user, name: "Chartless", chart: nil)
            let strangers = try await gateway.seedProfile(other, name: "Stranger")

            let chart = try await gateway.call(.get, "/v1/profiles/\(mine)/chart", token: user.token)
            #expect(chart.status == 200 && chart.header("Content-Type") == "application/json", "\(chart)")
            #expect(chart.json == (try JSONValue.parse(Data(RouteGateway.natalChart.utf8))))
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/profiles/\(chartless)/chart", token: user.token),
                409,
                "chart-not-found"
            )
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/profiles/\(strangers)/chart", token: user.token),
                404,
                "not-found",
                "another user's chart"
            )

            let wheel = try await gateway.call(.get, "/v1/profiles/\(mine)/chart.svg?theme=dark", token: user.token)
            #expect(wheel.status == 200, "\(wheel)")
            #expect(wheel.header("Content-Type") == "image/svg+xml; charset=utf-8")
            #expect(wheel.text.contains("<svg"))
            let etag = try #require(wheel.header("ETag"))
            let cached = try await gateway.call(
                .get,
                "/v1/profiles/\(mine)/chart.svg?theme=dark",
                token: user.token,
                headers: ["If-None-Match": etag]
            )
            #expect(cached.status == 304 && cached.body.isEmpty, "\(cached)")
            let light = try await gateway.call(.get, "/v1/profiles/\(mine)/chart.svg", token: user.token)
            #expect(light.status == 200 && light.header("ETag") != etag, "another theme is another drawing")
            for query in ["theme=sepia", "theme=dark&theme=light"] {
                gateway.expectProblem(
                    try await gateway.call(.get, "/v1/profiles/\(mine)/chart.svg?\(query)", token: user.token),
                    422,
                    "invalid-theme",
                    field: "theme",
                    query
                )
            }
            gateway.expectProblem(
                try await gateway.call(
                    .get,
                    "/v1/profiles/\(mine)/chart.svg?\(String(repeating: "x", count: 300))",
                    token: user.token
                ),
                400,
                "invalid-query"
            )
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/profiles/\(chartless)/chart.svg", token: user.token),
                409,
                "chart-not-found"
            )
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/profiles/\(strangers)/chart.svg", token: user.token),
                404,
                "not-found",
                "another user's wheel"
            )
        }
    }

    // MARK: Purchases, credits, ledger

    @Test func aPurchaseQueuesItsVerificationAndBadOnesAreRefused() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let purchase = try BillingLedgerIntegrationTests.signedPurchase(
                "com.astrosvitla.report.credit.single",
                user: user.id
            )
            let signed = try await gateway.call(
                .post,
                "/v1/purchases",
                token: user.token,
                json: ["signedTransaction": .string(purchase.jws)]
            )
            let (_, body) = try await gateway.expectAccepted(signed, .billingVerifyPurchase, user: user)
            #expect(body["signedTransaction"] == .string(purchase.jws))
            #expect(body["userId"] == .string(user.id.description))
            let byID = try await gateway.call(
                .post,
                "/v1/purchases",
                token: user.token,
                json: ["transactionId": "2000000123456789", "restore": true]
            )
            let (_, restore) = try await gateway.expectAccepted(byID, .billingVerifyPurchase, user: user)
            #expect(restore["transactionId"] == "2000000123456789")
            #expect(restore["restore"] == true)

            let refusals: [(body: JSONValue, code: String, field: String)] = [
                ([:], "missing-field", "signedTransaction"),
                (["signedTransaction": "not-a-jws"], "invalid-signed-transaction", "signedTransaction"),
                (["signedTransaction": 5], "invalid-field-type", "signedTransaction"),
                (["transactionId": "12ab"], "invalid-transaction-id", "transactionId"),
                (
                    ["signedTransaction": .string(purchase.jws), "transactionId": "1"], "conflicting-fields",
                    "transactionId"
                ),
                (["transactionId": "1", "restore": "yes"], "invalid-field-type", "restore"),
            ]
            for refusal in refusals {
                let refused = try await gateway.call(.post, "/v1/purchases", token: user.token, json: refusal.body)
                gateway.expectProblem(refused, 422, refusal.code, field: refusal.field, "\(refusal.body)")
            }
            gateway.expectProblem(
                try await gateway.call(.post, "/v1/purchases", token: user.token, raw: "[1]"),
                400,
                "invalid-json"
            )
            #expect(try await gateway.recordedJobs(user) == 2)
            try await gateway.expectIdempotent(
                .post,
                "/v1/purchases",
                user: user,
                kind: .billingVerifyPurchase,
                body: ["transactionId": "2000000000000001"],
                other: .init(method: .post, uri: "/v1/purchases", body: ["transactionId": "2000000000000002"])
            )
        }
    }

    @Test func creditsAndTheLedgerShowTheCallersOwnPurchasesInPages() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let empty = try await gateway.call(.get, "/v1/credits", token: user.token)
            #expect(empty.status == 200 && empty.json?["available"] == 0, "\(empty)")
            #expect(empty.json?["byArea"]?["any"] == 0 && empty.json?["byArea"]?["career"] == 0)

            let ledger = try await BillingLedgerIntegrationTests()
            defer { Task { await ledger.pool.close() } }
            for _ in 0..<3 {
                let purchase = try BillingLedgerIntegrationTests.signedPurchase(
                    "com.astrosvitla.report.credit.single",
                    user: user.id
                )
                _ = try await ledger.purchase(purchase.jws, user: user.id)
            }
            let credits = try await gateway.call(.get, "/v1/credits", token: user.token)
            #expect(credits.json?["available"] == 3 && credits.json?["byArea"]?["any"] == 3, "\(credits)")
            #expect(try await gateway.call(.get, "/v1/credits", token: other.token).json?["available"] == 0)

            let first = try await gateway.call(.get, "/v1/ledger?limit=2", token: user.token)
            #expect(first.status == 200, "\(first)")
            let items = try #require(first.json?["items"]?.arrayValue)
            #expect(items.count == 2)
            #expect(items.allSatisfy { $0["entry"]?.stringValue != nil && $0["creditId"]?.stringValue != nil })
            let cursor = try #require(first.json?["nextCursor"]?.stringValue)
            let rest = try await gateway.call(.get, "/v1/ledger?cursor=\(cursor)", token: user.token)
            #expect(rest.json?["items"]?.arrayValue?.count == 1 && rest.json?["nextCursor"] == nil, "\(rest)")
            #expect(try await gateway.call(.get, "/v1/ledger", token: other.token).json?["items"] == [])
            gateway.expectProblem(
                try await gateway.call(
                    .get,
                    "/v1/ledger?cursor=\(Pagination.cursor(kind: "p", "Anna"))",
                    token: user.token
                ),
                400,
                "invalid-cursor",
                field: "cursor",
                "a profiles cursor"
            )
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/ledger?limit=1000", token: user.token),
                400,
                "invalid-limit",
                field: "limit"
            )
        }
    }

    // MARK: Reports

    @Test func aReportRequestSpendsNothingUntilItIsCheckedAndIsQueuedForTheCaller() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let mine = try await gateway.seedProfile(user, name: "Mine")
            let partner = try await gateway.seedProfile(user, name: "Partner")
            let chartless = try await gateway.seedProfile(user, name: "Chartless", chart: nil)
            let strangers = try await gateway.seedProfile(other, name: "Stranger")
            let body: JSONValue = ["profileId": .string(mine.description), "area": "career", "language": "en"]
            let answer = try await gateway.call(.post, "/v1/reports", token: user.token, json: body)
            let (_, job) = try await gateway.expectAccepted(answer, .reportRequest, user: user)
            #expect(job["profileId"] == .string(mine.description) && job["area"] == "career")
            let pair = try await gateway.call(
                .post,
                "/v1/reports",
                token: user.token,
                json: [
                    "profileId": .string(mine.description), "partnerProfileId": .string(partner.description),
                    "area": "relationships", "language": "uk",
                ]
            )
            let (_, pairJob) = try await gateway.expectAccepted(pair, .reportRequest, user: user)
            #expect(pairJob["partnerProfileId"] == .string(partner.description))

            let id = { (profile: ProfileID) in JSONValue.string(profile.description) }
            let refusals: [(body: JSONValue, status: Int, code: String, field: String)] = [
                (["area": "career", "language": "en"], 422, "missing-field", "profileId"),
                (["profileId": "nope", "area": "career", "language": "en"], 422, "invalid-id", "profileId"),
                (["profileId": 5, "area": "career", "language": "en"], 422, "invalid-field-type", "profileId"),
                (["profileId": id(mine), "area": "fortune", "language": "en"], 422, "unknown-area", "area"),
                (["profileId": id(mine), "area": "career", "language": "fr"], 422, "unknown-language", "language"),
                (
                    ["profileId": id(strangers), "area": "career", "language": "en"], 404, "profile-not-found",
                    "profileId"
                ),
                (
                    ["profileId": id(chartless), "area": "career", "language": "en"], 409, "chart-not-found",
                    "profileId"
                ),
                (
                    ["profileId": id(mine), "partnerProfileId": id(mine), "area": "relationships", "language": "en"],
                    422, PartnerRule.sameProfile.rawValue, "partnerProfileId"
                ),
                (
                    ["profileId": id(mine), "partnerProfileId": id(partner), "area": "career", "language": "en"],
                    422, PartnerRule.notAllowed.rawValue, "partnerProfileId"
                ),
                (
                    [
                        "profileId": id(mine), "partnerProfileId": id(strangers), "area": "relationships",
                        "language": "en",
                    ],
                    404, PartnerRule.notFound.rawValue, "partnerProfileId"
                ),
                (
                    [
                        "profileId": id(mine), "partnerProfileId": id(chartless), "area": "relationships",
                        "language": "en",
                    ],
                    409, PartnerRule.chartNotFound.rawValue, "partnerProfileId"
                ),
            ]
            for refusal in refusals {
                let refused = try await gateway.call(.post, "/v1/reports", token: user.token, json: refusal.body)
                gateway.expectProblem(refused, refusal.status, refusal.code, field: refusal.field, "\(refusal.body)")
            }
            #expect(try await gateway.recordedJobs(user, kind: .reportRequest) == 2)
            #expect(try await gateway.recordedJobs(other) == 0)
            try await gateway.expectIdempotent(
                .post,
                "/v1/reports",
                user: user,
                kind: .reportRequest,
                body: ["profileId": .string(mine.description), "area": "finances", "language": "en"],
                other: .init(
                    method: .post,
                    uri: "/v1/reports",
                    body: ["profileId": .string(mine.description), "area": "general", "language": "en"]
                )
            )
        }
    }

    @Test func writtenReportsAreListedAndReadByTheirUserOnly() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let mine = try await gateway.seedProfile(user, name: "Mine")
            let strangers = try await gateway.seedProfile(other, name: "Stranger")
            let report = try await Self.seedReport(gateway, user, mine)

            let list = try await gateway.call(.get, "/v1/reports", token: user.token)
            #expect(list.status == 200, "\(list)")
            let item = try #require(list.json?["items"]?.arrayValue?.first)
            #expect(item["id"] == .string(report) && item["profileId"] == .string(mine.description))
            #expect(item["reportId"] == .string(report), "the id's one name, beside the old `id`")
            #expect(item["area"] == "career" && item["language"] == "en")
            let filtered = try await gateway.call(.get, "/v1/reports?profileId=\(mine)&limit=1", token: user.token)
            #expect(filtered.json?["items"]?.arrayValue?.count == 1, "\(filtered)")
            #expect(try await gateway.call(.get, "/v1/reports", token: other.token).json?["items"] == [])

            let read = try await gateway.call(.get, "/v1/reports/\(report)", token: user.token)
            #expect(read.status == 200, "\(read)")
            #expect(read.json?["text"]?.stringValue?.isEmpty == false)
            #expect(read.json?["writer"]?.stringValue != nil && read.json?["generatedAt"]?.stringValue != nil)
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/reports/\(report)", token: other.token),
                404,
                "not-found",
                "another user's report"
            )
            for profile in [strangers.description, "not-a-uuid", UUID().uuidString.lowercased()] {
                gateway.expectProblem(
                    try await gateway.call(.get, "/v1/reports?profileId=\(profile)", token: user.token),
                    404,
                    "not-found",
                    "reports of profile \(profile)"
                )
            }
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/reports?cursor=zzz", token: user.token),
                400,
                "invalid-cursor",
                field: "cursor"
            )
        }
    }
}
