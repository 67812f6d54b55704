import AMQP
import AstroDomain
import Foundation
import Logging
import Postgres
import RetryBackoff
import Schema
import ServiceLifecycle
import Synchronization

/// A worker process: the queues it serves, its handlers, and everything around them — the
/// database pool and migrations, the broker topology, the consumer, the outbox relay, the
/// health endpoint — run as one `ServiceGroup` that shuts down gracefully on SIGTERM/SIGINT.
public final class Worker: Sendable {
    public let name: String
    public let configuration: WorkerConfiguration
    public let metrics: WorkerMetrics
    /// The worker's database pool: its commits, the outbox relay, its readiness check and the
    /// reads handlers make outside commits all share it, and it closes when the worker stops.
    public let pool: PostgresPool
    private let queues: [String]
    private let handlers: [AnyJobHandler<PostgresConnection>]
    private let databaseSetup: DatabaseSetup?
    private let logger: Logger
    private let readiness = ReadinessState()
    private let shutdownTrigger = Mutex<ServiceGroup?>(nil)
    private let healthPort = Mutex<Int?>(nil)
    private let probes = Mutex<[MetricsProbe]>([.outboxLag()])

    struct Readiness: Sendable {
        var database = false
        var broker = false
        var started = false
        var shuttingDown = false
        /// The broker blocked publishing (a resource alarm): jobs still run, their events wait.
        var brokerBlocked = false
        var ready: Bool { database && broker && started && !shuttingDown && !brokerBlocked }
    }

    /// - Parameters:
    ///   - name: the worker's name (logs, connection names), e.g. `chart-worker`.
    ///   - queues: the job queues whose topology it declares.
    ///   - handlers: the job handlers; the worker consumes exactly the queues that have one.
    ///   - databaseSetup: runs once after migrations, before consuming (e.g. a handler's own
    ///     tables or caches).
    public convenience init(
        name: String,
        configuration: WorkerConfiguration,
        queues: [JobType],
        handlers: [any JobHandler] = [],
        databaseSetup: DatabaseSetup? = nil,
        logger: Logger
    ) {
        self.init(
            name: name,
            configuration: configuration,
            queues: queues,
            databaseSetup: databaseSetup,
            logger: logger,
            makeHandlers: { _ in handlers }
        )
    }

    /// A worker whose handlers are built with its own pool (handlers that read the database
    /// outside their commit, e.g. in `prepare`).
    /// - Parameters:
    ///   - metrics: where its metrics are registered (`WorkerMain` passes the registry it gave
    ///     `MetricsSetup`, so `/metrics` also shows what records through `MetricsSystem`).
    ///   - makeHandlers: builds the handlers from the worker's context.
    /// - Throws: what `makeHandlers` throws.
    public init<Failure: Error>(
        name: String,
        configuration: WorkerConfiguration,
        queues: [JobType],
        databaseSetup: DatabaseSetup? = nil,
        logger: Logger,
        metrics: WorkerMetrics = WorkerMetrics(),
        makeHandlers: (WorkerContext) throws(Failure) -> [any JobHandler]
    ) throws(Failure) {
        // The pool connects lazily: making it here costs nothing until `run()`.
        let pool = PostgresPool(
            configuration: configuration.database,
            options: .init(
                maxConnections: configuration.databasePoolSize,
                acquireTimeout: configuration.databaseAcquireTimeout
            ),
            logger: logger
        )
        self.pool = pool
        self.databaseSetup = databaseSetup
        self.name = name
        self.configuration = configuration
        self.queues = queues.map(\.rawValue)
        self.handlers = try makeHandlers(
            WorkerContext(configuration: configuration, pool: pool, logger: logger, metrics: metrics)
        )
        .map { AnyJobHandler($0) }
        self.logger = logger
        self.metrics = metrics
    }

    /// Adds a periodic metrics probe (before `run()`; the outbox lag probe is always there).
    public func addProbe(_ probe: MetricsProbe) { probes.withLock { $0.append(probe) } }

    /// The health endpoint's bound port once running (useful with `HTTP_PORT=0`).
    public var boundHealthPort: Int? { healthPort.withLock { $0 } }

    /// Starts a graceful shutdown, as SIGTERM would.
    public func shutdownGracefully() async {
        let group = shutdownTrigger.withLock { $0 }
        await group?.triggerGracefulShutdown()
    }

