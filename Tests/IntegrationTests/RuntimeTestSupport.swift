import AMQP
import AstroDomain
import Foundation
import Logging
import Postgres
import SampleJobs
import Schema
import TestProcesses
import Testing
import WorkerRuntime

/// Servers and a migrated database shared by the runtime's integration tests.
enum RuntimeTestEnvironment {
    static let logger: Logger = {
        var logger = Logger(label: "runtime-integration-tests")
        logger.logLevel = .warning
        return logger
    }()

    static func variable(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
            let message =
                "\(name) is not set: run the integration tests with `bash scripts/integration-tests.sh` (see README)"
            Issue.record(Comment(rawValue: message))
            throw TestFailure(message)
        }
        return value
    }

    static func amqpConfiguration() throws -> AMQPConfiguration {
        try AMQPConfiguration(url: try variable("AMQP_URL"))
    }

    /// The URL of a service's own broker user (scripts/stack.sh loads
    /// deploy/rabbitmq/definitions.json and exports one per service): worker processes in these
    /// tests run with only their own service's broker permissions, as deployed.
    static func amqpURL(as service: BrokerAccess.Service) throws -> String {
        let name = service.user.hasPrefix("astro-") ? String(service.user.dropFirst("astro-".count)) : service.user
        return try variable(name.uppercased().replacingOccurrences(of: "-", with: "_") + "_AMQP_URL")
    }

    /// A database of its own for the runtime tests, migrated once per test process.
    static func database() async throws -> PostgresConfiguration { try await DatabaseOnce.shared.configuration() }

    /// The shared test database's URL for a worker's own role (migration 0004), after giving
    /// that role a login password: worker processes in these tests run with only their grants.
    static func databaseURL(as role: WorkerRole) async throws -> String {
        let database = try await database()
        let password = "test-\(role.rawValue)"
        try await RoleLogins.shared.enable(role, password: password, in: database)
        return "postgres://\(role.rawValue):\(password)@\(database.host):\(database.port)/\(database.database)"
    }

    /// A connected publisher on a broker with the contract's topology declared (the retry delays
    /// of the default worker configuration), with `queues` emptied of earlier tests' messages:
    /// what a test that runs worker processes on the real queues starts from.
    static func contractPublisher(purging queues: [JobType]) async throws -> AMQPPublisher {
        let publisher = AMQPPublisher(configuration: try amqpConfiguration(), logger: logger)
        try await publisher.connect()
        let retry = WorkerConfiguration(amqp: try amqpConfiguration(), database: try await database()).retryPolicy
        try await publisher.declare(WorkerTopology.contract(retry: retry))
        for queue in queues { _ = try await publisher.purgeQueue(queue.rawValue) }
        return publisher
    }

    /// A fresh, empty database (not migrated), for migration tests.
    static func freshDatabase() async throws -> PostgresConfiguration {
        let base = try PostgresConfiguration(url: try variable("DATABASE_URL"))
        let name = "rt_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
        let admin = PostgresPool(configuration: base, options: .init(maxConnections: 1), logger: logger)
        try await admin.withConnection { try $0.executeScript(SQL(unsafeSQL: "CREATE DATABASE \(name)")) }
        await admin.close()
        var configuration = base
        configuration.database = String(name)
        return configuration
    }

    actor DatabaseOnce {
        static let shared = DatabaseOnce()
        // A task, not a value: the actor is reentrant at each await, so two first callers would
        // otherwise each create a database, and tests running at once would use different ones.
        private var ready: Task<PostgresConfiguration, any Error>?

        func configuration() async throws -> PostgresConfiguration {
            if let ready { return try await ready.value }
            let task = Task {
                let configuration = try await RuntimeTestEnvironment.freshDatabase()
                let pool = PostgresPool(configuration: configuration, options: .init(maxConnections: 1), logger: logger)
                _ = try await Migrator(migrations: try AstroSchema.migrations(), logger: logger).migrate(pool: pool)
                try await pool.withConnection { try $0.executeScript(SampleJobHandler.createTableSQL) }
                await pool.close()
                return configuration
            }
            ready = task
            return try await task.value
        }
    }

    /// `Wait.until`: polls `condition` until it holds or `timeout` passes.
    /// - Throws: `TestFailure` naming `what` when `timeout` passes first.
    static func eventually(
        _ what: String,
        timeout: Duration = .seconds(20),
        _ condition: () async throws -> Bool
    ) async throws {
        try await Wait.until(what, timeout: timeout, condition)
    }

    /// `Wait.until`: reads a value with `observe` until `until` accepts it or `timeout` passes.
    /// - Throws: `TestFailure` naming `what` and the last value seen when `timeout` passes first.
    @discardableResult
    static func eventually<Value>(
        _ what: String,
        timeout: Duration = .seconds(20),
        observe: () async throws -> Value,
        until accept: (Value) -> Bool
    ) async throws -> Value {
        try await Wait.until(what, timeout: timeout, observe: observe, accept: accept)
    }

    /// Declares a queue bound to astro.events for the given routing key, to observe events.
    static func eventQueue(publisher: AMQPPublisher, routingKey: String) async throws -> String {
        let name = "events." + UUID().uuidString.lowercased().prefix(8)
        try await publisher.declare(
            Topology(
                // Bound to every event of its kind, including later tests' and benchmarks' on
                // the same broker: the broker deletes it once a minute passes unused.
                queues: [QueueSpec(name: name, durable: false, arguments: ["x-expires": .int(60_000)])],
                bindings: [BindingSpec(queue: name, exchange: BrokerNames.eventsExchange, routingKey: routingKey)]
            )
        )
        return name
    }

    /// Reads up to `count` messages from a queue (acknowledging them), waiting up to `timeout`.
    static func drain(_ queueName: String, count: Int, timeout: Duration = .seconds(20)) async throws -> [Delivery] {
        let consumer = AMQPConsumer(
            configuration: try RuntimeTestEnvironment.amqpConfiguration(),
            topology: .empty,
            queues: [queueName],
            prefetch: 50,
            logger: RuntimeTestEnvironment.logger
        )
        try await consumer.start()
        var received: [Delivery] = []
        let collector = Task {
            var collected: [Delivery] = []
            for await delivery in consumer.deliveries {
                try? await consumer.ack(delivery)
                collected.append(delivery)
                if collected.count >= count { break }
            }
            return collected
        }
        let timer = Task {
            try await Task.sleep(for: timeout)
            await consumer.close()
        }
        received = await collector.value
        timer.cancel()
        await consumer.close()
        return received
    }
}

