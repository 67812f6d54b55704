import AMQP
import AstroDomain
import Foundation
import Postgres
import Synchronization
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

/// Issue 14, against real sample-worker processes: no header, body or database failure stops a
/// worker; a message that crashes its worker is quarantined after DELIVERY_LIMIT deliveries; an
/// oversized body is dead-lettered unread; a failure no retry mends is dead-lettered at once; a
/// stuck lock costs a job seconds (lock_timeout), not its thread.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct PoisonMessageTests {
    /// A sample-worker process on a queue of its own, restarted when it dies (as a restart
    /// policy would), with its log in a file.
    final class SupervisedWorker: Sendable {
        let queue: String
        let log: URL
        private let environment: [String: String]
        private let state = Mutex<(process: ChildProcess?, starts: Int, stopping: Bool)>((nil, 0, false))
        private let supervisor = Mutex<Task<Void, Never>?>(nil)

        init(queue: String, environment extra: [String: String]) async throws {
            self.queue = queue
            let database = try await RuntimeTestEnvironment.database()
            environment = ProcessInfo.processInfo.environment.merging(
                [
                    "AMQP_URL": try RuntimeTestEnvironment.variable("AMQP_URL"),
                    "DATABASE_URL":
                        "postgres://\(database.user):\(database.password ?? "")@\(database.host):\(database.port)/\(database.database)",
                    "SAMPLE_QUEUE": queue, "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "notice",
                    "MIGRATE_ON_START": "false", "RETRY_INITIAL_DELAY_MS": "200", "RETRY_MAX_DELAY_MS": "400",
                ].merging(extra) { _, new in new }
            ) { _, new in new }
            log = FileManager.default.temporaryDirectory.appendingPathComponent("\(queue).log")
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            try await start()
            // Restarts the worker when it exits (not stopped), after a short pause, like
            // `restart: unless-stopped`. Holds the worker only while it looks.
            let task = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(50))
                    guard let self, await self.restartIfExited() else { return }
                }
            }
            supervisor.withLock { $0 = task }
        }

        /// Starts the worker again if it exited; `false` once stopping.
        private func restartIfExited() async -> Bool {
            guard let process = state.withLock({ $0.stopping ? nil : $0.process }) else { return false }
            if process.isRunning { return true }
            try? await Task.sleep(for: .milliseconds(300))
            do {
                try await start()
            } catch {
                Issue.record("the supervised worker did not restart: \(error)")
                return false
            }
            return true
        }

        private func start() async throws {
            let process = try await ChildProcess.start(
                executable: ProcessRunner.productPath("sample-worker"),
                arguments: [],
                environment: environment,
                label: "supervised-\(queue)",
                appendingTo: log
            )
            let kept = state.withLock { state -> Bool in
                guard !state.stopping else { return false }
                state.process = process
                state.starts += 1
                return true
            }
            if !kept { process.kill() }
        }

        /// Processes started so far (1 + restarts).
        var starts: Int { state.withLock { $0.starts } }
        var isRunning: Bool { state.withLock { $0.process?.isRunning ?? false } }
        var pid: pid_t? { state.withLock { $0.process?.pid } }

        /// Stops supervising, then the worker (SIGTERM, then SIGKILL; blocking, for a `defer`).
        func stop() {
            let process = state.withLock { state -> ChildProcess? in
                state.stopping = true
                return state.process
            }
            supervisor.withLock { $0?.cancel() }
            process?.stopWaiting()
        }

        /// The port its health endpoint bound (logged at info: the worker must run at that level).
        func healthPort() async throws -> Int {
            try await RuntimeTestEnvironment.eventually(
                "the worker logs its health port (log \(log.path))",
                timeout: .seconds(60)
            ) {
                output.contains("health endpoint listening")
            }
            guard let process = state.withLock({ $0.process }),
                let port = process.logValue("http.port", onLineWith: "health endpoint listening").flatMap(Int.init)
            else { throw TestFailure("no health port in \(log.path)\n\(output.suffix(2_000))") }
            return port
        }

        var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
    }

    let publisher: AMQPPublisher
    let pool: PostgresPool

    init() async throws {
        publisher = AMQPPublisher(
            configuration: try RuntimeTestEnvironment.amqpConfiguration(),
            logger: RuntimeTestEnvironment.logger
        )
        try await publisher.connect()
        pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 2),
            logger: RuntimeTestEnvironment.logger
        )
    }

    func close() async {
        await publisher.close()
        await pool.close()
    }

    static func queueName(_ prefix: String) -> String { "rt.\(prefix)." + UUID().uuidString.lowercased().prefix(8) }

    func waitForConsumer(_ queue: String) async throws {
        try await RuntimeTestEnvironment.eventually("a worker consumes \(queue)") {
            ((try? await publisher.queueState(queue))?.consumerCount ?? 0) > 0
        }
    }

    func publish(
        _ queue: String,
        _ id: JobID,
        _ fields: String = "",
        headers: AMQPTable = [:],
        timestamp: Date? = nil
    ) async throws {
        try await publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.jobsExchange,
                routingKey: queue,
                body: Data(#"{"jobId":"\#(id)","note":"poison test"\#(fields)}"#.utf8),
                properties: MessageProperties(
                    contentType: "application/json",
                    headers: headers,
                    messageID: id.description,
                    timestamp: timestamp
                )
            )
        )
    }

    /// The job's status, attempts and error code.
    func job(_ id: JobID) async throws -> (status: String, attempts: Int, code: String?)? {
        try await pool.withConnection { database in
            guard
                let row = try database.query(
                    "SELECT status, attempts, error->>'code' AS code FROM jobs WHERE id = $1",
                    [id.uuid]
                ).first
            else { return nil }
            return (
                try row.decode(String.self, "status"), try row.decode(Int.self, "attempts"),
                try row.decode(String?.self, "code")
            )
        }
    }

    func waitForEnd(_ ids: [JobID], timeout: Duration = .seconds(40)) async throws {
        try await RuntimeTestEnvironment.eventually("\(ids.count) jobs finished", timeout: timeout) {
            for id in ids {
                guard let job = try await job(id), ["succeeded", "failed", "dead"].contains(job.status) else {
                    return false
                }
            }
            return true
        }
    }

    /// A header value nested `depth` arrays deep.
    static func nested(_ depth: Int) -> AMQPFieldValue {
        var value = AMQPFieldValue.int(1)
        for _ in 0..<depth { value = .array([value]) }
        return value
    }

    @Test func headersOfAnyTypeAndValueNeverStopAWorker() async throws {
        defer { Task { await close() } }
        let queue = Self.queueName("headers")
        let worker = try await SupervisedWorker(queue: queue, environment: ["PREFETCH": "4"])
        defer { worker.stop() }
        try await waitForConsumer(queue)
        // A queue that a CC header would reach through the retry exchange, if copies kept it.
        let spy = queue + ".spy"
        try await publisher.declare(
            Topology(
                queues: [QueueSpec(name: spy, durable: false, arguments: ["x-expires": .int(120_000)])],
                bindings: [BindingSpec(queue: spy, exchange: BrokerNames.retryExchange, routingKey: spy)]
            )
        )
        // (NaN and infinite doubles cannot be tried here: RabbitMQ closes the publisher's
        // connection with INTERNAL_ERROR before a worker could see them.)
        let poisons: [AMQPFieldValue] = [
            .int(.max), .int(.min), .int(-1), .double(1e300), .double(-0.5),
            .string("9223372036854775807"), .string(String(repeating: "9", count: 10_000)), .string("-7"), .bool(true),
            .void, .table(["x": .int(1)]), .array([.string("a")]), Self.nested(200),
        ]
        var ids: [JobID] = []
        for (index, poison) in poisons.enumerated() {
            let id = JobID.random()
            ids.append(id)
            // Half of them fail once, so the runtime copies the delivery into a retry.
            try await publish(
                queue,
                id,
                index.isMultiple(of: 2) ? #","failUntilAttempt":1"# : "",
                headers: [
                    BrokerNames.Header.attempt: poison, BrokerNames.Header.deliveryCount: poison,
                    "x-astro-anything": poison, "CC": .array([.string(spy)]), "BCC": .array([.string(spy)]),
                ],
                // A timestamp near 2^64 seconds trapped the publisher that copied it.
                timestamp: index == 0 ? Date(timeIntervalSince1970: 1.8446744073709552e19) : nil
            )
        }
        try await waitForEnd(ids)
        #expect(worker.isRunning, "the worker died:\n\(worker.output.suffix(3000))")
        #expect(worker.starts == 1, "the worker was restarted \(worker.starts - 1) times")
        var ended: [String: Int] = [:]
        for id in ids {
            let job = try #require(try await job(id))
            ended[job.status, default: 0] += 1
            // A forged attempt of Int64.max leaves no retry; nothing buys extra attempts.
            #expect(job.attempts <= 5)
        }
        #expect(ended.values.reduce(0, +) == poisons.count, "\(ended)")
        #expect(try await publisher.queueState(spy).messageCount == 0, "a CC header routed a copy")
    }

    @Test func aMessageThatCrashesItsWorkerIsQuarantinedAfterTheDeliveryLimit() async throws {
        defer { Task { await close() } }
        let queue = Self.queueName("crash")
        let worker = try await SupervisedWorker(
            queue: queue,
            environment: ["PREFETCH": "1", "DELIVERY_LIMIT": "3", "SAMPLE_ALLOW_CRASH": "1"]
        )
        defer { worker.stop() }
        try await waitForConsumer(queue)
        let poison = JobID.random()
        try await publish(queue, poison, #","crash":true"#)
        let good = (0..<3).map { _ in JobID.random() }
        for id in good { try await publish(queue, id) }
        try await waitForEnd([poison] + good, timeout: .seconds(60))
        let dead = try #require(try await job(poison))
        #expect(dead.status == "dead")
        #expect(dead.code == "delivery-limit")
        for id in good { #expect(try await job(id)?.status == "succeeded") }
        // Three deliveries crashed it; the fourth was quarantined without running.
        #expect(worker.starts == 4, "started \(worker.starts) times")
        try await RuntimeTestEnvironment.eventually("the worker is up again") { worker.isRunning }
        let letters = try await RuntimeTestEnvironment.drain(BrokerNames.deadLetterQueue(of: queue), count: 1)
        #expect(letters.first?.properties.headers[BrokerNames.Header.reasonCode] == .string("delivery-limit"))
        let body = String(decoding: letters.first?.body ?? Data(), as: UTF8.self)
        #expect(body.contains(poison.description))
    }

    /// A message reusing a finished job's id — with a forged delivery count that would once have
    /// quarantined it, or a body that is rejected — leaves that job as it was: no dead row, no
    /// failed event, no dead letter.
    @Test func aMessageReusingAFinishedJobsIDChangesNothing() async throws {
        defer { Task { await close() } }
        let queue = Self.queueName("reuse")
        let worker = try await SupervisedWorker(queue: queue, environment: ["DELIVERY_LIMIT": "3"])
        defer { worker.stop() }
        try await waitForConsumer(queue)
        let id = JobID.random()
        try await publish(queue, id)
        try await waitForEnd([id])
        #expect(try await job(id)?.status == "succeeded")
        try await publish(queue, id, headers: [BrokerNames.Header.deliveryCount: .int(100)])
        try await publish(queue, id, #","reject":"forged-rejection""#)
        let marker = JobID.random()
        try await publish(queue, marker)
        try await waitForEnd([marker])
        try await RuntimeTestEnvironment.eventually(
            "the forged copies of job \(id) are consumed from \(queue) (messages left)",
            timeout: .seconds(30),
            observe: { try await publisher.queueState(queue).messageCount },
            until: { $0 == 0 }
        )
        try await Task.sleep(for: .milliseconds(300))
        let finished = try #require(try await job(id))
        #expect(finished.status == "succeeded", "a copy rewrote the finished job: \(finished)")
        #expect(finished.code == nil)
        #expect(try await publisher.queueState(BrokerNames.deadLetterQueue(of: queue)).messageCount == 0)
        let failedEvents = try await pool.withConnection { database in
            try database.query(
                "SELECT count(*) AS n FROM outbox WHERE job_id = $1 AND routing_key LIKE '%.failed'",
                [id.uuid]
            ).first!.decode(Int.self, "n")
        }
        #expect(failedEvents == 0)
    }

    /// CPU seconds a process has used (utime + stime from /proc).
    static func cpuSeconds(_ pid: pid_t) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime 14, stime 15.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A worker out of file descriptors keeps its health endpoint from spinning on a listener
    /// it cannot accept from, and answers again once connections go.
    @Test func aWorkerOutOfFileDescriptorsDoesNotSpin() async throws {
        defer { Task { await close() } }
        let queue = Self.queueName("fds")
        // Any free health port, which the worker logs at info.
        let worker = try await SupervisedWorker(queue: queue, environment: ["LOG_LEVEL": "info"])
        defer { worker.stop() }
        let port = try await worker.healthPort()
        try await waitForConsumer(queue)
        let pid = try #require(worker.pid)
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        // (util-linux's prlimit: glibc's prlimit() is not visible to Swift.)
        let limited = try await ProcessRunner.run(
            "/usr/bin/prlimit",
            ["--pid", "\(pid)", "--nofile=\(open + 6):\(open + 6)"]
        )
        #expect(limited.status == 0, "\(limited.error)")
        var flood: [Int32] = []
        defer { for descriptor in flood { Glibc.close(descriptor) } }
        for _ in 0..<60 {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            if connected == 0 { flood.append(descriptor) } else { Glibc.close(descriptor) }
        }
        try await Task.sleep(for: .milliseconds(500))
        let before = try #require(Self.cpuSeconds(pid))
        try await Task.sleep(for: .seconds(2))
        let used = try #require(Self.cpuSeconds(pid)) - before
        #expect(used < 0.6, "the worker used \(used) CPU seconds in 2 s while out of descriptors")
        #expect(worker.isRunning && worker.starts == 1)
        for descriptor in flood { Glibc.close(descriptor) }
        flood = []
        try await RuntimeTestEnvironment.eventually("the health endpoint answers again", timeout: .seconds(15)) {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { Glibc.close(descriptor) }
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else { return false }
            let request = Array("GET /healthz HTTP/1.1\r\n\r\n".utf8)
            _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var buffer = [UInt8](repeating: 0, count: 64)
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            return count > 0 && String(decoding: buffer[0..<count], as: UTF8.self).hasPrefix("HTTP/1.1 200")
        }
    }

    @Test func anOversizedBodyIsDeadLetteredUnread() async throws {
        defer { Task { await close() } }
        let queue = Self.queueName("size")
        let worker = try await SupervisedWorker(queue: queue, environment: ["MAX_MESSAGE_BYTES": "4096"])
        defer { worker.stop() }
        try await waitForConsumer(queue)
        let big = JobID.random()
        try await publish(queue, big, #","pad":"\#(String(repeating: "x", count: 20_000))""#)
        let small = JobID.random()
        try await publish(queue, small)
        try await waitForEnd([small])
        let letters = try await RuntimeTestEnvironment.drain(BrokerNames.deadLetterQueue(of: queue), count: 1)
        // The broker moved the whole message (the worker never held it): x-death says rejected.
        #expect(letters.first?.body.count ?? 0 > 20_000)
        let head = String(decoding: letters.first?.body.prefix(200) ?? Data(), as: UTF8.self)
        #expect(head.contains(big.description))
        if case .array(let deaths)? = letters.first?.properties.headers["x-death"],
            case .table(let death)? = deaths.first
        {
            #expect(death["reason"] == .string("rejected"))
        } else {
            Issue.record("no x-death header on the dead letter")
        }
        // Its job id, found in the kept end of the body, got the reason and a failed event.
        try await waitForEnd([big])
        let refused = try #require(try await job(big))
        #expect(refused.status == "dead" && refused.code == "message-too-large", "\(refused)")
        let failed = try await pool.withConnection { database in
            try database.query(
                "SELECT count(*)::int AS n FROM outbox WHERE job_id = $1 AND routing_key LIKE '%.failed'",
                [big.uuid]
            ).first!.decode(Int.self, "n")
        }
        #expect(failed == 1)
        #expect(worker.isRunning)
        #expect(worker.starts == 1)
    }

    @Test func aFailureNoRetryMendsIsDeadLetteredOnTheFirstAttempt() async throws {
        defer { Task { await close() } }
        let queue = Self.queueName("permanent")
        let worker = try await SupervisedWorker(queue: queue, environment: [:])
        defer { worker.stop() }
        try await waitForConsumer(queue)
        let id = JobID.random()
        try await publish(queue, id, #","violateConstraint":true"#)
        try await waitForEnd([id])
        let job = try #require(try await job(id))
        #expect(job.status == "dead")
        #expect(job.attempts == 1, "a not-null violation was retried \(job.attempts - 1) times")
        #expect(job.code == "database-error-23502")
    }

    @Test func aStuckLockCostsAJobSecondsNotItsThread() async throws {
        defer { Task { await close() } }
        let queue = Self.queueName("lock")
        let worker = try await SupervisedWorker(
            queue: queue,
            environment: ["DB_LOCK_TIMEOUT_MS": "500", "MAX_ATTEMPTS": "20"]
        )
        defer { worker.stop() }
        try await waitForConsumer(queue)
        let id = JobID.random()
        // Another session holds the table the job writes for three seconds, as a stuck
        // transaction would: the job's statement gives up after 500 ms and is retried.
        let holder = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        let held = Task {
            try await holder.withTransaction { database in
                try database.executeScript("LOCK TABLE sample_effects IN ACCESS EXCLUSIVE MODE")
                usleep(3_000_000)
            }
        }
        try await RuntimeTestEnvironment.eventually(
            "another session holds the ACCESS EXCLUSIVE lock on sample_effects (granted such locks)",
            timeout: .seconds(30),
            observe: {
                try await pool.withConnection { database in
                    try database.query(
                        """
                        SELECT count(*)::int AS n FROM pg_locks
                        WHERE relation = 'sample_effects'::regclass AND mode = 'AccessExclusiveLock' AND granted
                        """
                    ).first?.decode(Int.self, "n")
                }
            },
            until: { ($0 ?? 0) > 0 }
        )
        let started = ContinuousClock.now
        try await publish(queue, id)
        try await RuntimeTestEnvironment.eventually(
            "the job's first attempt gives up on the lock",
            timeout: .seconds(10)
        ) {
            (try await job(id)?.code) == "database-timeout"
        }
        let gaveUp = ContinuousClock.now - started
        #expect(gaveUp < .seconds(3), "the lock wait took \(gaveUp)")
        try await held.value
        await holder.close()
        try await waitForEnd([id])
        let done = try #require(try await job(id))
        #expect(done.status == "succeeded")
        #expect(done.attempts >= 2)
        #expect(worker.isRunning)
    }
}