    /// Runs until a graceful shutdown completes.
    ///
    /// Start-up: connect to PostgreSQL (retrying while it comes up), apply migrations when
    /// `migrateOnStart`, connect to RabbitMQ and declare the topology, then consume.
    /// - Throws: `WorkerStartupError` when a dependency stays unreachable for the start-up
    ///   deadline, or the error of a service that failed.
    /// - Parameters:
    ///   - startupTimeout: how long to keep retrying unreachable dependencies at start-up.
    ///   - handleSignals: shut down gracefully on SIGTERM/SIGINT (off for in-process tests).
    public func run(startupTimeout: Duration = .seconds(60), handleSignals: Bool = true) async throws {
        let configuration = self.configuration
        var logger = self.logger
        logger[metadataKey: "worker"] = "\(name)"
        let deadline = ContinuousClock.now + startupTimeout

        let pool = self.pool
        do {
            try await Self.retryUntil(
                deadline,
                what: "PostgreSQL at \(configuration.database.redactedURL)",
                logger: logger
            ) {
                guard await pool.ping() else {
                    throw WorkerStartupError(
                        message: "PostgreSQL at \(configuration.database.redactedURL) does not answer"
                    )
                }
            }
            if configuration.migrateOnStart {
                let applied: [Migration]
                do {
                    applied = try await Migrator(migrations: try AstroSchema.migrations(), logger: logger)
                        .migrate(pool: pool)
                } catch let error as PostgresError where error.sqlState == "42501" {
                    throw WorkerStartupError(
                        message: "MIGRATE_ON_START: \(configuration.database.user) may not change the schema "
                            + "(\(error.message)); run `astroctl migrate` as the schema owner, or set "
                            + "MIGRATE_ON_START=false for a worker that connects with its own role"
                    )
                }
                logger.info("schema up to date", metadata: ["migrations.applied": "\(applied.map(\.version))"])
            }
            try await databaseSetup?(pool)
        } catch {
            await pool.close()
            throw error
        }

        var amqp = configuration.amqp
        amqp.connectionName = "\(name) publisher"
        let publisher = AMQPPublisher(configuration: amqp, logger: logger)
        let topology = WorkerTopology.topology(
            queues: queues,
            retry: configuration.retryPolicy,
            queueType: configuration.queueType
        )
        do {
            try await Self.retryUntil(deadline, what: "RabbitMQ at \(amqp.redactedURL)", logger: logger) {
                try await publisher.connect()
            }
            try await Self.declare(topology, publisher: publisher, user: amqp.user, until: deadline, logger: logger)
        } catch {
            await publisher.close()
            await pool.close()
            throw error
        }

        let store = PostgresJobStorage(pool: pool)
        let signal = WakeSignal()
        let relay = OutboxRelay(
            store: store,
            publisher: publisher,
            signal: signal,
            batchSize: configuration.outboxBatchSize,
            pollInterval: configuration.outboxPollInterval,
            metrics: metrics,
            logger: logger
        )
        let consumed = handlers.map(\.jobType.rawValue)
        var consumerService: ConsumerService<AMQPConsumer, PostgresJobStorage, AMQPPublisher>?
        var consumer: AMQPConsumer?
        if !consumed.isEmpty {
            var consumerConfiguration = configuration.amqp
            consumerConfiguration.connectionName = "\(name) consumer"
            let amqpConsumer = AMQPConsumer(
                configuration: consumerConfiguration,
                topology: topology,
                queues: consumed,
                prefetch: UInt16(clamping: configuration.prefetch),
                logger: logger
            )
            consumer = amqpConsumer
            let processor = JobProcessor(
                handlers: handlers,
                store: store,
                publisher: publisher,
                retry: configuration.retryPolicy,
                metrics: metrics,
                logger: logger,
                outboxSignal: signal,
                commitBatchSize: configuration.commitBatchSize,
                committers: configuration.committers,
                deliveryLimit: configuration.deliveryLimit
            )
            consumerService = ConsumerService(
                consumer: amqpConsumer,
                processor: processor,
                drainTimeout: configuration.shutdownDrainTimeout,
                logger: logger
            )
        }

        let health = HealthServer(host: configuration.httpHost, port: configuration.httpPort, logger: logger) {
            [readiness, metrics, name] path in
            Self.route(path: path, name: name, readiness: readiness.snapshot, metrics: metrics)
        }
        try health.start()
        healthPort.withLock { $0 = health.boundPort }

        let monitor = ReadinessMonitor(pool: pool, publisher: publisher, consumer: consumer) {
            [readiness] database, broker, blocked in
            readiness.update {
                $0.database = database
                $0.broker = broker
                $0.brokerBlocked = blocked
            }
        }

        // Graceful shutdown runs in reverse order: the consumer drains first, then the relay
        // publishes what the drained jobs committed, then health stops answering.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: health), .init(service: monitor), .init(service: relay),
            .init(service: ProbeService(probes: probes.withLock { $0 }, pool: pool, metrics: metrics, logger: logger)),
        ]
        if let consumerService {
            services.append(.init(service: consumerService, successTerminationBehavior: .gracefullyShutdownGroup))
        }
        var groupConfiguration = ServiceGroupConfiguration(
            services: services,
            gracefulShutdownSignals: handleSignals ? [.sigterm, .sigint] : [],
            logger: logger
        )
        // Past the drain deadline plus the relay's flush, stop waiting.
        groupConfiguration.maximumGracefulShutdownDuration = configuration.shutdownDrainTimeout + .seconds(15)
        let group = ServiceGroup(configuration: groupConfiguration)
        shutdownTrigger.withLock { $0 = group }
        readiness.update { $0.started = true }
        logger.info(
            "worker started",
            metadata: [
                "amqp.queues": "\(consumed)", "http.port": "\(health.boundPort ?? -1)",
                "prefetch": "\(configuration.prefetch)",
            ]
        )
        defer { readiness.update { $0.shuttingDown = true } }
        do {
            try await withGracefulShutdownHandler {
                try await group.run()
            } onGracefulShutdown: { [readiness] in
                readiness.update { $0.shuttingDown = true }
            }
        } catch {
            await publisher.close()
            await pool.close()
            throw error
        }
        await publisher.close()
        await pool.close()
        logger.info("worker stopped")
    }

    static func route(
        path: String,
        name: String,
        readiness: Readiness,
        metrics: WorkerMetrics
    ) -> HealthServer.Response? {
        switch path {
        case "/healthz":
            return .init(status: 200, body: "ok\n")
        case "/readyz":
            let body =
                "{\"ready\":\(readiness.ready),\"worker\":\"\(name)\",\"database\":\(readiness.database),"
                + "\"broker\":\(readiness.broker),\"brokerBlocked\":\(readiness.brokerBlocked),"
                + "\"shuttingDown\":\(readiness.shuttingDown)}\n"
            return .init(status: readiness.ready ? 200 : 503, contentType: "application/json", body: body)
        case "/metrics":
            // Readiness as a gauge, so an alert sees a worker that answers but cannot work.
            metrics.set(.workerReady, to: readiness.ready ? 1 : 0)
            return .init(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: metrics.render())
        default:
            return nil
        }
    }

    /// Declares the worker's topology. A worker on its own broker user may declare nothing, so a
    /// missing queue is refused (403) until `astroctl migrate` has run: retried until the
    /// start-up deadline (migrate may be running right now), then reported with what to do. A
    /// connection lost while declaring is retried until the same deadline.
    static func declare(
        _ topology: Topology,
        publisher: AMQPPublisher,
        user: String,
        until deadline: ContinuousClock.Instant,
        logger: Logger
    ) async throws {
        var attempt = 1
        while true {
            let delay = Backoff.topologyWait.ceiling(afterAttempt: attempt)
            attempt += 1
            // (A `catch where` on this typed error crashes the 6.3 compiler here.)
            var refused: AMQPError?
            do {
                try await publisher.declare(topology)
                return
            } catch {
                guard error.replyCode == 403 || error.isRetriable else { throw error }
                refused = error
            }
            let message = refused?.message ?? ""
            if let refused, refused.replyCode != 403 {
                // The broker went away between connecting and declaring: the same wait as for
                // an unreachable broker at start-up.
                guard ContinuousClock.now + delay <= deadline else {
                    throw WorkerStartupError(message: "RabbitMQ is unreachable: \(refused)")
                }
                logger.warning(
                    "dependency not reachable yet; retrying",
                    metadata: [LogKey.dependency: "RabbitMQ", LogKey.reason: "\(refused)"]
                )
                try await Task.sleep(for: delay)
                continue
            }
            guard ContinuousClock.now + delay <= deadline else {
                throw WorkerStartupError(
                    message: "the broker topology is incomplete and \(user) may not declare it (\(message)); "
                        + "run `astroctl migrate` as the broker's administrator, with the same QUEUE_TYPE and "
                        + "RETRY_* settings as this worker"
                )
            }
            logger.warning(
                "broker topology incomplete; waiting for `astroctl migrate` to declare it",
                metadata: [LogKey.reason: "\(message)"]
            )
            try await Task.sleep(for: delay)
        }
    }

    /// Calls `body` until it succeeds, backing off (`Backoff.startUp`) and logging, until `deadline`.
    static func retryUntil(
        _ deadline: ContinuousClock.Instant,
        what: String,
        logger: Logger,
        _ body: () async throws -> Void
    ) async throws {
        var attempt = 1
        while true {
            do {
                try await body()
                return
            } catch {
                let delay = Backoff.startUp.ceiling(afterAttempt: attempt)
                if ContinuousClock.now + delay > deadline {
                    throw WorkerStartupError(message: "\(what) is unreachable: \(error)")
                }
                logger.warning(
                    "dependency not reachable yet; retrying",
                    metadata: [
                        LogKey.dependency: "\(what)", LogKey.startAttempt: "\(attempt)", LogKey.reason: "\(error)",
                    ]
                )
                try await Task.sleep(for: delay)
                attempt += 1
            }
        }
    }
}

