import AMQP
import Foundation
import Logging
import Synchronization
import TestProcesses
import Testing

/// The broker the AMQP integration tests use, from the variables `scripts/stack.sh run` exports.
enum AMQPTestEnvironment {
    struct Missing: Error, CustomStringConvertible {
        let variable: String
        var description: String {
            "\(variable) is not set: run the integration tests with `bash scripts/integration-tests.sh [Suite…]`"
        }
    }

    static func variable(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
            let error = Missing(variable: name)
            Issue.record("\(error)")
            throw error
        }
        return value
    }

    /// AMQP_URL with quick reconnects, so that tests do not wait long after a broker restart.
    static func configuration(heartbeat: Duration = .seconds(10)) throws -> AMQPConfiguration {
        var config = try AMQPConfiguration(url: variable("AMQP_URL"))
        config.heartbeat = heartbeat
        config.connectTimeout = .seconds(5)
        config.reconnect = .init(initialDelay: .milliseconds(100), maxDelay: .seconds(1), multiplier: 2)
        config.connectionName = "astrosvitla-amqp-tests"
        return config
    }

    /// The virtual host of AMQP_URL: scripts/integration-tests.sh gives each suite one of its own, so
    /// a `rabbitmqctl` command scoped to a vhost (`-p`) must name this one, not the default `/`.
    static func virtualHost() throws -> String { try AMQPConfiguration(url: variable("AMQP_URL")).virtualHost }

    /// AMQPS_URL trusting AMQP_CA_FILE.
    static func tlsConfiguration() throws -> AMQPConfiguration {
        var config = try AMQPConfiguration(url: variable("AMQPS_URL"))
        config.tls?.caCertificatePath = try variable("AMQP_CA_FILE")
        config.connectTimeout = .seconds(5)
        return config
    }

    /// Runs `scripts/stack.sh <command>` against ASTRO_STACK_DIR, on a thread of its own (it blocks for
    /// seconds), with a clean signal mask: a broker started from the test process must still stop on
    /// SIGTERM, and the test runtime blocks signals in its threads.
    static func stack(_ command: String, _ extra: [String] = []) async throws {
        _ = try variable("ASTRO_STACK_DIR")
        let testFile = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        let script = testFile.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/stack.sh")
        let arguments = ["/bin/bash", script.path, command] + extra
        let status: Int32 = await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: spawnAndWait(arguments))
            }
            thread.start()
        }
        #expect(status == 0, "scripts/stack.sh \(command) failed with status \(status)")
    }

    private static func spawnAndWait(_ arguments: [String]) -> Int32 {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let cArguments = arguments.map { strdup($0) } + [nil]
        defer {
            for argument in cArguments { free(argument) }
        }
        var pid: pid_t = 0
        guard posix_spawn(&pid, arguments[0], nil, &attributes, cArguments, environ) == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return -1 }
        }
        return (status >> 8) & 0xFF
    }
}

/// A unique queue or exchange name for one test.
func amqpUniqueName(_ prefix: String) -> String {
    "astro.test.\(prefix).\(UUID().uuidString.prefix(8).lowercased())"
}

/// A consumer of one queue with no topology of its own, the set-up most tests share.
func amqpConsumer(_ configuration: AMQPConfiguration, queue: String, prefetch: UInt16, name: String) -> AMQPConsumer {
    AMQPConsumer(
        configuration: configuration,
        topology: .empty,
        queues: [queue],
        prefetch: prefetch,
        logger: amqpTestLogger(name)
    )
}

func amqpTestLogger(_ label: String) -> Logger {
    var logger = Logger(label: "amqp-tests.\(label)")
    logger.logLevel = ProcessInfo.processInfo.environment["AMQP_TEST_LOG"] == nil ? .critical : .debug
    return logger
}

func amqpTextMessage(_ text: String, to queue: String, id: String? = nil) -> OutgoingMessage {
    OutgoingMessage(
        routingKey: queue,
        body: Data(text.utf8),
        properties: MessageProperties(contentType: "text/plain", messageID: id ?? text)
    )
}

/// Collects a consumer's deliveries in the background so tests can wait for a count with a timeout.
final class AMQPDeliveryCollector: Sendable {
    private final class Storage: Sendable {
        let received = Mutex<[Delivery]>([])
        let finished = Atomic<Bool>(false)
    }

    private let storage: Storage
    private let task: Task<Void, Never>

    init(_ consumer: AMQPConsumer) {
        let stream = consumer.deliveries
        let storage = Storage()
        self.storage = storage
        task = Task {
            for await delivery in stream {
                storage.received.withLock { $0.append(delivery) }
            }
            storage.finished.store(true, ordering: .relaxed)
        }
    }

    deinit {
        task.cancel()
    }

    var all: [Delivery] {
        storage.received.withLock { $0 }
    }

    var isFinished: Bool {
        storage.finished.load(ordering: .relaxed)
    }

    /// Waits until at least `count` deliveries arrived; returns all so far.
    /// - Throws: `TestFailure` naming the count wanted and the count seen when `timeout`
    ///   passes first.
    @discardableResult
    func wait(count: Int, timeout: Duration = .seconds(30)) async throws -> [Delivery] {
        try await RuntimeTestEnvironment.eventually(
            "\(count) deliveries reach the test's consumer (deliveries so far)",
            timeout: timeout,
            observe: { all.count },
            until: { $0 >= count }
        )
        return all
    }

    /// Removes and returns what arrived so far.
    func drain() -> [Delivery] {
        storage.received.withLock { deliveries in
            let taken = deliveries
            deliveries.removeAll()
            return taken
        }
    }
}

/// A value shared between test tasks, behind a mutex (a class, so escaping closures can capture it).
final class AMQPLocked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) {
        mutex = Mutex(value)
    }

    func withLock<Result: Sendable>(_ body: (inout Value) -> Result) -> Result {
        mutex.withLock { body(&$0) }
    }

    var value: Value {
        mutex.withLock { $0 }
    }
}
