import AppStoreServerFake
import AstroDomain
import Billing
import Crypto
import Foundation
import LLMFake
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

/// Every executable that runs as a service starts, at the default log level (`info`), with every
/// optional outside service it supports configured — an LLM, an images API, the App Store Server
/// API, an OTLP collector, App Attest — and becomes ready; each then stops gracefully on SIGTERM.
///
/// Issue 29 (F10): the report-worker died with SIGILL at start-up whenever an LLM was configured
/// and the log level let its "report writer ready" line through: no test had ever started it so.
/// The fakes stand in for OpenAI and Apple; the broker and the database are the real ones, and
/// each service uses its own broker user and database role, as deployed.
@Suite(.timeLimit(.minutes(3)))
struct ExecutableStartupTests {
    /// One service to start: its product, what it needs beyond the shared settings, and what its
    /// start-up log must say to show the optional services were taken into use.
    struct Service: Sendable {
        var product: String
        var environment: [String: String]
        /// Texts its log must contain once ready.
        var logShows: [String]
    }

    @Test func everyExecutableStartsWithEveryOutsideServiceConfiguredAtTheDefaultLogLevel() async throws {
        let llm = try OpenAIFake()
        defer { llm.stop() }
        let images = try OpenAIImagesFake()
        defer { images.stop() }
        let appStoreKey = P256.Signing.PrivateKey()
        let appStore = try AppStoreServerFake(
            bundleID: BillingDefaults.bundleID,
            keyID: "STARTUPKEY1",
            issuerID: "57246542-96fe-1a63-e053-0824d011072a",
            publicKey: appStoreKey.publicKey
        )
        defer { appStore.stop() }
        let collector = try TraceJourneyTests.Receiver()
        defer { collector.server.stop() }

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("startup-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let keyFile = folder.appendingPathComponent("AuthKey_STARTUPKEY1.p8")
        try Data(appStoreKey.pemRepresentation.utf8).write(to: keyFile)

        // The broker's topology, as `astroctl migrate` declares it before any service starts.
        await (try RuntimeTestEnvironment.contractPublisher(purging: [])).close()

        // Shared by every service: the default log level (LOG_LEVEL removed, not set to info),
        // any free health port, and traces exported to the collector.
        var shared = ProcessInfo.processInfo.environment
        shared["LOG_LEVEL"] = nil
        shared.merge(
            [
                "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "MIGRATE_ON_START": "false", "LOG_FORMAT": "text",
                "OTEL_EXPORTER_OTLP_ENDPOINT": collector.server.baseURL.absoluteString,
                "OTEL_BSP_SCHEDULE_DELAY": "200",
            ]
        ) { _, new in new }
        let llmSettings = [
            "LLM_BASE_URL": llm.baseURL.absoluteString, "LLM_MODEL": "fake-startup-model", "LLM_API_KEY": llm.apiKey,
            "LLM_PRICE_INPUT_PER_1M_USD": "2.5", "LLM_PRICE_OUTPUT_PER_1M_USD": "10",
        ]
        let billingSettings = [
            "BILLING_ENVIRONMENT": "Sandbox",
            "BILLING_TRUSTED_ROOTS": BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der").path,
        ]
        let database = try await RuntimeTestEnvironment.database()
        let sampleDatabaseURL =
            "postgres://\(database.user):\(database.password ?? "")@\(database.host):\(database.port)/\(database.database)"
        let services: [Service] = [
            Service(
                product: "chart-worker",
                environment: [
                    "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.chartWorker),
                    "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .chartWorker),
                ],
                logShows: ["exporting traces over OTLP"]
            ),
            Service(
                product: "report-worker",
                environment: [
                    "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.reportWorker),
                    "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .reportWorker),
                ].merging(llmSettings) { _, new in new },
                logShows: ["report writer ready", "writer=llm fake-startup-model", "exporting traces over OTLP"]
            ),
            Service(
                product: "story-worker",
                environment: [
                    "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.storyWorker),
                    "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .storyWorker),
                    "STORY_STORAGE_ROOT": folder.appendingPathComponent("stories").path,
                    "IMAGE_BASE_URL": images.baseURL.absoluteString, "IMAGE_MODEL": "fake-startup-images",
                    "IMAGE_API_KEY": images.apiKey, "IMAGE_PRICE_PER_IMAGE_USD": "0.04",
                ].merging(llmSettings) { _, new in new },
                logShows: [
                    "story worker ready", "writer=llm", "illustrator=images:fake-startup-images",
                    "exporting traces over OTLP",
                ]
            ),
            Service(
                product: "billing-worker",
                environment: [
                    "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.billingWorker),
                    "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .billingWorker),
                    "APPSTORE_API_KEY_ID": "STARTUPKEY1", "APPSTORE_API_ISSUER_ID": appStore.issuerID,
                    "APPSTORE_API_PRIVATE_KEY_FILE": keyFile.path,
                    "APPSTORE_API_BASE_URL": appStore.baseURL.absoluteString,
                ].merging(billingSettings) { _, new in new },
                logShows: ["billing configured", "verify_by_id=on", "exporting traces over OTLP"]
            ),
            Service(
                product: "gateway",
                environment: [
                    "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.gateway),
                    "DATABASE_URL": try await GatewayHarness.gatewayDatabaseURL(),
                    "APP_ATTEST_APP_ID": "ABCDE12345.com.astrosvitla.app", "APP_ATTEST_ENVIRONMENT": "development",
                    "APP_ATTEST_REQUIRE_ASSERTIONS": "true", "GATEWAY_METRICS_PORT": "0",
                ].merging(billingSettings) { _, new in new },
                logShows: ["gateway listening", "exporting traces over OTLP"]
            ),
            Service(
                product: "sample-worker",
                environment: [
                    "AMQP_URL": try RuntimeTestEnvironment.variable("AMQP_URL"),
                    "DATABASE_URL": sampleDatabaseURL,
                    "SAMPLE_QUEUE": "startup." + UUID().uuidString.lowercased().prefix(8),
                ],
                logShows: ["exporting traces over OTLP"]
            ),
        ]

        // All at once, as a deployment starts them.
        var started: [ChildProcess] = []
        defer {
            // Whatever happened above: nothing started here outlives the test.
            for process in started where process.isRunning { kill(-process.pid, SIGKILL) }
        }
        for service in services {
            started.append(
                try await ChildProcess.start(
                    executable: ProcessRunner.productPath(service.product),
                    arguments: [],
                    environment: shared.merging(service.environment) { _, new in new },
                    label: "startup-\(service.product)"
                )
            )
        }
        for (service, process) in zip(services, started) {
            let announcement = service.product == "gateway" ? "gateway listening" : "health endpoint listening"
            try await process.waitForOutput(announcement)
            let port = try #require(
                process.logValue("http.port", onLineWith: announcement).flatMap(Int.init),
                "no port in \(process.tail())"
            )
            try await RuntimeTestEnvironment.eventually(
                "\(service.product) answers 200 on /readyz (port \(port))",
                timeout: .seconds(60)
            ) {
                if !process.isRunning { throw TestFailure("\(service.product) exited\n\(process.tail())") }
                return (try? await GatewayHarness.request("GET", "http://127.0.0.1:\(port)/readyz"))?.status == 200
            }
            for text in service.logShows {
                try await process.waitForOutput(text, timeout: .seconds(10))
            }
            #expect(process.isRunning, "\(process.tail())")
            // Issue 32: what records through swift-metrics' MetricsSystem (the OTLP exporter's
            // counters) reaches the /metrics this process serves.
            var metricsPort = port
            if service.product == "gateway" {
                try await process.waitForOutput("metrics listening", timeout: .seconds(10))
                metricsPort = try #require(
                    process.logValue("metrics.port", onLineWith: "metrics listening").flatMap(Int.init),
                    "no metrics port in \(process.tail())"
                )
            }
            let metrics = try await GatewayHarness.rawGet("http://127.0.0.1:\(metricsPort)/metrics")
            for name in [MetricName.traceSpansExported, .traceSpansFailed, .traceSpansDropped] {
                #expect(
                    metrics.contains("\n\(name.rawValue) "),
                    "\(service.product): no \(name.rawValue) in\n\(metrics)"
                )
            }
            if service.product == "gateway" {
                // App Attest is on: a registration without an attestation is refused.
                let plain = try await GatewayHarness.request(
                    "POST",
                    "http://127.0.0.1:\(port)/v1/devices",
                    body: [:]
                )
                #expect(plain.status == 400, "App Attest is not in force: \(plain.status)")
            }
        }

        // The maintenance task runs once, against the same servers, and completes.
        let maintenance = try await ChildProcess.start(
            executable: ProcessRunner.productPath("maintenance"),
            arguments: [],
            environment: shared.merging([
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.maintenance),
                "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .maintenance),
            ]) { _, new in new },
            label: "startup-maintenance"
        )
        started.append(maintenance)
        try await RuntimeTestEnvironment.eventually("the maintenance task ends", timeout: .seconds(60)) {
            !maintenance.isRunning
        }
        #expect(maintenance.exitCode == 0, "\(maintenance.tail())")

        // And each stops gracefully: exit status 0 on SIGTERM, no crash on the way out.
        for process in started.dropLast() {
            let code = await process.stop(grace: .seconds(20))
            #expect(code == 0, "\(process.label) ended with \(code)\n\(process.tail())")
            #expect(!process.output.contains("Program crashed"), "\(process.tail())")
        }
    }
}
