import AMQP
import AstroDomain
import Foundation
import Postgres
import Schema
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

/// `astroctl chart` as a user runs it: offline, and publishing to a real chart-worker.
@Suite(.timeLimit(.minutes(2)))
struct AstroctlChartTests {
    static let kyiv = [
        "--date", "1990-10-07", "--time", "15:00", "--tz", "Europe/Kyiv", "--lat", "50.4501", "--lon", "30.5234",
    ]

    func astroctl(_ arguments: [String]) async throws -> ProcessRunner.Result {
        try await ProcessRunner.run(ProcessRunner.productPath("astroctl"), arguments)
    }

    @Test func offlineTableNamesEveryPlanet() async throws {
        let result = try await astroctl(["chart"] + Self.kyiv + ["--name", "Me"])
        #expect(result.status == 0, "\(result.error)")
        let lines = result.output.split(separator: "\n").map(String.init)
        // pyswisseph gives the Sun 193.9627° (13°57'45" Libra) in house 8 for this birth.
        #expect(lines.contains { $0.hasPrefix("Sun") && $0.contains("13°57'45\" Libra") && $0.hasSuffix("H8") })
        for planet in PlanetName.allCases { #expect(lines.contains { $0.hasPrefix(planet.rawValue + " ") }) }
        #expect(result.output.contains("UTC 1990-10-07T12:00:00Z"))
    }

    /// Issue 14: `--lat -33.87` was refused as a missing value; south and west are negative.
    @Test func negativeCoordinatesWork() async throws {
        let result = try await astroctl([
            "chart", "--date", "1990-10-07", "--time", "15:00", "--tz", "Australia/Sydney", "--lat", "-33.87",
            "--lon", "151.21", "--name", "Sydney",
        ])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains("lat -33.8700"))
        let west = try await astroctl([
            "chart", "--date", "1990-10-07", "--time", "15:00", "--tz", "America/Sao_Paulo", "--lat", "-23.55",
            "--lon", "-46.63",
        ])
        #expect(west.status == 0, "\(west.error)")
        #expect(west.output.contains("lon -46.6300"))
        // Out of range stays a one-line refusal with status 2, negative or not.
        let south = try await astroctl(["chart"] + Self.kyiv.map { $0 == "50.4501" ? "-95" : $0 })
        #expect(south.status == 2)
        #expect(south.error.contains("--lat"))
    }