/// What a worker's handlers are built from.
public struct WorkerContext: Sendable {
    /// The worker's configuration, read from the environment.
    public let configuration: WorkerConfiguration
    /// The worker's own pool (see `Worker.pool`).
    public let pool: PostgresPool
    /// The worker's logger.
    public let logger: Logger
    /// The worker's metrics: what handlers count as it happens rather than on commit (paid calls).
    public let metrics: WorkerMetrics

    /// The one metering path of the worker's paid calls, with the limits of `environment`.
    /// - Throws: `ConfigurationError` naming a limit variable that is out of range.
    public func paidCallLedger(_ environment: [String: String]) throws(ConfigurationError) -> PaidCallLedger {
        PaidCallLedger(
            limits: try PaidCallLimits.fromEnvironment(environment),
            pool: pool,
            metrics: metrics,
            logger: logger
        )
    }
}

/// Work a worker does on its database once at start-up, after migrations.
public typealias DatabaseSetup = @Sendable (PostgresPool) async throws -> Void

/// The readiness snapshot, shared by the monitor (writer) and the health thread (reader).
final class ReadinessState: Sendable {
    private let state = Mutex(Worker.Readiness())

    var snapshot: Worker.Readiness { state.withLock { $0 } }

    func update(_ change: (inout Worker.Readiness) -> Void) { state.withLock { change(&$0) } }
}

