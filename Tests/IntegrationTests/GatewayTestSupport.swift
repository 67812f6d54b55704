import AstroDomain
import Foundation
import Synchronization
import TestProcesses
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

    /// Processes a test started, stopped together (`stop()`, SIGTERM then SIGKILL to each
    /// group); `output` is their logs, each headed by its path.
    final class Processes: Sendable {
        let processes: [ChildProcess]
        init(processes: [ChildProcess]) {
            self.processes = processes
        }
        var logs: [URL] { processes.map(\.log) }
        /// Stops every process (blocking: it is what a `defer` can call).
        func stop() {
            for process in processes { process.send(SIGTERM) }
            for process in processes { process.stopWaiting() }
        }
        var output: String {
            processes.map { "\($0.label) (log \($0.log.path)):\n\($0.output)" }.joined(separator: "\n")
        }
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

    /// Starts `product` with `environment` over the test's own, as a `ChildProcess` (its output
    /// goes to a log file).
    ///
    /// A gateway also gets, unless `environment` says otherwise, the billing-worker's App Store
    /// policy of the tests (Sandbox, trusting the development PKI's root, as
    /// `BillingWorkerProcessTests` starts the worker: the gateway verifies notifications before
    /// queuing them), any free API and metrics port (`HTTP_PORT` and `GATEWAY_METRICS_PORT` 0:
    /// `listening` reads the ports it bound from its log) and the text log format.
    /// - Throws: `TestFailure` when the process cannot start.
    static func start(_ product: String, environment: [String: String], label: String) async throws -> ChildProcess {
        var environment = environment
        if product == "gateway" {
            environment = [
                "BILLING_ENVIRONMENT": "Sandbox",
                "BILLING_TRUSTED_ROOTS": BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der").path,
                "HTTP_PORT": "0", "GATEWAY_METRICS_PORT": "0", "LOG_FORMAT": "text",
            ].merging(environment) { _, given in given }
        }
        return try await ChildProcess.product(product, environment: environment, label: label)
    }

    /// The metrics port of each gateway `listening` saw, by its API base URL (`metricsURL`).
    private static let metricsPorts = Mutex<[String: Int]>([:])

    /// Waits until `gateway` logged the ports it bound ("gateway listening" `http.port`,
    /// "metrics listening" `metrics.port`; the log level must let info through) and returns its
    /// API base URL; `metricsURL` then knows its metrics port.
    /// - Throws: `TestFailure` naming the log (with its tail) when the gateway exits or does
    ///   not log a port within `timeout`.
    static func listening(_ gateway: ChildProcess, timeout: Duration = .seconds(60)) async throws -> String {
        try await gateway.waitForOutput("gateway listening", timeout: timeout)
        try await gateway.waitForOutput("metrics listening", timeout: timeout)
        guard let port = gateway.logValue("http.port", onLineWith: "gateway listening").flatMap(Int.init),
            let metricsPort = gateway.logValue("metrics.port", onLineWith: "metrics listening").flatMap(Int.init)
        else {
            throw TestFailure("\(gateway.label) logged no bound port\n\(gateway.tail())")
        }
        let base = "http://127.0.0.1:\(port)"
        metricsPorts.withLock { $0[base] = metricsPort }
        return base
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

    /// The `/metrics` URL of the gateway at `base`, on the metrics port it reported
    /// (`listening`); its API's port no longer serves `/metrics`.
    static func metricsURL(_ base: String) -> String {
        guard let port = metricsPorts.withLock({ $0[base] }) else {
            Issue.record("no metrics port known for \(base): start the gateway with `launch` or wait with `listening`")
            return base + "/metrics"
        }
        return "http://127.0.0.1:\(port)/metrics"
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

    /// A chart-worker's environment in the tests: its own broker user and database role, any free
    /// health port on the loopback (`HTTP_PORT` 0: it logs the one it bound at info), the
    /// migrations left to `astroctl migrate`, and `logLevel`.
    /// - Throws: `TestFailure` when the stack's URLs are not set.
    static func chartWorkerEnvironment(logLevel: String) async throws -> [String: String] {
        [
            "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.chartWorker),
            "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .chartWorker),
            "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": logLevel, "MIGRATE_ON_START": "false",
        ]
    }

    /// Starts the gateway on any free port (plus a chart-worker when `chartWorker`) and waits
    /// until `/readyz` answers 200.
    /// - Throws: when a process cannot start or the gateway is not ready within 60 s (its log
    ///   is recorded as an issue); every process started is stopped then.
    static func launch(
        chartWorker: Bool = false,
        environment: [String: String] = [:],
        label: String = "gateway"
    ) async throws -> Running {
        // The broker's topology, as `astroctl migrate` declares it before any service starts in a
        // deployment: the gateway's event queue binds to `astro.events`.
        await (try RuntimeTestEnvironment.contractPublisher(purging: [])).close()
        var processes: [ChildProcess] = []
        if chartWorker {
            processes.append(
                try await start(
                    "chart-worker",
                    environment: try await chartWorkerEnvironment(logLevel: "warning"),
                    label: "\(label)-chart-worker"
                )
            )
        }
        let started = Processes(processes: processes)
        do {
            let gateway = try await start(
                "gateway",
                environment: [
                    "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.gateway),
                    "DATABASE_URL": try await gatewayDatabaseURL(),
                    "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "info",
                ].merging(Self.unlimited) { _, new in new }.merging(environment) { _, new in new },
                label: label
            )
            let all = Processes(processes: [gateway] + processes)
            do {
                let base = try await listening(gateway)
                try await RuntimeTestEnvironment.eventually(
                    "\(label) answers 200 on \(base)/readyz",
                    timeout: .seconds(60)
                ) {
                    if !gateway.isRunning { throw TestFailure("\(label) exited\n\(gateway.tail())") }
                    return (try? await request("GET", "\(base)/readyz"))?.status == 200
                }
                return Running(base: base, processes: all)
            } catch {
                Issue.record("the gateway did not become ready: \(error)\n\(all.output.suffix(6_000))")
                all.stop()
                throw error
            }
        } catch {
            started.stop()
            throw error
        }
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
