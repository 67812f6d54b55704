import AstroDomain
import Foundation
import Postgres
import Testing
import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(FoundationXML)
import FoundationXML
#endif

/// `GET /v1/profiles/{id}/chart.svg` through the real gateway with a real chart-worker behind
/// it: the wheel of the stored chart, its themes, revalidation, another user's profile, a
/// profile whose chart is not there yet, and bad queries.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GatewayChartWheelTests {
    /// An answer with its raw bytes (an SVG is not JSON).
    struct RawAnswer {
        var status: Int
        var headers: [String: String]
        var body: Data
        var text: String { String(decoding: body, as: UTF8.self) }
        var json: JSONValue? { try? JSONValue.parse(body) }
    }

    /// A session that never answers from a cache of its own: a 304 must be the gateway's.
    static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        return URLSession(configuration: configuration)
    }()

    static func get(_ url: String, token: String?, headers: [String: String] = [:]) async throws -> RawAnswer {
        var request = URLRequest(url: URL(string: url)!)
        request.timeoutInterval = 10
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await session.data(for: request)
        let http = response as! HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            fields[String(describing: name).lowercased()] = String(describing: value)
        }
        return RawAnswer(status: http.statusCode, headers: fields, body: data)
    }

    /// Creates a profile through the gateway and waits for its chart; returns the profile id.
    static func profile(_ base: String, token: String, logs: () -> String) async throws -> String {
        let created = try await GatewayHarness.request(
            "POST",
            "\(base)/v1/profiles",
            token: token,
            body: GatewayHarness.profile
        )
        let jobID = try GatewayResourcesTests.accepted(created)
        let job = try await GatewayResourcesTests.finished(base, jobID, token: token, logs: logs)
        #expect(job["status"] == "succeeded", "\(job)")
        return try #require(job["result"]?["profileId"]?.stringValue)
    }

    @Test func theWheelOfTheStoredChart() async throws {
        let gateway = try await GatewayHarness.launch(chartWorker: true, label: "wheel-gateway")
        defer { gateway.processes.stop() }
        let base = gateway.base
        let (_, token) = try await GatewayHarness.register(base)
        let (_, otherToken) = try await GatewayHarness.register(base)
        let profileID = try await Self.profile(base, token: token) { gateway.processes.output }
        let chart = try await GatewayHarness.request("GET", "\(base)/v1/profiles/\(profileID)/chart", token: token)
        let planets = try #require(chart.json?["planets"]?.arrayValue)
        #expect(planets.count == 10)

        // 200: an SVG that parses, titled with the profile's name, with every planet of the
        // stored chart in its sign and house.
        let light = try await Self.get("\(base)/v1/profiles/\(profileID)/chart.svg", token: token)
        #expect(light.status == 200, "\(light.text.prefix(300))")
        #expect(light.headers["content-type"] == "image/svg+xml; charset=utf-8")
        #expect(light.headers["cache-control"] == "private, no-cache")
        #expect(light.headers["x-content-type-options"] == "nosniff")
        let etag = try #require(light.headers["etag"])
        #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count == 34, "\(etag)")
        let parsed = WheelXML.parse(light.body)
        #expect(parsed.isValid, "\(parsed.error ?? "")")
        #expect(parsed.rootName == "svg")
        #expect(parsed.titles.first == "Me — natal chart")
        for planet in planets {
            let name = try #require(planet["name"]?.stringValue)
            let sign = try #require(planet["sign"]?.stringValue)
            guard case .number(let number)? = planet["house"] else {
                Issue.record("\(name): no house in \(planet)")
                continue
            }
            let house = Int(number)
            #expect(
                parsed.titles.contains { $0.hasPrefix("\(name) ") && $0.contains(" \(sign), house \(house)") },
                "\(name) in \(sign), house \(house), not among \(parsed.titles)"
            )
        }
        // The same request again: the same bytes and the same tag.
        let again = try await Self.get("\(base)/v1/profiles/\(profileID)/chart.svg?theme=light", token: token)
        #expect(again.status == 200 && again.body == light.body && again.headers["etag"] == etag)

        // Dark: another drawing of the same chart, under another tag.
        let dark = try await Self.get("\(base)/v1/profiles/\(profileID)/chart.svg?theme=dark", token: token)
        #expect(dark.status == 200)
        #expect(WheelXML.parse(dark.body).isValid)
        #expect(dark.body != light.body)
        let darkTag = try #require(dark.headers["etag"])
        #expect(darkTag != etag)

        // If-None-Match: 304 with no body for the current tag (also among others, and weak);
        // a stale tag gets the wheel.
        for header in [etag, "\"0000\", \(etag)", "W/\(etag)"] {
            let unchanged = try await Self.get(
                "\(base)/v1/profiles/\(profileID)/chart.svg",
                token: token,
                headers: ["If-None-Match": header]
            )
            #expect(unchanged.status == 304, "If-None-Match: \(header)")
            #expect(unchanged.body.isEmpty)
            #expect(unchanged.headers["etag"] == etag)
        }
        let stale = try await Self.get(
            "\(base)/v1/profiles/\(profileID)/chart.svg?theme=dark",
            token: token,
            headers: ["If-None-Match": etag]
        )
        #expect(stale.status == 200 && stale.body == dark.body)

        // Another user's profile answers as an unknown one does.
        for (url, caller) in [
            ("\(base)/v1/profiles/\(profileID)/chart.svg", otherToken),
            ("\(base)/v1/profiles/\(UUID().uuidString.lowercased())/chart.svg", token),
            ("\(base)/v1/profiles/not-an-id/chart.svg", token),
        ] {
            let missing = try await Self.get(url, token: caller)
            #expect(missing.status == 404, "\(url)")
            #expect(missing.headers["content-type"] == "application/problem+json")
            #expect(missing.json?["code"] == "not-found")
        }
        // Without a token, 401; bad themes 422 (`invalid-theme`, as in bodies), an oversized query 400.
        #expect(try await Self.get("\(base)/v1/profiles/\(profileID)/chart.svg", token: nil).status == 401)
        for query in ["theme=sepia", "theme=light&theme=dark", "theme=", "x=" + String(repeating: "a", count: 300)] {
            let refused = try await Self.get("\(base)/v1/profiles/\(profileID)/chart.svg?\(query)", token: token)
            let oversized = query.hasPrefix("x=")
            #expect(refused.status == (oversized ? 400 : 422), "\(query.prefix(40))")
            #expect(refused.json?["code"]?.stringValue == (oversized ? "invalid-query" : "invalid-theme"))
        }

        // A new name changes the wheel's title, so the old tag no longer matches.
        let renamed = try await GatewayHarness.request(
            "PUT",
            "\(base)/v1/profiles/\(profileID)",
            token: token,
            body: GatewayResourcesTests.profile(["name": "Olena"])
        )
        let renameJob = try GatewayResourcesTests.accepted(renamed)
        _ = try await GatewayResourcesTests.finished(base, renameJob, token: token) { gateway.processes.output }
        let after = try await Self.get(
            "\(base)/v1/profiles/\(profileID)/chart.svg",
            token: token,
            headers: ["If-None-Match": etag]
        )
        #expect(after.status == 200)
        #expect(after.headers["etag"] != etag)
        #expect(WheelXML.parse(after.body).titles.first == "Olena — natal chart")
        #expect(!gateway.processes.output.contains("status not in the route table"))
    }

    /// A profile whose chart is not stored (written as the chart-worker would, without the chart):
    /// 409 `chart-not-found`; a stored chart that does not decode: 500 `chart-unreadable`.
    @Test func aProfileWithoutItsChart() async throws {
        let gateway = try await GatewayHarness.launch(label: "wheel-chartless")
        defer { gateway.processes.stop() }
        let base = gateway.base
        let (userText, token) = try await GatewayHarness.register(base)
        let user = try #require(UserID(userText))
        let pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        defer { Task { await pool.close() } }
        let chartless = ProfileID.random()
        let broken = ProfileID.random()
        try await pool.withConnection { database in
            for (profile, name) in [(chartless, "Chartless"), (broken, "Broken")] {
                try database.execute(
                    """
                    INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                    VALUES ($1, $2, $3, '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52)
                    """,
                    [profile.uuid, user.uuid, name]
                )
            }
            try database.execute(
                """
                INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                VALUES ($1, $2, '{"planets": []}'::jsonb, 'placidus', 'test', 'test')
                """,
                [UUID(), broken.uuid]
            )
        }
        let notReady = try await Self.get("\(base)/v1/profiles/\(chartless)/chart.svg", token: token)
        #expect(notReady.status == 409)
        #expect(notReady.json?["code"] == "chart-not-found")
        let unreadable = try await Self.get("\(base)/v1/profiles/\(broken)/chart.svg?theme=dark", token: token)
        #expect(unreadable.status == 500)
        #expect(unreadable.json?["code"] == "chart-unreadable")
        #expect(gateway.processes.output.contains("natal wheel not drawn"))
    }
}

/// What XMLParser read of a wheel: whether it parsed, the root, and every `<title>`'s text.
struct WheelXML {
    var isValid = false
    var error: String?
    var rootName: String?
    var titles: [String] = []

    static func parse(_ data: Data) -> WheelXML {
        let collector = Collector()
        let parser = XMLParser(data: data)
        parser.delegate = collector
        var result = WheelXML()
        result.isValid = parser.parse()
        result.error = parser.parserError.map { "\($0)" }
        result.rootName = collector.root
        result.titles = collector.titles
        return result
    }

    private final class Collector: NSObject, XMLParserDelegate {
        var root: String?
        var titles: [String] = []
        private var inTitle = false
        private var text = ""

        func parser(
            _ parser: XMLParser,
            didStartElement elementName: String,
            namespaceURI: String?,
            qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            if root == nil { root = elementName }
            if elementName == "title" {
                inTitle = true
                text = ""
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            if inTitle { text += string }
        }

        func parser(
            _ parser: XMLParser,
            didEndElement elementName: String,
            namespaceURI: String?,
            qualifiedName: String?
        ) {
            if elementName == "title" {
                titles.append(text)
                inTitle = false
            }
        }
    }
}
