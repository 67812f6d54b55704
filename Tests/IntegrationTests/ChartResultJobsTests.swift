import AMQP
import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import Maintenance
import Postgres
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// chart.synastry, chart.transits, chart.return and chart.render on the real chart-worker process
/// (its own broker user and database role), against the engine computed here from the stored
/// charts: stored results, content-derived ids and the cache, ownership, bounds, and erasure.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ChartResultJobsTests {
    /// The schema owner's pool, for checks.
    let pool: PostgresPool
    static let engine: ChartEngine = {
        let ephemeris = try! Ephemeris(configuration: EphemerisConfiguration(threads: 1))
        return ChartEngine(ephemeris: ephemeris)
    }()

    init() async throws {
        pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 2),
            logger: RuntimeTestEnvironment.logger
        )
    }

    /// A chart-worker process and a publisher on the contract's topology.
    struct Stack {
        let publisher: AMQPPublisher
        let worker: GatewayHarness.Processes
        let metricsURL: String
    }

    /// Starts the chart-worker on any free metrics port (which it logs) and waits until it is
    /// ready.
    static func start(label: String, environment: [String: String] = [:]) async throws -> Stack {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(
            purging: [.chartCalculate] + JobType.chartResultJobs
        )
        let process: ChildProcess
        do {
            process = try await GatewayHarness.start(
                "chart-worker",
                // Info: the health port is logged at info.
                environment: try await GatewayHarness.chartWorkerEnvironment(logLevel: "info")
                    .merging(environment) { _, new in new },
                label: label
            )
        } catch {
            await publisher.close()
            throw error
        }
        let worker = GatewayHarness.Processes(processes: [process])
        do {
            let base = "http://127.0.0.1:\(try await process.healthPort())"
            try await RuntimeTestEnvironment.eventually(
                "the chart-worker answers 200 on \(base)/readyz",
                timeout: .seconds(60)
            ) {
                guard process.isRunning else { throw TestFailure("exited: \(worker.output)") }
                return (try? await GatewayHarness.request("GET", "\(base)/readyz"))?.status == 200
            }
            return Stack(publisher: publisher, worker: worker, metricsURL: "\(base)/metrics")
        } catch {
            worker.stop()
            await publisher.close()
            throw TestFailure("\(error)\n\(process.tail())")
        }
    }

    func publish(_ stack: Stack, _ type: JobType, _ body: JSONValue) async throws {
        var properties = MessageProperties(contentType: "application/json")
        properties.messageID = body["jobId"]?.stringValue
        properties.type = type.rawValue
        try await stack.publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.requestsExchange,
                routingKey: type.rawValue,
                body: body.jsonData(),
                properties: properties,
                mandatory: true
            )
        )
    }

    /// Waits for a job to finish; returns its status, result and error code.
    func finished(_ id: JobID, _ stack: Stack) async throws -> (status: String, result: JSONValue?, code: String?) {
        var last: (String, JSONValue?, String?)?
        do {
            try await RuntimeTestEnvironment.eventually("job \(id) finishes", timeout: .seconds(60)) {
                last = try await pool.withConnection { database in
                    try database.query(
                        "SELECT status, result::text AS r, error->>'code' AS code FROM jobs WHERE id = $1",
                        [id.uuid]
                    ).first.map {
                        (
                            try $0.decode(String.self, "status"),
                            try $0.decode(String?.self, "r").map { try JSONValue.parse(Data($0.utf8)) },
                            try $0.decode(String?.self, "code")
                        )
                    }
                }
                return ["succeeded", "failed", "dead"].contains(last?.0 ?? "")
            }
        } catch {
            Issue.record("job \(id) did not finish: \(String(describing: last))\n\(stack.worker.output)")
            throw error
        }
        return try #require(last)
    }

    /// A profile of `user` with a chart, through chart.calculate.
    func profile(
        _ stack: Stack,
        user: UUID,
        name: String,
        date: String,
        time: String,
        timezone: String,
        latitude: Double,
        longitude: Double
    ) async throws -> UUID {
        let id = UUID()
        let job = JobID.random()
        try await publish(
            stack,
            .chartCalculate,
            [
                "jobId": .string(job.description), "userId": .string(user.uuidString.lowercased()),
                "profile": [
                    "id": .string(id.uuidString.lowercased()), "name": .string(name), "birthDate": .string(date),
                    "birthTime": .string(time), "timezone": .string(timezone), "latitude": .number(latitude),
                    "longitude": .number(longitude), "locationName": "Somewhere",
                ],
            ]
        )
        #expect(try await finished(job, stack).status == "succeeded")
        return id
    }

    func storedChart(_ profile: UUID) async throws -> NatalChart {
        let text = try await pool.withConnection { database in
            try database.query("SELECT chart_data::text AS c FROM birth_charts WHERE profile_id = $1", [profile])
                .first?.decode(String.self, "c")
        }
        return try JSONCoding.decoder.decode(NatalChart.self, from: Data(try #require(text).utf8))
    }

    func storedResult(_ id: String) async throws -> (kind: String, result: JSONValue?, svg: String?, rows: Int)? {
        try await pool.withConnection { database in
            try database.query(
                """
                SELECT kind, result::text AS r, svg, (SELECT count(*)::int FROM chart_results WHERE id = $1::uuid) AS n
                FROM chart_results WHERE id = $1::uuid
                """,
                [id]
            ).first.map {
                (
                    try $0.decode(String.self, "kind"),
                    try $0.decode(String?.self, "r").map { try JSONValue.parse(Data($0.utf8)) },
                    try $0.decode(String?.self, "svg"), try $0.decode(Int.self, "n")
                )
            }
        }
    }

    static func json(_ value: some Encodable) throws -> JSONValue {
        try JSONValue.parse(JSONCoding.encoder.encode(value))
    }

    /// An object without `calculatedAt` (when the chart was cast, not what it says).
    static func withoutCalculatedAt(_ value: JSONValue?) -> JSONValue? {
        guard case .object(var fields)? = value else { return value }
        fields["calculatedAt"] = nil
        return .object(fields)
    }

    func metric(_ stack: Stack, kind: String, outcome: String) async throws -> Double {
        let (data, _) = try await URLSession.shared.data(from: URL(string: stack.metricsURL)!)
        let text = String(decoding: data, as: UTF8.self)
        let prefix = "astro_chart_results_total{kind=\"\(kind)\",outcome=\"\(outcome)\"} "
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return 0 }
        return Double(line.dropFirst(prefix.count)) ?? -1
    }

    @Test func synastryIsStoredAsTheEngineComputesItThenServedFromTheCache() async throws {
        let stack = try await Self.start(label: "chart-results-synastry")
        defer { stack.close() }
        let events = try await RuntimeTestEnvironment.eventQueue(
            publisher: stack.publisher,
            routingKey: "chart.computed"
        )
        let user = UUID()
        let me = try await profile(
            stack,
            user: user,
            name: "Me",
            date: "1990-10-07",
            time: "15:00",
            timezone: "Europe/Kyiv",
            latitude: 50.45,
            longitude: 30.52
        )
        let partner = try await profile(
            stack,
            user: user,
            name: "Partner",
            date: "1988-03-21",
            time: "06:30",
            timezone: "America/New_York",
            latitude: 40.71,
            longitude: -74.0
        )
        let body: JSONValue = [
            "userId": .string(user.uuidString.lowercased()), "profileId": .string(me.uuidString.lowercased()),
            "partnerProfileId": .string(partner.uuidString.lowercased()),
        ]
        func synastryJob() async throws -> (JobID, JSONValue) {
            let id = JobID.random()
            guard case .object(var fields) = body else { throw TestFailure("not an object") }
            fields["jobId"] = .string(id.description)
            try await publish(stack, .chartSynastry, .object(fields))
            let done = try await finished(id, stack)
            #expect(done.status == "succeeded", "\(done)\n\(stack.worker.output)")
            return (id, try #require(done.result))
        }
        let (firstJob, first) = try await synastryJob()
        #expect(first["kind"] == "synastry")
        #expect(first["cached"] == .bool(false))
        let resultID = try #require(first["resultId"]?.stringValue)
        let stored = try #require(try await storedResult(resultID))
        #expect(stored.kind == "synastry" && stored.svg == nil && stored.rows == 1)
        let document = try #require(stored.result)

        // What the engine gives for the two stored charts.
        let a = try await storedChart(me)
        let b = try await storedChart(partner)
        let synastry = try ChartEngine.synastry(a, b)
        #expect(document["synastry"] == (try Self.json(synastry)))
        #expect(document["compatibility"] == (try Self.json(CompatibilityScoring.score(synastry))))
        #expect(
            Self.withoutCalculatedAt(document["composite"])
                == Self.withoutCalculatedAt(try Self.json(try await Self.engine.composite(a, b)))
        )
        #expect(
            Self.withoutCalculatedAt(document["davison"])
                == Self.withoutCalculatedAt(try Self.json(try await Self.engine.davison(a, b)))
        )
        #expect((document["synastry"]?["aspects"]?.arrayValue?.count ?? 0) > 5)

        // The same request again: the same id, nothing computed, no second row, counted as cached.
        let (secondJob, second) = try await synastryJob()
        #expect(second["resultId"]?.stringValue == resultID)
        #expect(second["cached"] == .bool(true))
        #expect(try await storedResult(resultID)?.rows == 1)
        let rows = try await pool.withConnection { database in
            try database.query("SELECT count(*)::int AS n FROM chart_results WHERE user_id = $1", [user]).first?
                .decode(Int.self, "n")
        }
        #expect(rows == 1)
        #expect(try await metric(stack, kind: "synastry", outcome: "computed") == 1)
        #expect(try await metric(stack, kind: "synastry", outcome: "cached") == 1)

        let delivered = try await RuntimeTestEnvironment.drain(events, count: 2)
        let announced = try delivered.map { try JSONValue.parse($0.body) }
        #expect(
            announced.map { [$0["jobId"], $0["resultId"], $0["kind"], $0["cached"]] } == [
                [.string(firstJob.description), .string(resultID), "synastry", .bool(false)],
                [.string(secondJob.description), .string(resultID), "synastry", .bool(true)],
            ]
        )

        // A wheel of the same two: an SVG that parses, with both charts' planets on it.
        let wheelJob = JobID.random()
        try await publish(
            stack,
            .chartRender,
            [
                "jobId": .string(wheelJob.description), "userId": .string(user.uuidString.lowercased()),
                "profileId": .string(me.uuidString.lowercased()), "wheel": "synastry",
                "partnerProfileId": .string(partner.uuidString.lowercased()), "theme": "dark",
            ]
        )
        let wheel = try await finished(wheelJob, stack)
        #expect(wheel.status == "succeeded", "\(wheel)")
        let wheelID = try #require(wheel.result?["resultId"]?.stringValue)
        #expect(wheel.result?["kind"] == "wheel")
        let svg = try #require(try await storedResult(wheelID)?.svg)
        let titles = try await Self.bodyTitles(svg)
        // Inner ring: "Sun 14°… Libra, house 10"; outer ring: "…, in inner house 4".
        let outer = titles.filter { $0.contains("in inner house") }
        let inner = titles.filter { !$0.contains("in inner house") }
        #expect(inner.count == 10 && outer.count == 10, "\(titles)")
        let bSun = try #require(b.planets.first { $0.name == .sun })
        #expect(outer.contains { $0.hasPrefix("Sun ") && $0.contains(bSun.sign.rawValue) }, "\(outer)")
        let aSun = try #require(a.planets.first { $0.name == .sun })
        #expect(inner.contains { $0.hasPrefix("Sun ") && $0.contains(aSun.sign.rawValue) }, "\(inner)")
        #expect(svg.contains("Me (inner) and Partner (outer)"))

        // astroctl, as the operator's role: the stored document and the wheel's bytes.
        let operatorURL = try await RuntimeTestEnvironment.databaseURL(as: .operator)
        let astroctl = ProcessRunner.productPath("astroctl")
        // Through a file: the document is larger than a pipe holds, and ProcessRunner reads the
        // pipe only once the process ended.
        let printed = FileManager.default.temporaryDirectory.appendingPathComponent("result-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: printed) }
        let shown = try await ProcessRunner.run(
            "/bin/sh",
            [
                "-c", "exec \"$0\" chart-results show \"$1\" --json --database-url \"$2\" > \"$3\"", astroctl, resultID,
                operatorURL, printed.path,
            ]
        )
        #expect(shown.status == 0, "\(shown.error)")
        #expect(try JSONValue.parse(Data(contentsOf: printed)) == document)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("wheel-\(UUID()).svg")
        defer { try? FileManager.default.removeItem(at: file) }
        let written = try await ProcessRunner.run(
            astroctl,
            ["chart-results", "show", wheelID, "--svg", file.path, "--database-url", operatorURL]
        )
        #expect(written.status == 0, "\(written.error)")
        #expect(written.output.contains("kind       wheel"))
        #expect(try String(contentsOf: file, encoding: .utf8) == svg)
        let missing = try await ProcessRunner.run(
            astroctl,
            ["chart-results", "show", UUID().uuidString, "--database-url", operatorURL]
        )
        #expect(missing.status == 1 && missing.error.contains("no chart result"), "\(missing)")
        // astroctl publish checks a chart result job's body before queueing it.
        let bodyFile = FileManager.default.temporaryDirectory.appendingPathComponent("job-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: bodyFile) }
        try JSONValue.object([
            "userId": .string(user.uuidString.lowercased()), "profileId": .string(me.uuidString.lowercased()),
            "from": "2026-01-01", "to": "2027-02-05",
        ]).jsonData().write(to: bodyFile)
        let refused = try await ProcessRunner.run(astroctl, ["publish", "chart.transits", "--file", bodyFile.path])
        #expect(refused.status != 0 && refused.error.contains("invalid-range"), "\(refused)")
    }

    /// The `<title>` of every body on a wheel, read by Python's XML parser (so the SVG must be
    /// well-formed XML).
    static func bodyTitles(_ svg: String) async throws -> [String] {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("wheel-\(UUID()).svg")
        try Data(svg.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let run = try await ProcessRunner.run(
            "/usr/bin/env",
            [
                "python3", "-c",
                """
                import sys, json, xml.etree.ElementTree as ET
                ns = {"s": "http://www.w3.org/2000/svg"}
                root = ET.parse(sys.argv[1]).getroot()
                bodies = root.find(".//s:g[@id='bodies']", ns)
                print(json.dumps([g.find("s:title", ns).text for g in bodies.findall("s:g", ns)]))
                """,
                file.path,
            ]
        )
        #expect(run.status == 0, "\(run.output)\(run.error)")
        return try #require(try JSONValue.parse(Data(run.output.utf8)).arrayValue).compactMap(\.stringValue)
    }

    @Test func anotherUsersProfileIsNotFoundAndTheSameProfileIsRefused() async throws {
        let stack = try await Self.start(label: "chart-results-ownership")
        defer { stack.close() }
        let (user, other) = (UUID(), UUID())
        let mine = try await profile(
            stack,
            user: user,
            name: "Me",
            date: "1990-10-07",
            time: "15:00",
            timezone: "Europe/Kyiv",
            latitude: 50.45,
            longitude: 30.52
        )
        let theirs = try await profile(
            stack,
            user: other,
            name: "Them",
            date: "1985-01-01",
            time: "12:00",
            timezone: "Europe/London",
            latitude: 51.5,
            longitude: -0.12
        )
        for (partner, code) in [(theirs, "partner-not-found"), (UUID(), "partner-not-found"), (mine, "same-profile")] {
            let id = JobID.random()
            try await publish(
                stack,
                .chartSynastry,
                [
                    "jobId": .string(id.description), "userId": .string(user.uuidString.lowercased()),
                    "profileId": .string(mine.uuidString.lowercased()),
                    "partnerProfileId": .string(partner.uuidString.lowercased()),
                ]
            )
            let done = try await finished(id, stack)
            #expect(done.status == "failed" && done.code == code, "\(done)")
        }
        let rows = try await pool.withConnection { database in
            try database.query(
                "SELECT count(*)::int AS n FROM chart_results WHERE user_id = ANY($1::uuid[])",
                [
                    "{\(user.uuidString),\(other.uuidString)}"
                ]
            ).first?.decode(Int.self, "n")
        }
        #expect(rows == 0)
    }

    @Test func transitsAndSolarReturnEqualTheEngineAndBoundsAreKept() async throws {
        let stack = try await Self.start(label: "chart-results-time")
        defer { stack.close() }
        let user = UUID()
        let me = try await profile(
            stack,
            user: user,
            name: "Me",
            date: "1990-10-07",
            time: "15:00",
            timezone: "Europe/Kyiv",
            latitude: 50.45,
            longitude: 30.52
        )
        let natal = try await storedChart(me)
        let base: [String: JSONValue] = [
            "userId": .string(user.uuidString.lowercased()), "profileId": .string(me.uuidString.lowercased()),
        ]
        func run(
            _ type: JobType,
            _ extra: [String: JSONValue]
        ) async throws -> (
            status: String, result: JSONValue?, code: String?
        ) {
            let id = JobID.random()
            var body = base.merging(extra) { _, new in new }
            body["jobId"] = .string(id.description)
            try await publish(stack, type, .object(body))
            return try await finished(id, stack)
        }

        // Thirty days of transits: the engine's hits, exact instants and all.
        let transits = try await run(.chartTransits, ["from": "2026-03-01", "to": "2026-03-31T00:00:00Z"])
        #expect(transits.status == "succeeded", "\(transits)")
        let transitsID = try #require(transits.result?["resultId"]?.stringValue)
        let stored = try #require(try await storedResult(transitsID))
        let expected = try await Self.engine.transits(
            for: natal,
            from: ChartJobInstant.date(year: 2026, month: 3, day: 1),
            to: ChartJobInstant.date(year: 2026, month: 3, day: 31)
        )
        #expect(stored.kind == "transits")
        // Stored in the compact form, which holds the engine's report exactly.
        let compact = try #require(stored.result)
        #expect(TransitReport.isCompact(compact))
        let storedReport = try TransitReport(compactJSON: compact)
        #expect(try Self.json(storedReport.transits) == (try Self.json(expected.transits)))
        #expect(try Self.json(storedReport.ingresses) == (try Self.json(expected.ingresses)))
        #expect(!expected.transits.isEmpty)

        // 400 days, a reversed range, a range past 2101: refused before any work.
        for (from, to) in [("2026-01-01", "2027-02-05"), ("2026-02-01", "2026-01-01"), ("2100-06-01", "2101-02-01")] {
            let refused = try await run(.chartTransits, ["from": .string(from), "to": .string(to)])
            #expect(refused.status == "failed" && refused.code == "invalid-range", "\(from)…\(to): \(refused)")
        }

        // The solar return of 2027 at the birth place: the engine's instant.
        let solar = try await run(.chartReturn, ["kind": "solar-return", "year": 2027])
        #expect(solar.status == "succeeded", "\(solar)")
        #expect(solar.result?["kind"] == "solar-return")
        let solarID = try #require(solar.result?["resultId"]?.stringValue)
        let solarStored = try #require(try await storedResult(solarID))
        let solarExpected = try await Self.engine.solarReturn(for: Self.birth(of: natal), year: 2027)
        #expect(solarStored.result?["instant"] == .string(ISO8601.string(from: solarExpected.instant)))
        #expect(solarStored.result?["year"] == 2027)
        for (extra, code) in [
            (["kind": "solar-return", "year": 2101] as [String: JSONValue], "invalid-year"),
            (["kind": "solar-return", "year": 2027, "place": ["latitude": 91, "longitude": 0]], "invalid-place"),
            (["kind": "progressed", "date": "2101-01-02"], "invalid-range"), (["kind": "lunar-return"], "invalid-kind"),
        ] {
            let refused = try await run(.chartReturn, extra)
            #expect(refused.status == "failed" && refused.code == code, "\(extra): \(refused)")
        }
        let progressed = try await run(.chartReturn, ["kind": "progressed", "date": "2026-10-07"])
        #expect(progressed.status == "succeeded" && progressed.result?["kind"] == "progressed", "\(progressed)")

        // A transits wheel at a given minute: the sky of that minute outside; asked again with
        // the same minute (seconds dropped), the same stored wheel.
        let sky = try await run(.chartRender, ["wheel": "transits", "at": "2026-03-01T12:00:00Z"])
        #expect(sky.status == "succeeded", "\(sky)")
        let skyID = try #require(sky.result?["resultId"]?.stringValue)
        let skySVG = try #require(try await storedResult(skyID)?.svg)
        #expect(skySVG.contains("Transits 2026-03-01 12:00 UTC"))
        #expect(try await Self.bodyTitles(skySVG).filter { $0.contains("in inner house") }.count == 10)
        let again = try await run(.chartRender, ["wheel": "transits", "at": "2026-03-01T12:00:30Z"])
        #expect(again.result?["resultId"]?.stringValue == skyID && again.result?["cached"] == .bool(true))
    }

    /// Issue 29, F7: a user's computed results are bounded per 24 hours in the worker itself
    /// (what astroctl or a direct publish sends too): the third distinct transit range of a user
    /// with a quota of two is dead-lettered with `chart-quota-exceeded` and stores nothing, while
    /// a repeat of a stored one is still served from the cache; transits are stored compact.
    @Test func theQuotaStopsTheNextComputationAndTransitsAreStoredCompact() async throws {
        let stack = try await Self.start(label: "chart-results-quota", environment: [ChartResultQuota.variable: "2"])
        defer { stack.close() }
        let user = UUID()
        let me = try await profile(
            stack,
            user: user,
            name: "Me",
            date: "1990-10-07",
            time: "15:00",
            timezone: "Europe/Kyiv",
            latitude: 50.45,
            longitude: 30.52
        )
        func transits(_ from: String, _ to: String) async throws -> (status: String, result: JSONValue?, code: String?)
        {
            let id = JobID.random()
            try await publish(
                stack,
                .chartTransits,
                [
                    "jobId": .string(id.description), "userId": .string(user.uuidString.lowercased()),
                    "profileId": .string(me.uuidString.lowercased()), "from": .string(from), "to": .string(to),
                ]
            )
            return try await finished(id, stack)
        }
        func rows() async throws -> Int {
            try await pool.withConnection { database in
                try database.query("SELECT count(*)::int AS n FROM chart_results WHERE user_id = $1", [user]).first?
                    .decode(Int.self, "n") ?? -1
            }
        }
        // 30 and 366 days: computed, stored compact.
        let month = try await transits("2026-03-01", "2026-03-31")
        let year = try await transits("2026-01-01", "2027-01-02")
        #expect(month.status == "succeeded" && year.status == "succeeded", "\(month) \(year)")
        let natal = try await storedChart(me)
        for (outcome, (from, to)) in zip([month, year], [((2026, 3, 1), (2026, 3, 31)), ((2026, 1, 1), (2027, 1, 2))]) {
            let id = try #require(outcome.result?["resultId"]?.stringValue)
            let report = try await Self.engine.transits(
                for: natal,
                from: ChartJobInstant.date(year: from.0, month: from.1, day: from.2),
                to: ChartJobInstant.date(year: to.0, month: to.1, day: to.2)
            )
            // The full document (what was stored before) against the compact one now stored.
            let full = try Self.json(report).jsonString()
            let sizes = try await pool.withConnection { database in
                try database.query(
                    """
                    SELECT bytes, pg_column_size(result) AS stored, pg_column_size($2::jsonb) AS full_stored
                    FROM chart_results WHERE id = $1::uuid
                    """,
                    [id, full]
                ).first.map {
                    (
                        bytes: try $0.decode(Int.self, "bytes"), stored: try $0.decode(Int.self, "stored"),
                        fullStored: try $0.decode(Int.self, "full_stored")
                    )
                }
            }
            let measured = try #require(sizes)
            print(
                "F7 transits \(from)…\(to): JSON \(full.utf8.count) → \(measured.bytes) bytes; "
                    + "on disk (jsonb, TOAST) \(measured.fullStored) → \(measured.stored) bytes"
            )
            #expect(measured.bytes * 4 < full.utf8.count, "compact \(measured.bytes) of \(full.utf8.count)")
            #expect(measured.stored < measured.fullStored)
            let stored = try #require(try await storedResult(id)?.result)
            #expect(
                try TransitReport.expandedJSON(stored: stored.jsonString())
                    == String(
                        decoding: try JSONCoding.encoder.encode(report),
                        as: UTF8.self
                    )
            )
        }
        #expect(try await rows() == 2)

        // The third distinct range: refused before computing, nothing stored.
        let third = try await transits("2026-05-01", "2026-05-31")
        #expect(third.status == "failed" && third.code == "chart-quota-exceeded", "\(third)")
        #expect(try await rows() == 2)
        // Another kind counts against the same quota.
        let wheel = JobID.random()
        try await publish(
            stack,
            .chartRender,
            [
                "jobId": .string(wheel.description), "userId": .string(user.uuidString.lowercased()),
                "profileId": .string(me.uuidString.lowercased()), "wheel": "natal",
            ]
        )
        #expect(try await finished(wheel, stack).code == "chart-quota-exceeded")
        // A stored result costs nothing: served from the cache.
        let again = try await transits("2026-03-01", "2026-03-31")
        #expect(again.status == "succeeded" && again.result?["cached"] == .bool(true), "\(again)")
        #expect(again.result?["resultId"] == month.result?["resultId"])
        #expect(try await metric(stack, kind: "transits", outcome: "computed") == 2)
    }

    static func birth(of chart: NatalChart) -> BirthData {
        BirthData(
            name: "Me",
            birthDate: chart.birthDate,
            birthTime: chart.birthTime,
            timezone: chart.timezone,
            latitude: chart.latitude,
            longitude: chart.longitude,
            locationName: chart.locationName,
            houseSystem: chart.houseSystemRequested ?? chart.houseSystem,
            dstPolicy: chart.dstPolicyApplied,
            zodiac: chart.zodiac
        )
    }

    @Test func resultsUnusedForTheRetentionPeriodAreDeleted() async throws {
        let stack = try await Self.start(label: "chart-results-retention")
        defer { stack.close() }
        let user = UUID()
        let me = try await profile(
            stack,
            user: user,
            name: "Me",
            date: "1990-10-07",
            time: "15:00",
            timezone: "Europe/Kyiv",
            latitude: 50.45,
            longitude: 30.52
        )
        var ids: [String] = []
        for theme in ["light", "dark"] {
            let job = JobID.random()
            try await publish(
                stack,
                .chartRender,
                [
                    "jobId": .string(job.description), "userId": .string(user.uuidString.lowercased()),
                    "profileId": .string(me.uuidString.lowercased()), "wheel": "natal", "theme": .string(theme),
                ]
            )
            ids.append(try #require(try await finished(job, stack).result?["resultId"]?.stringValue))
        }
        // The light wheel was last used 181 days ago, the dark one now.
        let stale = ids[0]
        _ = try await pool.withConnection { database in
            try database.execute(
                "UPDATE chart_results SET last_used_at = now() - interval '181 days' WHERE id = $1::uuid",
                [stale]
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
        var off = RetentionConfiguration.defaults
        off.chartResultRetention = nil
        let kept = try await Retention(pool: maintenance, configuration: off, logger: RuntimeTestEnvironment.logger)
            .run(now: Date(), dryRun: false, deadline: .now + .seconds(60))
        #expect((kept.deleted[.chartResults] ?? 0) == 0)
        #expect(try await storedResult(ids[0]) != nil)
        let report = try await Retention(
            pool: maintenance,
            configuration: .defaults,
            logger: RuntimeTestEnvironment.logger
        ).run(now: Date(), dryRun: false, deadline: .now + .seconds(60))
        #expect(report.deleted[.chartResults] == 1)
        #expect(try await storedResult(ids[0]) == nil)
        #expect(try await storedResult(ids[1]) != nil)
        #expect(RetentionConfiguration.defaults.chartResultRetention == .seconds(180 * 86_400))
        #expect(throws: RetentionConfigurationError.self) {
            try RetentionConfiguration.fromEnvironment(["CHART_RESULT_RETENTION": "12h"])
        }
        #expect(
            try RetentionConfiguration.fromEnvironment(["CHART_RESULT_RETENTION": "off"]).chartResultRetention == nil
        )
    }

    @Test func deletingTheUserErasesTheirChartResults() async throws {
        let stack = try await Self.start(label: "chart-results-deletion")
        let billing = try await GatewayResourcesTests.startBillingAndReportWorkers()
        defer {
            billing.stop()
            stack.close()
        }
        let user = UUID()
        let me = try await profile(
            stack,
            user: user,
            name: "Me",
            date: "1990-10-07",
            time: "15:00",
            timezone: "Europe/Kyiv",
            latitude: 50.45,
            longitude: 30.52
        )
        let render = JobID.random()
        try await publish(
            stack,
            .chartRender,
            [
                "jobId": .string(render.description), "userId": .string(user.uuidString.lowercased()),
                "profileId": .string(me.uuidString.lowercased()), "wheel": "natal",
            ]
        )
        #expect(try await finished(render, stack).status == "succeeded")
        func count() async throws -> Int? {
            try await pool.withConnection { database in
                try database.query("SELECT count(*)::int AS n FROM chart_results WHERE user_id = $1", [user]).first?
                    .decode(Int.self, "n")
            }
        }
        #expect(try await count() == 1)
        let deletion = JobID.random()
        try await publish(
            stack,
            .userDelete,
            ["jobId": .string(deletion.description), "userId": .string(user.uuidString.lowercased())]
        )
        let deleted = try await finished(deletion, stack)
        #expect(deleted.status == "succeeded", "\(deleted)\n\(billing.output)")
        #expect(try await count() == 0)
        // A later job of the deleted user is refused and stores nothing.
        let late = JobID.random()
        try await publish(
            stack,
            .chartRender,
            [
                "jobId": .string(late.description), "userId": .string(user.uuidString.lowercased()),
                "profileId": .string(me.uuidString.lowercased()), "wheel": "natal",
            ]
        )
        let refused = try await finished(late, stack)
        #expect(refused.status != "succeeded", "\(refused)")
        #expect(try await count() == 0)
    }
}

extension ChartResultJobsTests.Stack {
    /// Stops the worker now (the next test's worker must not share its queues), empties the
    /// result jobs' dead-letter queues and closes the publisher.
    func close() {
        worker.stop()
        let publisher = publisher
        Task {
            // The refusals' dead letters: other suites read the contract's dead-letter queues.
            for type in JobType.chartResultJobs {
                _ = try? await publisher.purgeQueue(BrokerNames.deadLetterQueue(of: type.rawValue))
            }
            await publisher.close()
        }
    }
}
