import AMQP
import Foundation
import Hummingbird
import Logging
import NIOCore
import OTLPTracing
import Postgres
import ServiceLifecycle
import WorkerRuntime

/// The `main` of the `gateway` executable: read the environment, set up logging, connect, serve
/// until SIGTERM or SIGINT, and drain in-flight requests.
public enum GatewayMain {
    /// Runs the gateway.
    /// - Returns: the exit status: 0 after a graceful shutdown, 2 for a configuration error
    ///   (including a missing signing key in production), 1 otherwise.
    public static func run(environment: [String: String] = ProcessInfo.processInfo.environment) async -> Int32 {
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.fromEnvironment(environment)
        } catch {
            FileHandle.standardError.write(Data("gateway: \(error)\n".utf8))
            return 2
        }
        LogSetup.bootstrap(format: configuration.service.logFormat, level: configuration.service.logLevel)
        let logger = Logger(label: "gateway")
        // Before tracing: the exporter's counters bind to the metrics system when it is made.
        let metrics = GatewayMetrics()
        MetricsSetup.bootstrap(registry: metrics.registry, logger: logger)
        // Request spans, exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set.
        let tracing = TracingSetup.bootstrap(serviceName: "gateway", environment: environment, logger: logger)
        if !configuration.service.developmentDefaults.isEmpty {
            logger.warning(
                "using the built-in development connection settings; set these variables in a deployment",
                metadata: ["config.unset": "\(configuration.service.developmentDefaults.joined(separator: ","))"]
            )
        }
        if configuration.signingKeyIsEphemeral {
            logger.warning(
                "no GATEWAY_SIGNING_KEY_FILE: signing access tokens with an ephemeral key; tokens die with this process and other replicas reject them",
                metadata: ["token.kid": "\(configuration.signingKeyID)"]
            )
        }
        if configuration.appStoreVerification == nil {
            logger.warning(
                "no App Store verification policy (BILLING_ENVIRONMENT unset): POST /v1/appstore/notifications answers 503",
                metadata: ["config.variable": "BILLING_ENVIRONMENT"]
            )
        }
        if configuration.environment == .production, configuration.appAttest == nil {
            logger.warning(
                "App Attest is off in production (APP_ATTEST_ALLOW_UNATTESTED=true): devices register without an attestation, so identities cost nothing to make",
                metadata: ["config.variable": "APP_ATTEST_APP_ID"]
            )
        }
        let pool = PostgresPool(
            configuration: configuration.service.database,
            options: .init(
                maxConnections: configuration.service.databasePoolSize,
                acquireTimeout: min(configuration.service.databaseAcquireTimeout, configuration.requestTimeout)
            ),
            logger: logger
        )
        let publisher = AMQPPublisher(configuration: configuration.service.amqp, logger: logger)
        let services = GatewayServices(configuration: configuration, pool: pool, publisher: publisher, metrics: metrics)
        let connectionLimit = ConnectionLimit(limit: configuration.maxConnections, metrics: metrics)
        let application = Application(
            router: GatewayRoutes.router(services),
            // A connection that sends nothing (a slow or stalled client) is closed after the
            // request timeout.
            server: .http1(
                configuration: .init(
                    // First, the connection limit: a connection beyond it is closed unread; then
                    // a client's closing of its connection, for the event streams
                    // (ConnectionWatch.swift). The peer's address reaches the rate limits through
                    // the request context (`GatewayRequestContext.remoteAddress`).
                    additionalChannelHandlers: [
                        ConnectionLimitHandler(limit: connectionLimit),
                        ConnectionWatchHandler(watch: services.connections),
                    ],
                    idleTimeout: .milliseconds(Int64(configuration.requestTimeout.milliseconds))
                )
            ),
            configuration: .init(
                address: .hostname(configuration.service.httpHost, port: configuration.service.httpPort),
                serverName: "gateway"
            ),
            services: [
                BrokerConnector(publisher: publisher, logger: logger),
                EventSubscription(hub: services.events, configuration: configuration.service.amqp, logger: logger),
                DeletedUsersRefresher(deleted: services.deletedUsers, pool: pool, logger: logger),
                MemoryTrimmer(connections: connectionLimit, logger: logger),
                MetricsServer.application(
                    metrics: metrics,
                    host: configuration.service.httpHost,
                    port: configuration.metricsPort,
                    idleTimeout: configuration.requestTimeout,
                    logger: logger
                ),
            ],
            // The port actually bound: with HTTP_PORT=0 (any free port) this line is how a
            // supervisor or a test learns it, instead of guessing a port that might be taken.
            onServerRunning: { channel in
                logger.info(
                    "gateway listening",
                    metadata: ["http.port": "\(channel.localAddress?.port ?? configuration.service.httpPort)"]
                )
            },
            logger: logger
        )
        logger.info(
            "gateway starting",
            metadata: [
                "http.port": "\(configuration.service.httpPort)",
                "metrics.port": "\(configuration.metricsPort)",
                "http.max_connections": "\(configuration.maxConnections)",
                "appstore.environment": "\(configuration.appStoreVerification?.policy.environment.rawValue ?? "off")",
                "gateway.env": "\(configuration.environment.rawValue)",
                "token.kid": "\(configuration.signingKeyID)",
                "token.verify_kids": "\(services.verifier.keyIDs.joined(separator: ","))",
            ]
        )
        do {
            try await application.runService(gracefulShutdownSignals: [.sigterm, .sigint])
        } catch {
            logger.critical("gateway failed", metadata: ["reason": "\(error)"])
            await publisher.close()
            await pool.close()
            await tracing.shutdown()
            return 1
        }
        await publisher.close()
        await pool.close()
        await tracing.shutdown()
        logger.info("gateway stopped")
        return 0
    }
}

/// Keeps the publisher connected, so that `/readyz` tells the truth before the first publish:
/// connects at start and after a loss, every two seconds until it works.
struct BrokerConnector: Service {
    let publisher: AMQPPublisher
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var warned = false
            while !Task.isCancelled {
                if !publisher.isConnected {
                    do {
                        try await publisher.connect()
                        warned = false
                    } catch {
                        if !warned { logger.warning("broker not reachable", metadata: ["amqp.error": "\(error)"]) }
                        warned = true
                    }
                }
                try? await Task.sleep(for: .seconds(2))
            }
        }
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int {
        Int(components.seconds) * 1000 + Int(components.attoseconds / 1_000_000_000_000_000)
    }
}
