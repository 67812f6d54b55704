import AMQP
import AstroDomain
import Foundation
import RetryBackoff
import Testing

@testable import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite struct ConfigurationTests {
    @Test func defaultsWithAnEmptyEnvironment() throws {
        let configuration = try WorkerConfiguration.fromEnvironment([:], defaultHTTPPort: 8081)
        #expect(configuration.prefetch == 16)
        #expect(configuration.maxAttempts == 5)
        #expect(configuration.httpPort == 8081)
        #expect(configuration.amqp.port == 5672)
        #expect(configuration.database.database == "astro")
        #expect(configuration.queueType == .classic)
        #expect(configuration.migrateOnStart)
    }

    @Test func aWorkerChoosesItsOwnDefaultPrefetchAndPREFETCHStillWins() throws {
        let reportWorker = try WorkerConfiguration.fromEnvironment([:], defaultHTTPPort: 8082, defaultPrefetch: 32)
        #expect(reportWorker.prefetch == 32)
        let told = try WorkerConfiguration.fromEnvironment(
            ["PREFETCH": "8"],
            defaultHTTPPort: 8082,
            defaultPrefetch: 32
        )
        #expect(told.prefetch == 8)
    }

    @Test func readsEverySetting() throws {
        let configuration = try WorkerConfiguration.fromEnvironment(
            [
                "AMQP_URL": "amqp://u:p@broker:5673/prod", "DATABASE_URL": "postgres://a:b@db:5433/x",
                "PREFETCH": "64", "MAX_ATTEMPTS": "3", "RETRY_INITIAL_DELAY_MS": "500",
                "RETRY_MAX_DELAY_MS": "8000", "HTTP_PORT": "0", "LOG_LEVEL": "debug", "LOG_FORMAT": "json",
                "DB_POOL_SIZE": "4", "SHUTDOWN_DRAIN_SECONDS": "5", "QUEUE_TYPE": "quorum",
                "MIGRATE_ON_START": "false",
            ],
            defaultHTTPPort: 8081
        )
        #expect(configuration.amqp.host == "broker")
        #expect(configuration.amqp.virtualHost == "prod")
        #expect(configuration.database.port == 5433)
        #expect(configuration.prefetch == 64)
        #expect(
            configuration.retryPolicy.steps == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8)]
        )
        #expect(configuration.httpPort == 0)
        #expect(configuration.logLevel == .debug)
        #expect(configuration.logFormat == .json)
        #expect(configuration.queueType == .quorum)
        #expect(!configuration.migrateOnStart)
    }

    @Test(arguments: [
        ("PREFETCH", "lots", "expected a whole number"),
        ("PREFETCH", "0", "out of range"),
        ("MAX_ATTEMPTS", "-1", "out of range"),
        ("LOG_LEVEL", "loud", "expected one of"),
        ("QUEUE_TYPE", "stream", "expected one of"),
        ("MIGRATE_ON_START", "maybe", "expected true or false"),
        ("HTTP_PORT", "70000", "out of range"),
        ("AMQP_URL", "http://localhost", "scheme"),
        ("DATABASE_URL", "mysql://localhost/x", "scheme"),
    ])
    func malformedSettingsNameTheVariable(variable: String, value: String, fragment: String) {
        do {
            _ = try WorkerConfiguration.fromEnvironment([variable: value], defaultHTTPPort: 8081)
            Issue.record("\(variable)=\(value) was accepted")
        } catch {
            #expect(error.variable == variable)
            #expect(error.description.hasPrefix("configuration error: \(variable): "))
            #expect(error.problem.contains(fragment))
        }
    }

    @Test func retryCapBelowInitialDelayIsRefused() {
        #expect(
            throws: ConfigurationError(
                variable: "RETRY_MAX_DELAY_MS",
                problem: "must not be smaller than RETRY_INITIAL_DELAY_MS"
            )
        ) {
            _ = try WorkerConfiguration.fromEnvironment(
                ["RETRY_INITIAL_DELAY_MS": "5000", "RETRY_MAX_DELAY_MS": "1000"],
                defaultHTTPPort: 1
            )
        }
    }
}

