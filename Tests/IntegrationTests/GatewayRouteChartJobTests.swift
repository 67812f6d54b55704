import AstroDomain
import Foundation
import Hummingbird
import Postgres
import Testing
import WorkerRuntime

@testable import Gateway

/// The chart jobs beyond the natal chart (synastry, transits, returns, wheels) and their stored
/// results, in process (RouteGateway): the job's own validation codes before anything is
/// published, both profiles the caller's with their charts, the daily quota, idempotency, and the
/// results (stored as the chart-worker stores them) served to their user only.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GatewayRouteChartJobTests {
    /// The natal chart, computed in the sidereal zodiac (a chart the tropical one has no synastry with).
    static let siderealChart =
        String(RouteGateway.natalChart.trimmingCharacters(in: .whitespacesAndNewlines).dropLast())
        + #","zodiac":"sidereal"}"#

    /// A caller with two charted profiles, one without its chart and one sidereal, and another
    /// user with a profile.
    struct Cast {
        var user: RouteGateway.User
        var other: RouteGateway.User
        var me: String
        var partner: String
        var chartless: String
        var sidereal: String
        var stranger: String
    }

    static func cast(_ gateway: RouteGateway) async throws -> Cast {
        let user = try await gateway.register()
        let other = try await gateway.register()
        return Cast(
            user: user,
            other: other,
            me: try await gateway.seedProfile(user, name: "Me").description,
            partner: try await gateway.seedProfile(user, name: "Partner").description,
            chartless: try await gateway.seedProfile(user, name: "Chartless", chart: nil).description,
            sidereal: try await gateway.seedProfile(user, name: "Sidereal", chart: siderealChart).description,
            stranger: try await gateway.seedProfile(other, name: "Stranger").description
        )
    }

    @Test func eachChartJobIsQueuedForTheCallersProfilesWithTheBodyItAskedFor() async throws {
        try await RouteGateway.run { gateway in
            let cast = try await Self.cast(gateway)
            let requests: [(route: String, kind: JobType, body: JSONValue)] = [
                ("synastry", .chartSynastry, ["partnerProfileId": .string(cast.partner), "angleMaxOrb": 3]),
                ("transits", .chartTransits, ["from": "2027-01-01", "to": "2027-02-01"]),
                ("returns", .chartReturn, ["kind": "solar-return", "year": 2027]),
                ("returns", .chartReturn, ["kind": "progressed", "date": "2030-05-01"]),
                ("wheels", .chartRender, ["wheel": "natal", "theme": "dark"]),
                ("wheels", .chartRender, ["wheel": "synastry", "partnerProfileId": .string(cast.partner)]),
                ("wheels", .chartRender, ["wheel": "transits", "at": "2027-01-01"]),
            ]
            for request in requests {
                let answer = try await gateway.call(
                    .post,
                    "/v1/profiles/\(cast.me)/\(request.route)",
                    token: cast.user.token,
                    json: request.body
                )
                let (_, job) = try await gateway.expectAccepted(answer, request.kind, user: cast.user)
                #expect(job["userId"] == .string(cast.user.id.description), "\(request.route)")
                #expect(job["profileId"] == .string(cast.me), "\(request.route)")
                guard case .object(let asked) = request.body else { continue }
                for (key, value) in asked {
                    // Dates go out as instants (`2027-01-01T00:00:00Z`).
                    let same =
                        job[key] == value
                        || (value.stringValue.map { asked in job[key]?.stringValue?.hasPrefix(asked + "T") == true }
                            ?? false)
                    #expect(same, "\(request.route) \(key): \(job)")
                }
            }
        }
    }

    @Test func badChartJobRequestsAreRefusedWithTheJobsCodesBeforeAnythingIsRecorded() async throws {
        try await RouteGateway.run { gateway in
            let cast = try await Self.cast(gateway)
            let me = cast.me
            let refusals: [(path: String, body: JSONValue?, raw: String?, status: Int, code: String, field: String?)] =
                [
                    ("\(me)/synastry", nil, "[1, 2]", 400, "invalid-json", nil),
                    ("\(me)/synastry", nil, "", 400, "invalid-json", nil),
                    (
                        "\(me)/synastry", ["partnerProfileId": .string(cast.partner), "jobId": "x"], nil, 400,
                        "unexpected-field", "jobId"
                    ),
                    (
                        "\(me)/synastry", ["partnerProfileId": .string(cast.partner), "userId": "x"], nil, 400,
                        "unexpected-field", "userId"
                    ),
                    ("\(me)/synastry", [:], nil, 422, "missing-field", "partnerProfileId"),
                    ("\(me)/synastry", ["partnerProfileId": 7], nil, 422, "invalid-field-type", "partnerProfileId"),
                    ("\(me)/synastry", ["partnerProfileId": "not-a-uuid"], nil, 422, "invalid-id", "partnerProfileId"),
                    ("\(me)/synastry", ["partnerProfileId": .string(me)], nil, 422, "same-profile", "partnerProfileId"),
                    (
                        "\(me)/synastry", ["partnerProfileId": .string(cast.partner), "angleMaxOrb": 9], nil, 422,
                        "invalid-orb", "angleMaxOrb"
                    ),
                    (
                        "\(me)/synastry", ["partnerProfileId": .string(cast.stranger)], nil, 404, "partner-not-found",
                        "partnerProfileId"
                    ),
                    (
                        "\(cast.stranger)/synastry", ["partnerProfileId": .string(me)], nil, 404, "profile-not-found",
                        nil
                    ),
                    (
                        "\(me)/synastry", ["partnerProfileId": .string(cast.chartless)], nil, 409,
                        "partner-chart-not-found",
                        "partnerProfileId"
                    ),
                    (
                        "\(me)/synastry", ["partnerProfileId": .string(cast.sidereal)], nil, 422, "zodiac-mismatch",
                        "partnerProfileId"
                    ),
                    ("\(me)/transits", ["from": "2027-01-01"], nil, 422, "missing-field", "to"),
                    ("\(me)/transits", ["from": "2027-01-01", "to": "2027-13-01"], nil, 422, "invalid-date", "to"),
                    ("\(me)/transits", ["from": "2027-01-01", "to": "2028-01-03"], nil, 422, "invalid-range", nil),
                    ("\(me)/transits", ["from": "2027-02-01", "to": "2027-01-01"], nil, 422, "invalid-range", nil),
                    (
                        "\(cast.chartless)/transits", ["from": "2027-01-01", "to": "2027-02-01"], nil, 409,
                        "chart-not-found", "profileId"
                    ),
                    (
                        "\(cast.stranger)/transits", ["from": "2027-01-01", "to": "2027-02-01"], nil, 404,
                        "profile-not-found", "profileId"
                    ),
                    ("\(me)/returns", ["kind": "lunar-return"], nil, 422, "invalid-kind", "kind"),
                    ("\(me)/returns", ["kind": "solar-return"], nil, 422, "invalid-year", "year"),
                    ("\(me)/returns", ["kind": "solar-return", "year": 2101], nil, 422, "invalid-year", "year"),
                    ("\(me)/returns", ["kind": "progressed"], nil, 422, "missing-field", "date"),
                    (
                        "\(me)/returns",
                        ["kind": "solar-return", "year": 2027, "place": ["latitude": 91, "longitude": 0]],
                        nil, 422, "invalid-place", nil
                    ),
                    (
                        "\(cast.stranger)/returns", ["kind": "solar-return", "year": 2027], nil, 404,
                        "profile-not-found", "profileId"
                    ),
                    ("\(me)/wheels", ["wheel": "pie"], nil, 422, "invalid-wheel", "wheel"),
                    ("\(me)/wheels", ["wheel": "natal", "theme": "sepia"], nil, 422, "invalid-theme", "theme"),
                    ("\(me)/wheels", ["wheel": "synastry"], nil, 422, "missing-field", "partnerProfileId"),
                    (
                        "\(me)/wheels", ["wheel": "natal", "partnerProfileId": .string(cast.partner)], nil, 422,
                        "invalid-field-type", "partnerProfileId"
                    ),
                    ("\(me)/wheels", ["wheel": "natal", "at": "2027-01-01"], nil, 422, "invalid-field-type", "at"),
                    ("\(me)/wheels", ["wheel": "transits", "at": "3000-01-01"], nil, 422, "invalid-range", nil),
                    (
                        "\(me)/wheels", ["wheel": "synastry", "partnerProfileId": .string(cast.stranger)], nil, 404,
                        "partner-not-found", "partnerProfileId"
                    ),
                    ("\(cast.stranger)/wheels", ["wheel": "natal"], nil, 404, "profile-not-found", "profileId"),
                ]
            for refusal in refusals {
                let answer = try await gateway.call(
                    .post,
                    "/v1/profiles/\(refusal.path)",
                    token: cast.user.token,
                    json: refusal.body,
                    raw: refusal.raw
                )
                gateway.expectProblem(
                    answer,
                    refusal.status,
                    refusal.code,
                    field: refusal.field,
                    "\(refusal.path) \(refusal.body.map { "\($0)" } ?? refusal.raw ?? "")"
                )
            }
            let oversized = try await gateway.call(
                .post,
                "/v1/profiles/\(me)/transits",
                token: cast.user.token,
                raw: #"{"from": ""# + String(repeating: " ", count: 5000) + #""}"#
            )
            gateway.expectProblem(oversized, 413, "body-too-large")
            #expect(try await gateway.recordedJobs(cast.user) == 0)
            #expect(gateway.published.all.isEmpty)
        }
    }

    @Test func chartJobsReplayAnIdempotencyKeyAndRefuseItOnAnotherRoute() async throws {
        try await RouteGateway.run { gateway in
            let cast = try await Self.cast(gateway)
            for (route, kind, body, otherBody) in [
                (
                    "synastry", JobType.chartSynastry, ["partnerProfileId": .string(cast.partner)] as JSONValue,
                    ["partnerProfileId": .string(cast.partner), "angleMaxOrb": 2] as JSONValue
                ),
                (
                    "transits", .chartTransits, ["from": "2027-01-01", "to": "2027-02-01"],
                    ["from": "2027-01-01", "to": "2027-03-01"]
                ),
                (
                    "returns", .chartReturn, ["kind": "solar-return", "year": 2027],
                    ["kind": "solar-return", "year": 2028]
                ),
                ("wheels", .chartRender, ["wheel": "natal"], ["wheel": "natal", "theme": "dark"]),
            ] {
                try await gateway.expectIdempotent(
                    .post,
                    "/v1/profiles/\(cast.me)/\(route)",
                    user: cast.user,
                    kind: kind,
                    body: body,
                    other: .init(method: .post, uri: "/v1/profiles/\(cast.me)/\(route)", body: otherBody)
                )
            }
            // A key of one route on another route (or profile) is another request.
            let key = ["Idempotency-Key": "shared-\(UUID())"]
            let first = try await gateway.call(
                .post,
                "/v1/profiles/\(cast.me)/wheels",
                token: cast.user.token,
                json: ["wheel": "natal"],
                headers: key
            )
            #expect(first.status == 202)
            gateway.expectProblem(
                try await gateway.call(
                    .post,
                    "/v1/profiles/\(cast.partner)/wheels",
                    token: cast.user.token,
                    json: ["wheel": "natal"],
                    headers: key
                ),
                422,
                "idempotency-key-reused",
                "the key on another profile"
            )
        }
    }

    @Test func overTheDailyChartResultQuotaAJobIsRefused429() async throws {
        try await RouteGateway.run(environment: [ChartResultQuota.variable: "1"]) { gateway in
            let cast = try await Self.cast(gateway)
            let body: JSONValue = ["from": "2027-01-01", "to": "2027-02-01"]
            try await gateway.expectAccepted(
                try await gateway.call(.post, "/v1/profiles/\(cast.me)/transits", token: cast.user.token, json: body),
                .chartTransits,
                user: cast.user
            )
            // The job computed its result (not from the cache), as the chart-worker records it.
            try await gateway.admin.withConnection { database in
                _ = try database.execute(
                    """
                    INSERT INTO jobs (id, kind, status, attempts, user_id, result, finished_at)
                    VALUES ($1, 'chart.transits', 'succeeded', 1, $2, '{"cached": false}', now())
                    """,
                    [UUID(), cast.user.id.uuid]
                )
            }
            let refused = try await gateway.call(
                .post,
                "/v1/profiles/\(cast.me)/wheels",
                token: cast.user.token,
                json: ["wheel": "natal"]
            )
            gateway.expectProblem(refused, 429, ChartResultQuota.code.rawValue)
            #expect(refused.header("Retry-After").flatMap(Int.init).map { (1...86_400).contains($0) } == true)
            // Another user's quota is their own.
            let theirs = try await gateway.seedProfile(cast.other, name: "Theirs")
            #expect(
                try await gateway.call(
                    .post,
                    "/v1/profiles/\(theirs)/wheels",
                    token: cast.other.token,
                    json: ["wheel": "natal"]
                ).status == 202
            )
        }
    }

    /// A stored result of `user` as the chart-worker writes it; returns its id.
    @discardableResult
    static func seedResult(
        _ gateway: RouteGateway,
        _ user: RouteGateway.User,
        profile: String,
        kind: String,
        svg: String? = nil
    ) async throws -> String {
        let id = UUID()
        let result: String? = svg == nil ? #"{"aspects": [], "note": "seeded"}"# : nil
        try await gateway.admin.withConnection { database in
            _ = try database.execute(
                """
                INSERT INTO chart_results (id, user_id, profile_id, kind, parameters, result, svg, bytes, engine_version)
                VALUES ($1, $2, $3::uuid, $4, '{"from": "2027-01-01"}', $5::jsonb, $6, $7, 'test')
                """,
                [id, user.id.uuid, profile, kind, result, svg, (result ?? svg ?? "").utf8.count]
            )
        }
        return id.uuidString.lowercased()
    }

    @Test func storedResultsAreServedToTheirUserAsJSONOrSVG() async throws {
        try await RouteGateway.run { gateway in
            let cast = try await Self.cast(gateway)
            let synastry = try await Self.seedResult(gateway, cast.user, profile: cast.me, kind: "synastry")
            let wheel = try await Self.seedResult(
                gateway,
                cast.user,
                profile: cast.me,
                kind: "wheel",
                svg: #"<svg xmlns="http://www.w3.org/2000/svg"/>"#
            )

            let json = try await gateway.call(.get, "/v1/chart-results/\(synastry)", token: cast.user.token)
            #expect(json.status == 200, "\(json)")
            #expect(json.header("Content-Type") == "application/json")
            #expect(json.header("ETag") == "\"\(synastry)\"")
            #expect(json.json?["id"] == .string(synastry) && json.json?["kind"] == "synastry")
            #expect(json.json?["resultId"] == .string(synastry), "the id's one name, beside the old `id`")
            #expect(json.json?["profileId"] == .string(cast.me))
            #expect(json.json?["result"]?["note"] == "seeded")
            let notModified = try await gateway.call(
                .get,
                "/v1/chart-results/\(synastry)",
                token: cast.user.token,
                headers: ["If-None-Match": "\"\(synastry)\""]
            )
            #expect(notModified.status == 304 && notModified.body.isEmpty)
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/chart-results/\(synastry)?format=svg", token: cast.user.token),
                400,
                "invalid-format",
                field: "format",
                "svg of a JSON result"
            )

            let svg = try await gateway.call(.get, "/v1/chart-results/\(wheel)", token: cast.user.token)
            #expect(svg.status == 200 && svg.header("Content-Type") == "image/svg+xml; charset=utf-8", "\(svg)")
            #expect(svg.text.hasPrefix("<svg"))
            let wheelJSON = try await gateway.call(
                .get,
                "/v1/chart-results/\(wheel)?format=json",
                token: cast.user.token
            )
            #expect(wheelJSON.json?["svg"]?.stringValue?.hasPrefix("<svg") == true, "\(wheelJSON)")

            for query in ["format=xml", "format=json&format=svg"] {
                gateway.expectProblem(
                    try await gateway.call(.get, "/v1/chart-results/\(synastry)?\(query)", token: cast.user.token),
                    400,
                    "invalid-format",
                    field: "format",
                    query
                )
            }
            for id in [synastry, wheel] {
                gateway.expectProblem(
                    try await gateway.call(.get, "/v1/chart-results/\(id)", token: cast.other.token),
                    404,
                    "not-found",
                    "another user's result"
                )
                gateway.expectProblem(
                    try await gateway.call(
                        .get,
                        "/v1/chart-results/\(id)",
                        token: cast.other.token,
                        headers: ["If-None-Match": "\"\(id)\""]
                    ),
                    404,
                    "not-found",
                    "another user's result, revalidated"
                )
            }
        }
    }
}
