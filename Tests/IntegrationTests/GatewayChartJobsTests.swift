import AstroDomain
import Foundation
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
            ("\(me)/synastry", ["partnerProfileId": .string(stranger)], nil, 404, "profile-not-found"),
            ("\(stranger)/synastry", ["partnerProfileId": .string(me)], nil, 404, "profile-not-found"),
            ("\(me)/synastry", ["partnerProfileId": .string(chartless.description)], nil, 409, "chart-not-ready"),
            ("\(me)/transits", ["from": "2027-01-01"], nil, 422, "missing-field"),
            ("\(me)/transits", ["from": "2027-01-01", "to": "2027-13-01"], nil, 422, "invalid-date"),
            ("\(me)/transits", ["from": "2027-01-01", "to": "2028-01-03"], nil, 422, "invalid-range"),
            ("\(me)/transits", ["from": "2027-02-01", "to": "2027-01-01"], nil, 422, "invalid-range"),
            ("\(me)/transits", ["from": "1899-12-31", "to": "1900-02-01"], nil, 422, "invalid-range"),
            ("\(chartless)/transits", ["from": "2027-01-01", "to": "2027-02-01"], nil, 409, "chart-not-ready"),
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
                "profile-not-found"
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
}