@Suite struct RetryPolicyTests {
    let policy = RetryPolicy(maxAttempts: 5, initialDelay: .seconds(1), maxDelay: .seconds(60))

    @Test func stepsDoubleUpToTheCap() {
        #expect(policy.steps.map { $0.milliseconds } == [1000, 2000, 4000, 8000, 16000, 32000, 60000])
        #expect(policy.ceiling(afterAttempt: 1) == .seconds(1))
        #expect(policy.ceiling(afterAttempt: 3) == .seconds(4))
        #expect(policy.ceiling(afterAttempt: 50) == .seconds(60))
        // Every attempt's step is one of the delay queues.
        #expect((1...60).allSatisfy { policy.steps.contains(policy.ceiling(afterAttempt: $0)) })
        #expect(RetryPolicy(maxAttempts: 2, initialDelay: .seconds(5), maxDelay: .seconds(5)).steps == [.seconds(5)])
    }

    @Test func jitterTakesAtMostAFifthOffTheStep() {
        #expect(policy.jitter == 0.2)
        for attempt in 1...8 {
            let step = policy.ceiling(afterAttempt: attempt)
            #expect(policy.delay(afterAttempt: attempt, random: 1) == step)
            let shortest = policy.delay(afterAttempt: attempt, random: 0.000_001)
            #expect(shortest <= step)
            #expect(shortest >= step * 0.8)
        }
    }

    @Test func attemptsAreBounded() {
        #expect(policy.allowsAttempt(after: 4))
        #expect(!policy.allowsAttempt(after: 5))
        #expect(
            RetryPolicy.delayQueueName(queue: "chart.calculate", step: .seconds(4)) == "chart.calculate.retry.4000ms"
        )
    }

    @Test func startUpWaitsDoubleToFiveSecondsWithoutJitter() {
        #expect(
            (1...7).map { Backoff.startUp.ceiling(afterAttempt: $0) } == [
                .milliseconds(200), .milliseconds(400), .milliseconds(800), .milliseconds(1600),
                .milliseconds(3200), .seconds(5), .seconds(5),
            ]
        )
        #expect(Backoff.startUp.delay(afterAttempt: 2, random: 0) == .milliseconds(400))
        #expect(Backoff.topologyWait.ceiling(afterAttempt: 1) == .milliseconds(500))
        #expect(Backoff.topologyWait.ceiling(afterAttempt: 4) == .seconds(4))
    }
}

