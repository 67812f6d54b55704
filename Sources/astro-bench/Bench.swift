import AMQP
import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import Postgres
import RetryBackoff
import UUIDText

struct BenchAMQP: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "amqp",
        abstract: "Publish-with-confirms and consume-with-ack rates of the AMQP module vs raw librabbitmq.",
        discussion: """
            Both sides use the same broker, a fresh durable queue, persistent messages of \
            --size bytes, publishes in windows of --window unconfirmed messages (each \
            window waits for its confirms), and a consumer with --prefetch that \
            acknowledges every delivery on its own. The raw side is the C program \
            amqp-raw-bench built beside astro-bench (or --raw-bench PATH). Rounds \
            alternate Swift and C so background load affects both alike; the best round \
            of each is compared.
            """
    )

    @Option(parsing: .unconditional, help: "Messages per round.") var count = 20000
    @Option(parsing: .unconditional, help: "Body size in bytes.") var size = 1024
    @Option(parsing: .unconditional, help: "Consumer prefetch.") var prefetch = 100
    @Option(parsing: .unconditional, help: "Unconfirmed messages per publish window.") var window = 100
    @Option(parsing: .unconditional, help: "Rounds of each side.") var rounds = 3
    @Option(help: "Path of the raw C benchmark (default: amqp-raw-bench beside astro-bench).") var rawBench: String?
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard count > 0, size >= 0, prefetch > 0, prefetch <= 65535, window > 0, rounds > 0 else {
            throw ValidationError("--count, --prefetch, --window and --rounds must be positive; --size ≥ 0")
        }
    }

    func run() async throws {
        let configuration = try connection.amqpConfiguration()
        let url = connection.resolvedAMQPURL
        let rawPath = rawBench ?? BenchProcesses.sibling("amqp-raw-bench")
        guard FileManager.default.isExecutableFile(atPath: rawPath) else {
            throw CommandFailure(
                "raw benchmark not found at \(rawPath): build it with `swift build --product amqp-raw-bench`"
            )
        }
        print(
            "bench amqp: \(count) persistent messages of \(size) B, window \(window), prefetch \(prefetch), \(rounds) rounds"
        )
        var swiftRounds: [(publish: Double, consume: Double)] = []
        var rawRounds: [(publish: Double, consume: Double)] = []
        for round in 1...rounds {
            let swift = try await swiftRound(configuration)
            print(
                String(
                    format: "  round %d swift: publish %8.0f msg/s  consume %8.0f msg/s",
                    round,
                    swift.publish,
                    swift.consume
                )
            )
            swiftRounds.append(swift)
            let raw = try await runRaw(path: rawPath, url: url)
            print(
                String(
                    format: "  round %d raw C: publish %8.0f msg/s  consume %8.0f msg/s",
                    round,
                    raw.publish,
                    raw.consume
                )
            )
            rawRounds.append(raw)
        }
        let bestSwift = (swiftRounds.map(\.publish).max() ?? 0, swiftRounds.map(\.consume).max() ?? 0)
        let bestRaw = (rawRounds.map(\.publish).max() ?? 0, rawRounds.map(\.consume).max() ?? 0)
        print(
            String(
                format: "publish-with-confirms: swift %.0f msg/s, raw C %.0f msg/s: %.0f%% of raw",
                bestSwift.0,
                bestRaw.0,
                100 * bestSwift.0 / max(bestRaw.0, 1)
            )
        )
        print(
            String(
                format: "consume-with-ack:      swift %.0f msg/s, raw C %.0f msg/s: %.0f%% of raw",
                bestSwift.1,
                bestRaw.1,
                100 * bestSwift.1 / max(bestRaw.1, 1)
            )
        )
    }

    private func swiftRound(_ configuration: AMQPConfiguration) async throws -> (publish: Double, consume: Double) {
        let logger = connection.logger
        let queue = "bench.amqp.swift.\(UUID().lowercasedText.prefix(8))"
        let publisher = AMQPPublisher(configuration: configuration, logger: logger)
        defer { Task { await publisher.close() } }
        try await publisher.connect()
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        let body = Data(repeating: 0x61, count: size)
        var properties = MessageProperties()
        properties.persistent = true
        properties.contentType = "application/octet-stream"
        let message = OutgoingMessage(
            exchange: "",
            routingKey: queue,
            body: body,
            properties: properties,
            mandatory: true
        )

        let publishStart = ContinuousClock.now
        var sent = 0
        while sent < count {
            let batch = Array(repeating: message, count: min(window, count - sent))
            try await publisher.publish(batch, timeout: .seconds(60))
            sent += batch.count
        }
        let publishSeconds = (ContinuousClock.now - publishStart).benchSeconds

        let consumer = AMQPConsumer(
            configuration: configuration,
            topology: .empty,
            queues: [queue],
            prefetch: UInt16(prefetch),
            logger: logger
        )
        try await consumer.start()
        let consumeStart = ContinuousClock.now
        var received = 0
        for await delivery in consumer.deliveries {
            try await consumer.ack(delivery)
            received += 1
            if received == count { break }
        }
        let consumeSeconds = (ContinuousClock.now - consumeStart).benchSeconds
        await consumer.close()
        try await publisher.deleteQueue(queue)
        guard received == count else { throw CommandFailure("consumed \(received) of \(count) messages") }
        return (Double(count) / publishSeconds, Double(count) / consumeSeconds)
    }

    private func runRaw(path: String, url: String) async throws -> (publish: Double, consume: Double) {
        let queue = "bench.amqp.raw.\(UUID().lowercasedText.prefix(8))"
        // The URL (with its password) goes in the environment, not on the command line, which
        // every user of the machine can read (ps, /proc/*/cmdline).
        let output = try await runProcess(
            path,
            [
                "--queue", queue, "--count", "\(count)", "--size", "\(size)", "--prefetch", "\(prefetch)",
                "--window", "\(window)",
            ],
            environment: ProcessInfo.processInfo.environment.merging(["AMQP_URL": url]) { _, new in new }
        )
        guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            let publish = object["publish_per_sec"] as? Double, let consume = object["consume_per_sec"] as? Double
        else { throw CommandFailure("unexpected output from \(path): \(output)") }
        return (publish, consume)
    }
}

