import AstroDomain
import Foundation
import Testing
import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the gateway's integration tests share: starting the real processes, plain HTTP calls,
/// and a gateway with a chart-worker behind it, ready to take requests.
enum GatewayHarness {
    struct HTTPAnswer {
        var status: Int
        var headers: [String: String]
        var json: JSONValue?
    }

    final class Processes: Sendable {
        let processes: [Process]
        let logs: [URL]
        init(processes: [Process], logs: [URL]) {
            self.processes = processes
            self.logs = logs
        }
        func stop() {
            for process in processes where process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
        }
        var output: String { logs.map { (try? String(contentsOf: $0, encoding: .utf8)) ?? "" }.joined(separator: "\n") }
    }

    static let profile: JSONValue = [
        "profile": [
            "name": "Me", "birthDate": "1990-10-07", "birthTime": "15:00", "timezone": "Europe/Kyiv",
            "latitude": 50.4501, "longitude": 30.5234, "locationName": "Kyiv, Ukraine",
        ]
    ]

    /// The gateway's own role (migration 0014), logging in as `astroctl migrate` lets it.
    static func gatewayDatabaseURL() async throws -> String {
        try await RuntimeTestEnvironment.databaseURL(as: .gateway)
    }

    /// Starts `product` with `environment` over the test's own; its output goes to a log file.
    ///
    /// A gateway also gets, unless `environment` says otherwise, the billing-worker's App Store
    /// policy of the tests (Sandbox, trusting the development PKI's root, as
    /// `BillingWorkerProcessTests` starts the worker: the gateway verifies notifications before
    /// queuing them) and its metrics on `HTTP_PORT` + 1 (`metricsURL`), so that no two test
    /// gateways want the default metrics port.
    static func start(_ product: String, environment: [String: String], label: String) throws -> (Process, URL) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ProcessRunner.productPath(product))
        var environment = environment
        if product == "gateway" {
            let httpPort = Int(environment["HTTP_PORT"] ?? "") ?? 0
            environment = [
                "BILLING_ENVIRONMENT": "Sandbox",
                "BILLING_TRUSTED_ROOTS": BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der").path,
                "GATEWAY_METRICS_PORT": httpPort == 0 ? "0" : "\(httpPort + 1)",
            ].merging(environment) { _, given in given }
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID()).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        try process.runTracked()
        return (process, log)
    }

    static func request(
        _ method: String,
        _ url: String,
        token: String? = nil,
        body: JSONValue? = nil,
        headers: [String: String] = [:],
        timeout: TimeInterval = 10
    ) async throws -> HTTPAnswer {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.timeoutInterval = timeout
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = body.jsonData()
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            fields[String(describing: name).lowercased()] = String(describing: value)
        }
        return HTTPAnswer(status: http.statusCode, headers: fields, json: try? JSONValue.parse(data))
    }

    /// The `/metrics` URL of a gateway `start` started at `base` (its metrics port is one above
    /// its API's, which no longer serves `/metrics`).
    static func metricsURL(_ base: String) -> String {
        guard var components = URLComponents(string: base), let port = components.port else { return base + "/metrics" }
        components.port = port + 1
        components.path = "/metrics"
        return components.string ?? base + "/metrics"
    }

    static func rawGet(_ url: String) async throws -> String {
        let (data, _) = try await URLSession.shared.data(from: URL(string: url)!)
        return String(decoding: data, as: UTF8.self)
    }

    static func padded(_ base64URL: String) -> String {
        var text = base64URL.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return text
    }

    /// A running gateway (the gateway's broker user and database role) and, when asked,
    /// a chart-worker; stop them with `processes.stop()`.
    struct Running {
        let base: String
        let processes: Processes
    }

    /// Starts the gateway on a random port (plus a chart-worker when `chartWorker`) and waits
    /// until `/readyz` answers 200.
    /// - Throws: when a process cannot start or the gateway is not ready within 30 s (its log
    ///   is recorded as an issue).
    static func launch(
        chartWorker: Bool = false,
        environment: [String: String] = [:],
        label: String = "gateway"
    ) async throws -> Running {
        // The broker's topology, as `astroctl migrate` declares it before any service starts in a
        // deployment: the gateway's event queue binds to `astro.events`.
        await (try RuntimeTestEnvironment.contractPublisher(purging: [])).close()
        var processes: [Process] = []
        var logs: [URL] = []
        if chartWorker {
            let (worker, workerLog) = try start(
                "chart-worker",
                environment: [
                    "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.chartWorker),
                    "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .chartWorker),
                    "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "warning", "MIGRATE_ON_START": "false",
                ],
                label: "\(label)-chart-worker"
            )
            processes.append(worker)
            logs.append(workerLog)
        }
        // A random port, and another one when it was taken (other stacks share this machine):
        // the gateway then exits at once with "Address already in use". Even, so that the metrics
        // port (one above) is not another test gateway's API port.
        var port = 0
        var gateway = Process()
        var gatewayLog = URL(fileURLWithPath: "/dev/null")
        for attempt in 1...5 {
            port = Int.random(in: 10_000..<20_000) * 2
            (gateway, gatewayLog) = try start(
                "gateway",
                environment: [
                    "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.gateway),
                    "DATABASE_URL": try await gatewayDatabaseURL(),
                    "HTTP_PORT": "\(port)", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "info",
                ].merging(Self.unlimited) { _, new in new }.merging(environment) { _, new in new },
                label: label
            )
            let started = gateway
            let health = "http://127.0.0.1:\(port)/healthz"
            try await RuntimeTestEnvironment.eventually("the gateway binds or exits", timeout: .seconds(30)) {
                if !started.isRunning { return true }
                return (try? await request("GET", health))?.status == 200
            }
            let output = (try? String(contentsOf: gatewayLog, encoding: .utf8)) ?? ""
            if gateway.isRunning || attempt == 5 || !output.contains("Address already in use") { break }
            gateway.waitUntilExit()
        }
        let base = "http://127.0.0.1:\(port)"
        processes.insert(gateway, at: 0)
        logs.insert(gatewayLog, at: 0)
        let running = Running(base: base, processes: Processes(processes: processes, logs: logs))
        do {
            try await RuntimeTestEnvironment.eventually("the gateway is ready", timeout: .seconds(30)) {
                (try? await request("GET", "\(base)/readyz"))?.status == 200
            }
        } catch {
            Issue.record("the gateway did not become ready: \(error)\n\(running.processes.output)")
            running.processes.stop()
            throw error
        }
        return running
    }

    /// Rate limits far above anything a test sends from its one address (the limits stay on,
    /// never reached); GatewayLimitsTests sets low ones.
    static let unlimited = [
        "RATE_LIMIT_USER_PER_SECOND": "100000", "RATE_LIMIT_USER_BURST": "100000",
        "RATE_LIMIT_IP_PER_SECOND": "100000", "RATE_LIMIT_IP_BURST": "100000",
        "RATE_LIMIT_REGISTER_PER_MINUTE": "1000000", "RATE_LIMIT_REGISTER_BURST": "100000",
        "RATE_LIMIT_APPSTORE_PER_MINUTE": "1000000", "RATE_LIMIT_APPSTORE_BURST": "100000",
    ]

    /// Registers a device; returns its user id and access token.
    static func register(_ base: String) async throws -> (user: String, token: String) {
        let answer = try await request("POST", "\(base)/v1/devices")
        let user = try #require(answer.json?["userId"]?.stringValue)
        let token = try #require(answer.json?["accessToken"]?.stringValue)
        return (user, token)
    }
}