@Suite struct TopologyTests {
    @Test func everyJobQueueHasADeadLetterQueueAndDelayQueues() throws {
        let policy = RetryPolicy(maxAttempts: 3, initialDelay: .seconds(1), maxDelay: .seconds(4))
        let topology = WorkerTopology.topology(queues: ["chart.calculate"], retry: policy)
        #expect(
            Set(topology.exchanges.map(\.name)) == [
                "astro.jobs", "astro.requests", "astro.gateway-requests", "astro.events", "astro.dlx", "astro.retry",
            ]
        )
        #expect(topology.exchanges.first { $0.name == "astro.events" }?.kind == .topic)
        // Topic exchanges, so the broker's topic permissions can say which routing keys a user may use.
        #expect(topology.exchanges.first { $0.name == "astro.jobs" }?.kind == .topic)
        #expect(topology.exchanges.first { $0.name == "astro.retry" }?.kind == .topic)
        // A worker only creates what is missing (its user may configure nothing); migrate declares it all.
        #expect(topology.exchanges.allSatisfy { $0.declareOnlyIfMissing })
        #expect(topology.queues.allSatisfy { $0.declareOnlyIfMissing })
        #expect(topology.exchangeBindings.isEmpty)
        let contract = WorkerTopology.contract(retry: policy)
        #expect(!contract.exchanges.contains { $0.declareOnlyIfMissing })
        #expect(!contract.queues.contains { $0.declareOnlyIfMissing })
        // Clients' requests reach their queues directly, never through astro.jobs (issue 29, F4).
        #expect(contract.exchangeBindings.isEmpty)
        for exchange in ["astro.requests", "astro.gateway-requests"] {
            #expect(
                contract.bindings.contains(
                    BindingSpec(queue: "report.request", exchange: exchange, routingKey: "report.request")
                )
            )
            #expect(!contract.bindings.contains { $0.exchange == exchange && $0.routingKey == "billing.refund-credit" })
        }
        // The worker's own dead letters arrive through astro.retry, the broker's through astro.dlx.
        #expect(
            topology.bindings.contains(
                BindingSpec(queue: "chart.calculate.dead", exchange: "astro.retry", routingKey: "chart.calculate.dead")
            )
        )
        #expect(
            topology.bindings.contains(
                BindingSpec(
                    queue: "chart.calculate.retry.1000ms",
                    exchange: "astro.retry",
                    routingKey: "chart.calculate.retry.1000ms"
                )
            )
        )
        let work = try #require(topology.queues.first { $0.name == "chart.calculate" })
        #expect(work.durable)
        #expect(work.arguments["x-dead-letter-exchange"] == .string("astro.dlx"))
        #expect(work.arguments["x-dead-letter-routing-key"] == .string("chart.calculate.dead"))
        #expect(topology.queues.contains { $0.name == "chart.calculate.dead" })
        #expect(
            topology.bindings.contains(
                BindingSpec(queue: "chart.calculate.dead", exchange: "astro.dlx", routingKey: "chart.calculate.dead")
            )
        )
        #expect(
            topology.bindings.contains(
                BindingSpec(queue: "chart.calculate", exchange: "astro.jobs", routingKey: "chart.calculate")
            )
        )
        let delays = topology.queues.filter { $0.name.hasPrefix("chart.calculate.retry.") }
        #expect(
            delays.map(\.name) == [
                "chart.calculate.retry.1000ms", "chart.calculate.retry.2000ms", "chart.calculate.retry.4000ms",
            ]
        )
        for delay in delays {
            #expect(delay.arguments["x-dead-letter-exchange"] == .string("astro.jobs"))
            #expect(delay.arguments["x-dead-letter-routing-key"] == .string("chart.calculate"))
            #expect(delay.arguments["x-message-ttl"] != nil)
        }
    }

    @Test func contractTopologyCoversEveryJobType() {
        let topology = WorkerTopology.contract(
            retry: RetryPolicy(maxAttempts: 5, initialDelay: .seconds(1), maxDelay: .seconds(60))
        )
        for type in JobType.all {
            #expect(topology.queues.contains { $0.name == type.rawValue })
            #expect(topology.queues.contains { $0.name == type.rawValue + ".dead" })
        }
    }

    @Test func quorumQueuesWhenAsked() {
        let topology = WorkerTopology.topology(
            queues: ["q"],
            retry: RetryPolicy(maxAttempts: 1, initialDelay: .seconds(1), maxDelay: .seconds(1)),
            queueType: .quorum
        )
        #expect(topology.queues.allSatisfy { $0.arguments["x-queue-type"] == .string("quorum") })
    }
}

@Suite struct JobEnvelopeTests {
    @Test func headParsing() throws {
        guard case .failure(let notJSON) = JobHead.parse(Data("hello".utf8)) else {
            Issue.record("accepted")
            return
        }
        #expect(notJSON.code == "invalid-json")
        guard case .failure(let array) = JobHead.parse(Data("[1]".utf8)) else {
            Issue.record("accepted")
            return
        }
        #expect(array.code == "invalid-json")
        guard case .failure(let missing) = JobHead.parse(Data("{\"x\":1}".utf8)) else {
            Issue.record("accepted")
            return
        }
        #expect(missing.code == "missing-job-id")
        guard case .failure(let bad) = JobHead.parse(Data("{\"jobId\":\"7\"}".utf8)) else {
            Issue.record("accepted")
            return
        }
        #expect(bad.code == "invalid-job-id")
        let id = JobID.random()
        let user = UUID()
        guard case .success(let head) = JobHead.parse(Data("{\"jobId\":\"\(id)\",\"userId\":\"\(user)\"}".utf8)) else {
            Issue.record("refused a valid head")
            return
        }
        #expect(head.jobID == id)
        #expect(head.userID == user)
    }