struct BenchPostgres: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pg",
        abstract: "Single-row insert transactions per second through the pool, next to pgbench.",
        discussion: """
            Each transaction is BEGIN; INSERT one row with bound parameters; COMMIT — \
            through the Postgres module's pool with N concurrent callers, then the same \
            statements through pgbench (-M extended, N clients) with a custom script. \
            Durability is whatever the server is configured with (keep fsync and \
            synchronous_commit on for honest figures).
            """
    )

    @Option(parsing: .unconditional, help: "Seconds per measurement.") var seconds = 10
    @Option(parsing: .unconditionalSingleValue, help: "Concurrent callers (repeatable).") var clients: [Int] = [2, 8]
    @Option(help: "pgbench binary.") var pgbench = "pgbench"
    @Flag(help: "Skip the pgbench comparison.") var noPgbench = false
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard seconds > 0, !clients.isEmpty, clients.allSatisfy({ $0 > 0 && $0 <= 200 }) else {
            throw ValidationError("--seconds must be positive and --clients between 1 and 200")
        }
    }

    func run() async throws {
        let configuration = try connection.databaseConfiguration()
        let schema = "bench_pg_\(UUID().lowercasedText.prefix(8))"
        let logger = connection.logger
        let setup = PostgresPool(configuration: configuration, options: .init(maxConnections: 1), logger: logger)
        try await setup.withConnection { database in
            try database.executeScript(
                SQL(
                    unsafeSQL: """
                        CREATE SCHEMA \(schema);
                        CREATE TABLE \(schema).bench_rows (id bigserial PRIMARY KEY, job uuid NOT NULL, payload text NOT NULL,
                            created_at timestamptz NOT NULL DEFAULT now());
                        """
                )
            )
        }
        print("bench pg: single-row insert transactions, \(seconds) s per measurement")
        do {
            for clientCount in clients {
                let rate = try await poolRate(configuration: configuration, schema: schema, clients: clientCount)
                var line = String(format: "  %d callers: pool %8.0f tx/s", clientCount, rate)
                if !noPgbench {
                    // pgbench's -T relies on SIGALRM, which a child of a Swift process may
                    // inherit blocked; a transaction count sized to the same duration is used.
                    let transactions = (rate * Double(seconds)).clamped(to: 0...1e12)
                    let perClient = max(100, Int(transactions.isFinite ? transactions : 0) / clientCount)
                    let bench = try await pgbenchRate(
                        configuration: configuration,
                        schema: schema,
                        clients: clientCount,
                        transactionsPerClient: perClient
                    )
                    line += String(format: "   pgbench %8.0f tx/s   (%.0f%%)", bench, 100 * rate / max(bench, 1))
                }
                print(line)
            }
        } catch {
            try? await setup.withConnection { try $0.executeScript(SQL(unsafeSQL: "DROP SCHEMA \(schema) CASCADE")) }
            await setup.close()
            throw error
        }
        try await setup.withConnection { try $0.executeScript(SQL(unsafeSQL: "DROP SCHEMA \(schema) CASCADE")) }
        await setup.close()
    }

    private func poolRate(configuration: PostgresConfiguration, schema: String, clients: Int) async throws -> Double {
        let pool = PostgresPool(
            configuration: configuration,
            options: .init(maxConnections: clients),
            logger: connection.logger
        )
        let insert = SQL(unsafeSQL: "INSERT INTO \(schema).bench_rows (job, payload) VALUES ($1, $2)")
        // Warm up every connection so connecting is not measured.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<clients { group.addTask { try await pool.withConnection { _ = try $0.query("SELECT 1") } } }
            try await group.waitForAll()
        }
        let deadline = ContinuousClock.now + .seconds(seconds)
        let start = ContinuousClock.now
        let total = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<clients {
                group.addTask {
                    var done = 0
                    while ContinuousClock.now < deadline {
                        _ = try await pool.withTransaction { database in
                            try database.execute(insert, [UUID(), "payload"])
                        }
                        done += 1
                    }
                    return done
                }
            }
            return try await group.reduce(0, +)
        }
        let elapsed = (ContinuousClock.now - start).benchSeconds
        await pool.close()
        return Double(total) / elapsed
    }

    private func pgbenchRate(
        configuration: PostgresConfiguration,
        schema: String,
        clients: Int,
        transactionsPerClient: Int
    ) async throws -> Double {
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("\(schema).sql")
        try """
        BEGIN;
        INSERT INTO \(schema).bench_rows (job, payload) VALUES (gen_random_uuid(), 'payload');
        END;
        """.write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        var environment = ProcessInfo.processInfo.environment
        if let password = configuration.password { environment["PGPASSWORD"] = password }
        let output = try await runProcess(
            pgbench,
            [
                "-n", "-M", "extended", "-c", "\(clients)", "-j", "\(min(clients, 2))", "-t",
                "\(transactionsPerClient)", "-f",
                script.path, "-h", configuration.host, "-p", "\(configuration.port)", "-U", configuration.user,
                configuration.database,
            ],
            environment: environment
        )
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
            let value = Double(line.dropFirst(6).prefix(while: { $0.isNumber || $0 == "." }))
        else { throw CommandFailure("unexpected pgbench output: \(output)") }
        return value
    }
}