/// A worker running in this process on a unique queue, with a publisher and a pool for checks.
struct RunningWorker: Sendable {
    let queue: String
    let worker: Worker
    let task: Task<Void, any Error>
    let publisher: AMQPPublisher
    let pool: PostgresPool

    static func start(
        handlers: (String) -> [any JobHandler],
        maxAttempts: Int = 3,
        prefetch: Int = 8
    ) async throws -> RunningWorker {
        let queue = "rt." + UUID().uuidString.lowercased().prefix(8)
        var configuration = WorkerConfiguration(
            amqp: try RuntimeTestEnvironment.amqpConfiguration(),
            database: try await RuntimeTestEnvironment.database(),
            httpPort: 0
        )
        configuration.httpHost = "127.0.0.1"
        configuration.maxAttempts = maxAttempts
        configuration.prefetch = prefetch
        configuration.retryInitialDelay = .milliseconds(200)
        configuration.retryMaxDelay = .milliseconds(400)
        configuration.outboxPollInterval = .milliseconds(200)
        configuration.databasePoolSize = 4
        let worker = Worker(
            name: "test-worker",
            configuration: configuration,
            queues: [JobType(rawValue: queue)],
            handlers: handlers(queue),
            logger: RuntimeTestEnvironment.logger
        )
        let task = Task { try await worker.run(startupTimeout: .seconds(20), handleSignals: false) }
        let publisher = AMQPPublisher(configuration: configuration.amqp, logger: RuntimeTestEnvironment.logger)
        try await publisher.connect()
        let pool = PostgresPool(
            configuration: configuration.database,
            options: .init(maxConnections: 2),
            logger: RuntimeTestEnvironment.logger
        )
        let running = RunningWorker(queue: queue, worker: worker, task: task, publisher: publisher, pool: pool)
        try await RuntimeTestEnvironment.eventually("the worker consumes \(queue)") {
            guard worker.boundHealthPort != nil else { return false }
            let state = try? await publisher.queueState(queue)
            return (state?.consumerCount ?? 0) > 0
        }
        return running
    }

