import AMQP
import AstroDomain
import Crypto
import Foundation
import Gateway
import Postgres
import TestProcesses
import Testing
import WorkerRuntime
import Yams

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The real `gateway` process in front of the real broker, database and a chart-worker
/// process: a device registers, posts a profile, and reads its job back over HTTP.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GatewayProcessTests {
    typealias HTTPAnswer = GatewayHarness.HTTPAnswer
    typealias Processes = GatewayHarness.Processes
    static let profile = GatewayHarness.profile
    static func gatewayDatabaseURL() async throws -> String { try await GatewayHarness.gatewayDatabaseURL() }
    static func start(_ product: String, environment: [String: String], label: String) async throws -> ChildProcess {
        try await GatewayHarness.start(product, environment: environment, label: label)
    }
    static func request(
        _ method: String,
        _ url: String,
        token: String? = nil,
        body: JSONValue? = nil,
        headers: [String: String] = [:]
    ) async throws -> HTTPAnswer {
        try await GatewayHarness.request(method, url, token: token, body: body, headers: headers)
    }
    static func rawGet(_ url: String) async throws -> String { try await GatewayHarness.rawGet(url) }
    static func padded(_ base64URL: String) -> String { GatewayHarness.padded(base64URL) }

    @Test func aDeviceRegistersPostsAProfileAndReadsItsJob() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [.chartCalculate])
        defer { Task { await publisher.close() } }
        let worker = try await Self.start(
            "chart-worker",
            environment: try await GatewayHarness.chartWorkerEnvironment(logLevel: "warning"),
            label: "gateway-chart-worker"
        )
        let gateway = try await Self.start(
            "gateway",
            environment: [
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.gateway),
                "DATABASE_URL": try await Self.gatewayDatabaseURL(),
                "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "info",
            ],
            label: "gateway"
        )
        let gatewayLog = gateway.log
        let processes = Processes(processes: [gateway, worker])
        defer { processes.stop() }
        let base = try await GatewayHarness.listening(gateway)
        do {
            try await RuntimeTestEnvironment.eventually("the gateway is ready", timeout: .seconds(60)) {
                (try? await Self.request("GET", "\(base)/readyz"))?.status == 200
            }
        } catch {
            Issue.record("the gateway did not become ready: \(error)\n\(processes.output)")
            throw error
        }

        // The served OpenAPI document is the repository's openapi.yaml, and it parses.
        let (documentData, documentResponse) = try await URLSession.shared.data(
            from: URL(string: "\(base)/openapi.yaml")!
        )
        let documentHTTP = try #require(documentResponse as? HTTPURLResponse)
        #expect(documentHTTP.statusCode == 200)
        #expect(documentHTTP.value(forHTTPHeaderField: "Content-Type") == "application/yaml")
        let served = try #require(String(data: documentData, encoding: .utf8))
        let repositoryFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("openapi.yaml")
        #expect(served == (try String(contentsOf: repositoryFile, encoding: .utf8)))
        let parsed = try #require(try Yams.load(yaml: served) as? [String: Any])
        #expect((parsed["openapi"] as? String)?.hasPrefix("3.1.") == true)
        #expect((parsed["paths"] as? [String: Any])?["/v1/profiles"] != nil)

        // Register two devices.
        let first = try await Self.request("POST", "\(base)/v1/devices")
        #expect(first.status == 201)
        #expect(first.headers["x-request-id"] != nil)
        let access = try #require(first.json?["accessToken"]?.stringValue)
        let refresh = try #require(first.json?["refreshToken"]?.stringValue)
        let other = try #require(try await Self.request("POST", "\(base)/v1/devices").json?["accessToken"]?.stringValue)

        // A known path with a method it lacks is 405 with Allow; a body that is not an object is 400.
        let wrongMethod = try await Self.request("PUT", "\(base)/v1/devices")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.headers["allow"] == "POST")
        #expect(wrongMethod.json?["code"]?.stringValue == "method-not-allowed")
        let notAnObject = try await Self.request("POST", "\(base)/v1/devices", body: .array([]))
        #expect(notAnObject.status == 400)
        #expect(notAnObject.json?["code"]?.stringValue == "invalid-json")
        // Without App Attest its members are ignored, but only when shaped as the document says.
        let longChallenge = try await Self.request(
            "POST",
            "\(base)/v1/devices",
            body: ["challenge": .string(String(repeating: "0", count: 129))]
        )
        #expect(longChallenge.status == 400)
        #expect(longChallenge.json?["field"]?.stringValue == "challenge")
        #expect(try await Self.request("POST", "\(base)/v1/devices", body: ["challenge": "abc"]).status == 201)

        // Post a profile; a retry with the same key answers with the same job.
        let key = UUID().uuidString
        let posted = try await Self.request(
            "POST",
            "\(base)/v1/profiles",
            token: access,
            body: Self.profile,
            headers: ["Idempotency-Key": key]
        )
        #expect(posted.status == 202, "\(String(describing: posted.json))\n\(processes.output)")
        let jobID = try #require(posted.json?["jobId"]?.stringValue)
        #expect(posted.headers["location"] == "/v1/jobs/\(jobID)")
        let retried = try await Self.request(
            "POST",
            "\(base)/v1/profiles",
            token: access,
            body: Self.profile,
            headers: ["Idempotency-Key": key]
        )
        #expect(retried.status == 202)
        #expect(retried.json?["jobId"]?.stringValue == jobID)

        // The job runs to its end.
        var last: HTTPAnswer?
        do {
            try await RuntimeTestEnvironment.eventually("the job succeeds", timeout: .seconds(60)) {
                last = try await Self.request("GET", "\(base)/v1/jobs/\(jobID)", token: access)
                return last?.json?["status"] == "succeeded"
            }
        } catch {
            Issue.record("last answer: \(String(describing: last?.json))\n\(processes.output)")
            throw error
        }
        #expect(last?.json?["result"]?["profileId"] != nil, "\(String(describing: last?.json))")

        // Another user's token: 404, not 403.
        let foreign = try await Self.request("GET", "\(base)/v1/jobs/\(jobID)", token: other)
        #expect(foreign.status == 404)
        #expect(foreign.headers["content-type"] == "application/problem+json")
        #expect(foreign.json?["code"] == "not-found")

        // A token forged with another key under the real key id: 401.
        let kid = try #require(
            try? JSONValue.parse(
                Data(base64Encoded: Self.padded(String(access.split(separator: ".")[0]))) ?? Data()
            )["kid"]?.stringValue
        )
        let user = try #require(first.json?["userId"]?.stringValue.flatMap(UserID.init))
        let forged = try AccessTokenSigner(
            keyID: kid,
            key: P256.Signing.PrivateKey(),
            issuer: "astrosvitla-gateway",
            audience: "astrosvitla-app",
            lifetime: .seconds(900)
        ).sign(user: user)
        let refused = try await Self.request("GET", "\(base)/v1/jobs/\(jobID)", token: forged)
        #expect(refused.status == 401)
        #expect(refused.json?["code"] == "invalid-token-signature")
        #expect(try await Self.request("GET", "\(base)/v1/jobs/\(jobID)").status == 401)

        // Invalid birth data is refused before anything is published.
        var invalid = Self.profile
        if case .object(var body) = invalid, case .object(var profile)? = body["profile"] {
            profile["latitude"] = 95
            body["profile"] = .object(profile)
            invalid = .object(body)
        }
        let rejected = try await Self.request("POST", "\(base)/v1/profiles", token: access, body: invalid)
        #expect(rejected.status == 422)
        #expect(rejected.json?["code"] == "latitude-out-of-range")
        #expect(rejected.json?["field"] == "profile.latitude")

        // A profile id to update is not taken on creation.
        var withID = Self.profile
        if case .object(var body) = withID, case .object(var profile)? = body["profile"] {
            profile["id"] = .string(UUID().uuidString)
            body["profile"] = .object(profile)
            withID = .object(body)
        }
        let refusedID = try await Self.request("POST", "\(base)/v1/profiles", token: access, body: withID)
        #expect(refusedID.status == 400)
        #expect(refusedID.json?["field"] == "profile.id")

        // The refresh token works once.
        let renewed = try await Self.request("POST", "\(base)/v1/token", body: ["refreshToken": .string(refresh)])
        #expect(renewed.status == 200)
        #expect(renewed.json?["refreshToken"]?.stringValue != refresh)
        let renewedAccess = try #require(renewed.json?["accessToken"]?.stringValue)
        #expect(try await Self.request("GET", "\(base)/v1/jobs/\(jobID)", token: renewedAccess).status == 200)
        let reused = try await Self.request("POST", "\(base)/v1/token", body: ["refreshToken": .string(refresh)])
        #expect(reused.status == 401)

        // Concurrent retries with one key: one job (under a name of its own: the first profile,
        // "Me", exists by now, and another profile may not take its name).
        let concurrentKey = UUID().uuidString
        var renamed = Self.profile
        if case .object(var body) = renamed, case .object(var profile)? = body["profile"] {
            profile["name"] = "Concurrent"
            body["profile"] = .object(profile)
            renamed = .object(body)
        }
        let concurrentBody = renamed
        let answers = try await withThrowingTaskGroup(of: HTTPAnswer.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    try await Self.request(
                        "POST",
                        "\(base)/v1/profiles",
                        token: access,
                        body: concurrentBody,
                        headers: ["Idempotency-Key": concurrentKey]
                    )
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0.status == 202 })
        #expect(Set(answers.compactMap { $0.json?["jobId"]?.stringValue }).count == 1)

        // A body over MAX_BODY_BYTES: 413, unread.
        let huge: JSONValue = ["profile": ["name": .string(String(repeating: "x", count: 20_000))]]
        let tooLarge = try await Self.request("POST", "\(base)/v1/profiles", token: access, body: huge)
        #expect(tooLarge.status == 413)
        #expect(tooLarge.json?["code"] == "body-too-large")

        // An unknown route: a problem too, with the request id the client sent.
        let unknown = try await Self.request("GET", "\(base)/v1/nothing", headers: ["X-Request-Id": "trace-42"])
        #expect(unknown.status == 404)
        #expect(unknown.headers["content-type"] == "application/problem+json")
        #expect(unknown.headers["x-request-id"] == "trace-42")
        #expect(try String(contentsOf: gatewayLog, encoding: .utf8).contains("hb.request.id=trace-42"))

        // Metrics count the requests.
        let metrics = try await Self.rawGet(GatewayHarness.metricsURL(base))
        #expect(metrics.contains("gateway_requests_total"))
        #expect(metrics.contains("gateway_publishes_total{outcome=\"confirmed\"}"))

        // SIGTERM: a graceful shutdown, exit status 0.
        let code = await gateway.stop(grace: .seconds(20))
        #expect(code == 0, "\(processes.output)")
        // Every answer above was one openapi.yaml lists for its route.
        #expect(!(try String(contentsOf: gatewayLog, encoding: .utf8)).contains("status not in the route table"))
    }

    /// With the broker out of reach a POST is answered 503, never 202, and the job it would have
    /// been is not shown; /readyz says not ready.
    @Test func noConfirmNo202() async throws {
        let gateway = try await Self.start(
            "gateway",
            environment: [
                // A port nothing listens on.
                "AMQP_URL": "amqp://astro-client:astro-client-dev@127.0.0.1:1/%2F",
                "DATABASE_URL": try await Self.gatewayDatabaseURL(),
                // Info: the bound ports are logged at info.
                "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "info", "REQUEST_TIMEOUT_MS": "1500",
            ],
            label: "gateway-no-broker"
        )
        let processes = Processes(processes: [gateway])
        defer { processes.stop() }
        let base = try await GatewayHarness.listening(gateway)
        try await ChildProcess.eventually("the gateway answers /healthz 200", on: [gateway]) {
            (try? await Self.request("GET", "\(base)/healthz"))?.status == 200
        }
        let ready = try await Self.request("GET", "\(base)/readyz")
        #expect(ready.status == 503)
        #expect(ready.headers["content-type"] == "application/problem+json")
        let device = try await Self.request("POST", "\(base)/v1/devices")
        let access = try #require(device.json?["accessToken"]?.stringValue, "\(processes.output)")
        let posted = try await Self.request(
            "POST",
            "\(base)/v1/profiles",
            token: access,
            body: Self.profile,
            headers: ["Idempotency-Key": "k-1"]
        )
        #expect(posted.status == 503)
        #expect(posted.json?["code"] == "broker-unavailable")
        #expect(posted.headers["retry-after"] != nil)
        #expect(posted.headers["x-request-id"] != nil)

        // Without a key the job is recorded already marked published; the refused publish takes
        // the mark back, so the record says what the answer said: not queued.
        let keyless = try await Self.request("POST", "\(base)/v1/profiles", token: access, body: Self.profile)
        #expect(keyless.status == 503)
        let user = try #require(UUID(uuidString: device.json?["userId"]?.stringValue ?? ""))
        let pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        let marks = try await pool.withConnection { database in
            try database.query(
                "SELECT published_at IS NOT NULL AS published FROM gateway_jobs WHERE user_id = $1 AND idempotency_key IS NULL",
                [user]
            )
            .map { try $0.decode(Bool.self, "published") }
        }
        await pool.close()
        #expect(marks == [false])

        // A body trickled in a byte at a time, never idle but never done: 408 at the timeout.
        let trickle = try await ProcessRunner.run(
            "/bin/bash",
            [
                "-c",
                """
                exec 3<>/dev/tcp/127.0.0.1/\(URL(string: base)?.port ?? 0)
                printf 'POST /v1/devices HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Length: 100\\r\\n\\r\\n' >&3
                for i in 1 2 3 4 5 6 7 8 9 10; do printf x >&3 2>/dev/null || break; sleep 0.4; done &
                timeout 8 head -c 12 <&3
                """,
            ]
        )
        #expect(trickle.output == "HTTP/1.1 408", "\(trickle)")
    }

    /// A broker that stops confirming mid-test (a memory alarm blocks publishers): 503, never
    /// 202; once it confirms again, the retry with the same key is accepted with one job id.
    @Test func aBlockedBrokerGets503ThenTheRetryIsAccepted() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [.chartCalculate])
        let gateway = try await Self.start(
            "gateway",
            environment: [
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.gateway),
                "DATABASE_URL": try await Self.gatewayDatabaseURL(),
                // Info: the bound ports are logged at info.
                "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "info", "REQUEST_TIMEOUT_MS": "1500",
            ],
            label: "gateway-blocked"
        )
        let processes = Processes(processes: [gateway])
        defer { processes.stop() }
        let base = try await GatewayHarness.listening(gateway)
        try await ChildProcess.eventually("the gateway answers /readyz 200", on: [gateway]) {
            (try? await Self.request("GET", "\(base)/readyz"))?.status == 200
        }
        let access = try #require(
            try await Self.request("POST", "\(base)/v1/devices").json?["accessToken"]?.stringValue
        )
        let key = UUID().uuidString
        try await AMQPTestEnvironment.stack("rabbit-ctl", ["set_vm_memory_high_watermark", "absolute", "1"])
        let blocked: HTTPAnswer
        do {
            blocked = try await Self.request(
                "POST",
                "\(base)/v1/profiles",
                token: access,
                body: Self.profile,
                headers: ["Idempotency-Key": key]
            )
        } catch {
            try await AMQPTestEnvironment.stack("rabbit-ctl", ["set_vm_memory_high_watermark", "0.4"])
            throw error
        }
        let readyWhileBlocked = try await Self.request("GET", "\(base)/readyz").status
        try await AMQPTestEnvironment.stack("rabbit-ctl", ["set_vm_memory_high_watermark", "0.4"])
        #expect(blocked.status == 503, "\(String(describing: blocked.json))")
        #expect(blocked.json?["code"] == "broker-unavailable")
        #expect(readyWhileBlocked == 503)

        var accepted: HTTPAnswer?
        try await RuntimeTestEnvironment.eventually("the retry is accepted", timeout: .seconds(30)) {
            accepted = try await Self.request(
                "POST",
                "\(base)/v1/profiles",
                token: access,
                body: Self.profile,
                headers: ["Idempotency-Key": key]
            )
            return accepted?.status == 202
        }
        let jobID = try #require(accepted?.json?["jobId"]?.stringValue)
        let shown = try await Self.request("GET", "\(base)/v1/jobs/\(jobID)", token: access)
        #expect(shown.status == 200)
        #expect(shown.json?["status"] == "queued")
        // The job is queued. The blocked publish may reach the queue too once the alarm clears:
        // it carries the same job id, which the worker runs once.
        let state = try await publisher.queueState(JobType.chartCalculate.rawValue)
        #expect((1...2).contains(state.messageCount))
        _ = try await publisher.purgeQueue(JobType.chartCalculate.rawValue)
        await publisher.close()
    }
}