    /// Usage errors exit 2 like every other invalid input, never with a trap.
    @Test func outOfRangeOptionsExitTwo() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pki-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(try await astroctl(["billing", "dev-pki", "--out", folder.path]).status == 0)
        let huge = try await astroctl([
            "billing", "dev-sign", "--pki", folder.path, "--product", "com.astrosvitla.report.credit.single",
            "--quantity", "9223372036854775807",
        ])
        #expect(huge.status == 2, "status \(huge.status): \(huge.error)")
        #expect(huge.error.contains("--quantity"))
        let negative = try await astroctl([
            "billing", "dev-sign", "--pki", folder.path, "--product", "com.astrosvitla.report.credit.single",
            "--quantity", "-1",
        ])
        #expect(negative.status == 2)
    }

    @Test func jsonIsTheContractsNatalChart() async throws {
        let result = try await astroctl(["chart"] + Self.kyiv + ["--json", "--points", "nodes,chiron"])
        #expect(result.status == 0, "\(result.error)")
        let chart = try JSONDecoder().decode(JSONValue.self, from: Data(result.output.utf8))
        guard case .array(let planets)? = chart["planets"], case .array(let points)? = chart["points"] else {
            Issue.record("no planets or points in \(result.output.prefix(200))")
            return
        }
        #expect(planets.count == 10)
        #expect(points.count == 3)
        #expect(chart["utc"] == "1990-10-07T12:00:00Z")
        #expect(chart["houseSystem"] == "placidus")
    }

    @Test(arguments: [
        (["--lat", "95"], "--lat"),
        (["--tz", "Mars/Olympus"], "--tz"),
        (["--date", "1899-12-31"], "--date"),
        (["--time", "25:00"], "--time"),
        (["--house-system", "vedic"], "--house-system"),
    ])
    func invalidInputExitsTwoWithOneLine(override: [String], flag: String) async throws {
        var arguments = Self.kyiv
        if let index = arguments.firstIndex(of: override[0]) {
            arguments[index + 1] = override[1]
        } else {
            arguments += override
        }
        let result = try await astroctl(["chart"] + arguments)
        #expect(result.status == 2)
        let lines = result.error.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.contains(flag) == true, "\(result.error)")
        #expect(result.output.isEmpty)
    }

    @Test func dstGapNeedsAPolicy() async throws {
        let gap = [
            "--date", "2021-03-28", "--time", "03:30", "--tz", "Europe/Kyiv", "--lat", "50.45", "--lon", "30.52",
        ]
        let refused = try await astroctl(["chart"] + gap)
        #expect(refused.status == 2)
        #expect(refused.error.contains("does not exist"))
        let resolved = try await astroctl(["chart"] + gap + ["--dst-policy", "later", "--json"])
        #expect(resolved.status == 0, "\(resolved.error)")
        #expect(resolved.output.contains("dst-policy-applied"))
    }

    /// A chart-worker process on its own least-privilege role and broker user, as deployed, once
    /// the topology exists as `astroctl migrate` leaves it. Stop it with SIGTERM.
    func startChartWorker(databaseURL: String) async throws -> ChildProcess {
        await (try await RuntimeTestEnvironment.contractPublisher(purging: [.chartCalculate])).close()
        let worker = try await ChildProcess.product(
            "chart-worker",
            environment: [
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.chartWorker),
                "DATABASE_URL": databaseURL, "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "warning",
            ],
            label: "astroctl-chart-worker"
        )
        let publisher = AMQPPublisher(
            configuration: try RuntimeTestEnvironment.amqpConfiguration(),
            logger: RuntimeTestEnvironment.logger
        )
        try await publisher.connect()
        defer { Task { await publisher.close() } }
        try await ChildProcess.eventually("the chart-worker consumes chart.calculate", on: [worker]) {
            ((try? await publisher.queueState("chart.calculate"))?.consumerCount ?? 0) > 0
        }
        return worker
    }

    @Test func publishWaitsForTheWorkerAndPrintsTheStoredChart() async throws {
        let databaseURL = try await RuntimeTestEnvironment.databaseURL(as: .chartWorker)
        let worker = try await startChartWorker(databaseURL: databaseURL)
        defer { worker.stopWaiting() }

        let user = UUID().uuidString.lowercased()
        let result = try await ProcessRunner.run(
            ProcessRunner.productPath("astroctl"),
            ["chart", "--publish", "--user", user, "--wait", "--name", "Published"] + Self.kyiv,
            // astroctl publishes as a client: it may publish chart.calculate and wait for events.
            environment: [
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.client), "DATABASE_URL": databaseURL,
            ]
        )
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains("Sun"))
        #expect(result.output.contains("13°57'45\" Libra"))
        #expect(result.output.hasPrefix("job "))
    }

    /// A jobId of another service's job, which row-level security hides from the chart-worker's
    /// role, is refused once as `job-id-reused` (not retried as a privilege error until its
    /// attempts run out), and the other job's row is untouched.
    @Test func aJobIDOfAnotherServicesJobIsRefusedOnceAndChangesNothing() async throws {
        let databaseURL = try await RuntimeTestEnvironment.databaseURL(as: .chartWorker)
        let worker = try await startChartWorker(databaseURL: databaseURL)
        defer { worker.stopWaiting() }
        let pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        defer { Task { await pool.close() } }
        let id = JobID.random()
        _ = try await pool.withConnection { database in
            try database.execute(
                "INSERT INTO jobs (id, kind, status, attempts) VALUES ($1, 'billing.verify-purchase', 'running', 1)",
                [id.uuid]
            )
        }
        let admin = try await RuntimeTestEnvironment.contractPublisher(purging: [])
        defer { Task { await admin.close() } }
        _ = try await admin.purgeQueue("chart.calculate.dead")
        // A valid request, so the job gets as far as claiming its row.
        let body = #"""
            {"jobId":"\#(id)","userId":"\#(UUID().uuidString.lowercased())","houseSystem":"placidus",
             "profile":{"name":"Reuse","birthDate":"1990-10-07","birthTime":"15:00","timezone":"Europe/Kyiv",
                        "latitude":50.4501,"longitude":30.5234,"locationName":"Kyiv, Ukraine"}}
            """#
        try await admin.publish(
            OutgoingMessage(exchange: BrokerNames.jobsExchange, routingKey: "chart.calculate", body: Data(body.utf8))
        )
        let letters = try await RuntimeTestEnvironment.drain("chart.calculate.dead", count: 1, timeout: .seconds(30))
        #expect(letters.first?.properties.headers[BrokerNames.Header.reasonCode] == .string("job-id-reused"))
        #expect(letters.first?.properties.headers[BrokerNames.Header.attempt] == .string("1"))
        let row = try await pool.withConnection { database in
            try database.query("SELECT kind, status, attempts FROM jobs WHERE id = $1", [id.uuid]).first!
        }
        #expect(try row.decode(String.self, "kind") == "billing.verify-purchase")
        #expect(try row.decode(String.self, "status") == "running")
        #expect(try row.decode(Int.self, "attempts") == 1)
    }
}