/// A dependency stayed unreachable through start-up.
public struct WorkerStartupError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Refreshes the readiness snapshot: the broker connections and whether the broker blocks
/// publishing (not ready meanwhile: events and retries cannot leave) every two seconds, which
/// costs nothing (the clients' own state); the database by a ping every ten seconds while it
/// answers and every two while it does not, so an idle worker asks the database little and one
/// whose database is back is ready again soon. (Kubernetes asks every ten seconds by default.)
final class ReadinessMonitor: Service, Sendable {
    /// How often the broker state is read, and the database pinged while it does not answer.
    static let interval: Duration = .seconds(2)
    /// How often the database is pinged while it answers.
    static let databaseInterval: Duration = .seconds(10)

    private let pool: PostgresPool
    private let publisher: AMQPPublisher
    private let consumer: AMQPConsumer?
    private let update: @Sendable (_ database: Bool, _ broker: Bool, _ brokerBlocked: Bool) -> Void

    init(
        pool: PostgresPool,
        publisher: AMQPPublisher,
        consumer: AMQPConsumer?,
        update: @escaping @Sendable (Bool, Bool, Bool) -> Void
    ) {
        self.pool = pool
        self.publisher = publisher
        self.consumer = consumer
        self.update = update
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var database = false
            var lastPing: ContinuousClock.Instant?
            while !Task.isCancelled {
                let now = ContinuousClock.now
                if !database || lastPing.map({ now - $0 >= Self.databaseInterval }) ?? true {
                    database = await self.pool.ping()
                    lastPing = now
                }
                let broker = self.publisher.isConnected && (self.consumer?.isConnected ?? true)
                self.update(database, broker, self.publisher.isBlocked)
                try? await Task.sleep(for: Self.interval)
            }
        }
    }
}