    struct Payload: Decodable {
        var jobId: String
        var profile: Profile
        struct Profile: Decodable {
            var name: String
            var latitude: Double
        }
    }

    @Test func decodingErrorsNameTheField() {
        let job = JobEnvelope(
            jobID: .random(),
            type: "t",
            body: Data("{\"jobId\":\"x\",\"profile\":{\"name\":\"a\"}}".utf8)
        )
        #expect(throws: JobRejection(code: "invalid-payload", message: "missing field \"latitude\" in profile")) {
            _ = try job.decode(Payload.self)
        }
        let wrongType = JobEnvelope(
            jobID: .random(),
            type: "t",
            body: Data("{\"jobId\":\"x\",\"profile\":{\"name\":\"a\",\"latitude\":\"north\"}}".utf8)
        )
        #expect(throws: JobRejection(code: "invalid-payload", message: "profile.latitude: expected a number")) {
            _ = try wrongType.decode(Payload.self)
        }
    }
}

@Suite struct HealthEndpointTests {
    @Test func routesAndStatuses() throws {
        let metrics = WorkerMetrics()
        var readiness = Worker.Readiness()
        #expect(Worker.route(path: "/healthz", name: "w", readiness: readiness, metrics: metrics)?.status == 200)
        #expect(Worker.route(path: "/readyz", name: "w", readiness: readiness, metrics: metrics)?.status == 503)
        readiness.database = true
        readiness.broker = true
        readiness.started = true
        let ready = try #require(Worker.route(path: "/readyz", name: "w", readiness: readiness, metrics: metrics))
        #expect(ready.status == 200)
        #expect(ready.body.contains("\"ready\":true"))
        readiness.shuttingDown = true
        #expect(Worker.route(path: "/readyz", name: "w", readiness: readiness, metrics: metrics)?.status == 503)
        #expect(Worker.route(path: "/nope", name: "w", readiness: readiness, metrics: metrics) == nil)
    }

    @Test func metricsUseThePrometheusTextFormat() {
        let metrics = WorkerMetrics()
        metrics.recordJob(queue: "chart.calculate", outcome: .succeeded)
        metrics.recordJob(queue: "chart.calculate", outcome: .succeeded)
        metrics.recordRetry(queue: "chart.calculate")
        metrics.recordDeadLetter(queue: "chart.calculate", reason: "invalid-payload")
        metrics.recordDuration(queue: "chart.calculate", .milliseconds(3))
        metrics.adjustInFlight(queue: "chart.calculate", by: 2)
        metrics.adjustInFlight(queue: "chart.calculate", by: -1)
        let text = metrics.render()
        #expect(text.contains("astro_jobs_total{queue=\"chart.calculate\",outcome=\"succeeded\"} 2"))
        #expect(text.contains("astro_job_retries_total{queue=\"chart.calculate\"} 1"))
        #expect(text.contains("astro_dead_letters_total{queue=\"chart.calculate\",reason=\"invalid-payload\"} 1"))
        #expect(text.contains("astro_job_duration_seconds_bucket"))
        #expect(text.contains("astro_jobs_in_flight{queue=\"chart.calculate\"} 1"))
    }

    @Test func servesOverHTTP() async throws {
        let server = HealthServer(host: "127.0.0.1", port: 0, logger: .init(label: "test")) { path in
            path == "/healthz" ? .init(status: 200, body: "ok\n") : nil
        }
        try server.start()
        let port = try #require(server.boundPort)
        let (body, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/healthz")!)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: body, as: UTF8.self) == "ok\n")
        let (_, missing) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/other")!)
        #expect((missing as? HTTPURLResponse)?.statusCode == 404)
        var post = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/healthz")!)
        post.httpMethod = "POST"
        let (_, refused) = try await URLSession.shared.data(for: post)
        #expect((refused as? HTTPURLResponse)?.statusCode == 405)
        await server.stop()
    }
}