    /// Publishes a job body to the worker's queue through astro.jobs.
    func publish(_ body: String, messageID: String? = nil) async throws {
        var properties = MessageProperties(contentType: "application/json")
        properties.messageID = messageID
        try await publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.jobsExchange,
                routingKey: queue,
                body: Data(body.utf8),
                properties: properties
            )
        )
    }

    /// Declares a queue bound to astro.events for the given routing key, to observe events.
    func eventQueue(routingKey: String) async throws -> String {
        try await RuntimeTestEnvironment.eventQueue(publisher: publisher, routingKey: routingKey)
    }

    /// Reads up to `count` messages from a queue (acknowledging them), waiting up to `timeout`.
    func drain(_ queueName: String, count: Int, timeout: Duration = .seconds(20)) async throws -> [Delivery] {
        try await RuntimeTestEnvironment.drain(queueName, count: count, timeout: timeout)
    }

    func jobRow(_ id: JobID) async throws -> (status: String, attempts: Int, errorCode: String?)? {
        try await pool.withConnection { database in
            let rows = try database.query(
                "SELECT status, attempts, error->>'code' AS code FROM jobs WHERE id = $1",
                [id.uuid]
            )
            guard let row = rows.first else { return nil }
            return (
                try row.decode(String.self, "status"), try row.decode(Int.self, "attempts"),
                try row.decode(String?.self, "code")
            )
        }
    }

    func effects(_ id: JobID) async throws -> [(note: String, attempt: Int)] {
        try await pool.withConnection { database in
            try database.query("SELECT note, attempt FROM sample_effects WHERE job_id = $1", [id.uuid]).map {
                (try $0.decode(String.self, "note"), try $0.decode(Int.self, "attempt"))
            }
        }
    }

    func waitForStatus(_ id: JobID, _ status: String, timeout: Duration = .seconds(20)) async throws {
        try await RuntimeTestEnvironment.eventually("job \(id) reaches \(status)", timeout: timeout) {
            try await jobRow(id)?.status == status
        }
    }

    func stop() async throws {
        await worker.shutdownGracefully()
        try await task.value
        for suffix in ["", ".dead"] { try? await publisher.deleteQueue(queue + suffix) }
        for step in worker.configuration.retryPolicy.steps {
            try? await publisher.deleteQueue(RetryPolicy.delayQueueName(queue: queue, step: step))
        }
        await publisher.close()
        await pool.close()
    }
}

/// Gives worker roles their login one statement at a time: two `ALTER ROLE` of one role at once
/// fail with PostgreSQL's "tuple concurrently updated", and tests running in parallel (eight
/// `astroctl` runs in a race test) ask for the same role together. The statement is idempotent,
/// so a clash with a statement from outside this process is tried again.
actor RoleLogins {
    static let shared = RoleLogins()
    private var tail: Task<Void, Never>?

    func enable(_ role: WorkerRole, password: String, in database: PostgresConfiguration) async throws {
        let previous = tail
        let work = Task {
            await previous?.value
            try await Self.alter(role, password: password, in: database)
        }
        tail = Task { _ = try? await work.value }
        try await work.value
    }

    private static func alter(_ role: WorkerRole, password: String, in database: PostgresConfiguration) async throws {
        let pool = PostgresPool(
            configuration: database,
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        var attempt = 0
        while true {
            do {
                try await pool.withConnection { try role.enableLogin(password: password, database: $0) }
                await pool.close()
                return
            } catch let error as PostgresError where attempt < 20 && "\(error)".contains("concurrently updated") {
                attempt += 1
                try? await Task.sleep(for: .milliseconds(10 * attempt))
            } catch {
                await pool.close()
                throw error
            }
        }
    }
}
