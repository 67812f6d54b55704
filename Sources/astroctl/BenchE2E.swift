import AMQP
import ArgumentParser
import AstroDomain
import Foundation
import LLMFake
import Postgres
import Schema
import Synchronization
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

struct BenchE2E: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "e2e",
        abstract: "Jobs per second from publish to committed result, through real workers, broker and database.",
        discussion: """
            For each worker count in --workers, starts that many worker processes (the binaries beside
            astroctl), publishes --count jobs with confirms, and times each job from its publish to the
            event its worker's transaction committed (chart.calculated, sample.done, …). Prints the
            throughput, p50/p95/p99 latency, and the workers' peak resident memory, with a progress bar
            on standard error while it runs. Needs a migrated database and the broker (astroctl migrate).

            --type report is the paid journey: report.request through one billing-worker (spends a
            seeded credit) and --workers report-workers (write and store the report), timed to
            report.completed. With --llm-delay the report-workers write through a local fake
            OpenAI-compatible endpoint that answers after that many seconds; their LLM concurrency
            is --prefetch.

            Examples:
              astroctl bench e2e --type chart --count 20000 --workers 1 --workers 2
              astroctl bench e2e --type sample --count 5000
              astroctl bench e2e --type report --count 2000 --workers 1
              astroctl bench e2e --type report --count 640 --workers 1 --prefetch 32 --llm-delay 1.5
              astroctl bench e2e --mix chart=80,report=20 --count 20000 --workers 1 --workers 2 --workers 4
            """
    )

    enum Kind: String, ExpressibleByArgument, CaseIterable {
        case chart, sample
        /// report.request through billing-workers: one credit consumed per job, many users.
        case consume
        /// The same, every job from one user (all consumers contend for one user's credits).
        case consumeHot = "consume-hot"
        /// report.request to a stored report: a billing-worker and report-workers.
        case report

        /// Jobs that spend seeded credits.
        var isBilling: Bool { self == .consume || self == .consumeHot || self == .report }
    }

    @Option(help: "Job type to drive: \(Kind.allCases.map(\.rawValue).joined(separator: ", ")).") var type: Kind =
        .chart
    @Option(parsing: .unconditional, help: "Jobs per measurement.") var count = 20000
    @Option(parsing: .unconditionalSingleValue, help: "Worker processes (repeatable: one measurement each).")
    var workers: [Int] = [1, 2]
    @Option(parsing: .unconditional, help: "Worker PREFETCH.") var prefetch = 64
    @Option(parsing: .unconditional, help: "Jobs per confirmed publish batch.") var window = 200
    @Option(
        parsing: .unconditional,
        help: "Publish at most this many jobs per second (default: all at once), for latency at a steady load."
    )
    var rate: Int?
    @Option(parsing: .unconditional, help: "Give up after this many seconds per measurement.") var timeout = 300
    @Option(name: .customLong("worker-env"), help: "Extra KEY=VALUE for the workers (repeatable).")
    var workerEnvironment: [String] = []
    @Option(
        name: .customLong("llm-delay"),
        parsing: .unconditional,
        help: "--type report: write through a local fake LLM endpoint answering after this many seconds."
    )
    var llmDelay: Double?
    @Option(
        help: """
            A mix of job types instead of --type, e.g. chart=80,report=20: --workers counts the \
            chart-workers; one billing-worker and one report-worker serve the reports.
            """
    )
    var mix: String?
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        if let rate, rate <= 0 { throw ValidationError("--rate must be positive") }
        guard count > 0, window > 0, timeout > 0, !workers.isEmpty, workers.allSatisfy({ $0 > 0 && $0 <= 16 }) else {
            throw ValidationError("--count, --window, --timeout must be positive; --workers between 1 and 16")
        }
        if let llmDelay {
            guard type == .report else { throw ValidationError("--llm-delay applies to --type report") }
            guard llmDelay >= 0, llmDelay <= 60 else { throw ValidationError("--llm-delay must be 0…60 seconds") }
        }
        if let mix { _ = try BenchMix(parsing: mix) }
        for item in workerEnvironment where !item.contains("=") {
            throw ValidationError("--worker-env takes KEY=VALUE, got \(item.debugDescription)")
        }
    }

    private var workerBinary: String {
        switch type {
        case .chart: "chart-worker"
        case .sample: "sample-worker"
        case .consume, .consumeHot: "billing-worker"
        case .report: "report-worker"
        }
    }
    private var queue: String {
        switch type {
        case .chart: JobType.chartCalculate.rawValue
        case .sample: "bench.sample"
        case .consume, .consumeHot, .report: JobType.reportRequest.rawValue
        }
    }
    /// The queue the measured workers consume (report-workers: report.generate).
    private var workerQueue: String { type == .report ? JobType.reportGenerate.rawValue : queue }
    private var doneEvents: [EventType] {
        switch type {
        case .chart: [.chartCalculated, .chartFailed]
        case .sample: ["sample.done", "bench.sample.failed"]  // the sample worker's: outside the contract
        case .consume, .consumeHot: [.billingCreditConsumed, .reportFailed]
        case .report: [.reportCompleted, .reportFailed]
        }
    }

    func run() async throws {
        let logger = connection.logger
        let amqp = try connection.amqpConfiguration()
        let database = try connection.databaseConfiguration()
        if let mix {
            try await runMix(try BenchMix(parsing: mix), amqp: amqp, database: database)
            return
        }
        let binary = BenchAMQP.sibling(workerBinary)
        for needed in [binary] + (type == .report ? [BenchAMQP.sibling("billing-worker")] : [])
        where !FileManager.default.isExecutableFile(atPath: needed) {
            throw CommandFailure("\(needed) not found beside astroctl: build it first")
        }
        try await connection.withPool { pool in
            _ = try await Migrator(migrations: try AstroSchema.migrations(), logger: logger).migrate(pool: pool)
        }
        print("bench e2e: \(count) \(queue) jobs per measurement, prefetch \(prefetch), publish window \(window)")
        if type == .report {
            print(
                "  one billing-worker spends the credits; report-workers write "
                    + (llmDelay.map { "through a fake LLM answering after \($0) s" } ?? "with the built-in writer")
            )
        }
        var summaries: [String] = []
        for workerCount in workers {
            let result = try await measure(workers: workerCount, amqp: amqp, database: database, binary: binary)
            summaries.append(result)
            print(result)
        }
        if summaries.count > 1 {
            print("summary:")
            for line in summaries { print("  " + line) }
        }
    }

    private func measure(
        workers workerCount: Int,
        amqp: AMQPConfiguration,
        database: PostgresConfiguration,
        binary: String
    )
        async throws -> String
    {
        let logger = connection.logger
        let publisher = AMQPPublisher(configuration: amqp, logger: logger)
        try await publisher.connect()
        let retry = RetryPolicy(maxAttempts: 5, initialDelay: .seconds(1), maxDelay: .seconds(60))
        // Consumption publishes report.generate: its queue must exist (nobody consumes it here).
        let extraQueues = type.isBilling ? [JobType.reportGenerate.rawValue] : []
        try await publisher.declare(WorkerTopology.topology(queues: [queue] + extraQueues, retry: retry))
        _ = try await publisher.purgeQueue(queue)
        _ = try await publisher.purgeQueue(workerQueue)
        var generator = JobBodyGenerator(kind: type)
        if type.isBilling {
            let chartData = type == .report ? try await ReportBenchFixture.chartJSON() : "{}"
            generator.reportRequesters = try await connection.withPool { pool in
                try await BillingBenchSeed.seed(
                    pool: pool,
                    jobs: count,
                    hotUser: type == .consumeHot,
                    chartData: chartData
                )
            }
        }
        var llmFake: OpenAIFake?
        if let llmDelay { llmFake = try await ReportBenchFixture.llmFake(delay: llmDelay) }
        defer { llmFake?.stop() }

        // Events of this run: a private queue bound to the done events.
        let eventQueue = "bench.e2e.events.\(UUID().uuidString.prefix(8).lowercased())"
        try await publisher.declare(
            Topology(
                queues: [QueueSpec(name: eventQueue, durable: false, exclusive: false, autoDelete: false)],
                bindings: doneEvents.map {
                    BindingSpec(queue: eventQueue, exchange: BrokerNames.eventsExchange, routingKey: $0.rawValue)
                }
            )
        )

        var environment = BenchWorkers.environment(connection: connection, prefetch: prefetch)
        environment["SAMPLE_QUEUE"] = queue
        if type.isBilling, environment["BILLING_ENVIRONMENT"] == nil { environment["BILLING_ENVIRONMENT"] = "Sandbox" }
        if let llmFake {
            environment["LLM_BASE_URL"] = llmFake.baseURL.absoluteString
            environment["LLM_MODEL"] = "bench-fake"
            environment["LLM_API_KEY"] = llmFake.apiKey
        }
        for item in workerEnvironment {
            let parts = item.split(separator: "=", maxSplits: 1)
            environment[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        var processes: [Process] = []
        var healthPorts: [Int] = []
        // --type report: the measured report-workers, then the billing-worker feeding them.
        let binaries =
            Array(repeating: binary, count: workerCount)
            + (type == .report ? [BenchAMQP.sibling("billing-worker")] : [])
        for processBinary in binaries {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: processBinary)
            // A known port per worker, so its /metrics can be read at the end.
            let port = try Self.freePort()
            healthPorts.append(port)
            environment["HTTP_PORT"] = String(port)
            process.environment = environment
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.standardError
            try process.run()
            processes.append(process)
        }
        defer {
            for process in processes where process.isRunning { process.terminate() }
        }
        let started = ContinuousClock.now
        while true {
            let consuming = try await publisher.queueState(workerQueue).consumerCount
            let feeding = try await publisher.queueState(queue).consumerCount
            if consuming >= workerCount && feeding >= 1 { break }
            guard ContinuousClock.now - started < .seconds(60) else {
                throw CommandFailure("the \(workerBinary) processes did not start consuming within 60 s")
            }
            try await Task.sleep(for: .milliseconds(100))
        }

        let times = BenchTimes(count: count)
        let consumer = AMQPConsumer(
            configuration: amqp,
            topology: .empty,
            queues: [eventQueue],
            prefetch: 500,
            logger: logger
        )
        try await consumer.start()
        let collector = Task {
            var unacknowledged = 0
            for await delivery in consumer.deliveries {
                let now = ContinuousClock.now
                // One cumulative ack per 100 events (deliveries arrive in order on one channel):
                // the measuring side should cost the broker as little as it can.
                unacknowledged += 1
                if unacknowledged >= 100 {
                    try? await consumer.ack(delivery, multiple: true)
                    unacknowledged = 0
                }
                // report-workers' events run under a derived job id and name the request's.
                if let object = try? JSONValue.parse(delivery.body),
                    let id = (object["requestJobId"] ?? object["jobId"])?.stringValue, let jobID = JobID(id)
                {
                    if times.finish(jobID, at: now, failed: object["error"] != nil) >= count {
                        if unacknowledged > 0 { try? await consumer.ack(delivery, multiple: true) }
                        break
                    }
                }
            }
        }
        let peakMemory = PeakMemory(pids: processes.map(\.processIdentifier))
        let sampler = Task {
            while !Task.isCancelled {
                peakMemory.sample()
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        let progress = Task {
            while !Task.isCancelled {
                Self.drawProgress(done: times.finishedCount, total: count, since: times.firstPublish)
                try? await Task.sleep(for: .milliseconds(250))
            }
        }

        var published = 0
        let publishStart = ContinuousClock.now
        while published < count {
            if let rate {
                // Paced: the next batch leaves when the schedule says, not as fast as possible.
                let due = publishStart + .seconds(Double(published) / Double(rate))
                if due > ContinuousClock.now { try await Task.sleep(until: due) }
            }
            let size = min(window, count - published, rate.map { max(1, $0 / 20) } ?? window)
            var messages: [OutgoingMessage] = []
            var ids: [JobID] = []
            for _ in 0..<size {
                let id = JobID.random()
                ids.append(id)
                var properties = MessageProperties(contentType: "application/json")
                properties.messageID = id.description
                messages.append(
                    OutgoingMessage(
                        exchange: BrokerNames.jobsExchange,
                        routingKey: queue,
                        body: generator.body(jobID: id),
                        properties: properties
                    )
                )
            }
            times.published(ids, at: ContinuousClock.now)
            try await publisher.publish(messages, timeout: .seconds(60))
            published += size
        }

        let deadline = ContinuousClock.now + .seconds(timeout)
        while times.finishedCount < count, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        progress.cancel()
        sampler.cancel()
        var batches = 0.0
        var batchedJobs = 0.0
        for port in healthPorts {
            guard let text = try? await runProcess("curl", ["-fsS", "http://127.0.0.1:\(port)/metrics"]) else {
                continue
            }
            batches += Self.metric("astro_commit_batches_total", in: text)
            batchedJobs += Self.metric("astro_commit_batch_jobs_total", in: text)
        }
        Self.drawProgress(done: times.finishedCount, total: count, since: times.firstPublish)
        FileHandle.standardError.write(Data("\n".utf8))
        await consumer.close()
        collector.cancel()
        for process in processes where process.isRunning { process.terminate() }
        for process in processes { process.waitUntilExit() }
        try? await publisher.deleteQueue(eventQueue)
        for extra in extraQueues { _ = try? await publisher.purgeQueue(extra) }
        let llmConcurrency = llmFake?.maxConcurrentRequests
        await publisher.close()

        let report = times.report()
        guard report.finished == count else {
            throw CommandFailure("only \(report.finished) of \(count) jobs finished within \(timeout) s")
        }
        let llmNote = llmConcurrency.map { "  LLM requests in flight at most \($0)" } ?? ""
        return String(
            format:
                "%d worker%@: %7.1f jobs/s  p50 %6.1f ms  p95 %6.1f ms  p99 %6.1f ms  failed %d  worker peak RSS %.1f MB"
                + "  jobs per commit %.1f%@",
            workerCount,
            workerCount == 1 ? "" : "s",
            report.throughput,
            report.p50 * 1000,
            report.p95 * 1000,
            report.p99 * 1000,
            report.failed,
            Double(peakMemory.peakKilobytes) / 1024,
            batches > 0 ? batchedJobs / batches : 0,
            llmNote
        )
    }

    private func runMix(_ mix: BenchMix, amqp: AMQPConfiguration, database: PostgresConfiguration) async throws {
        for name in ["chart-worker", "billing-worker", "report-worker"]
        where !FileManager.default.isExecutableFile(atPath: BenchAMQP.sibling(name)) {
            throw CommandFailure("\(name) not found beside astroctl: build it first")
        }
        try await connection.withPool { pool in
            _ = try await Migrator(migrations: try AstroSchema.migrations(), logger: connection.logger).migrate(
                pool: pool
            )
        }
        print(
            "bench e2e --mix chart=\(mix.chart),report=\(mix.report): \(count) jobs per measurement "
                + "(\(mix.reports(of: count)) report requests), prefetch \(prefetch), publish window \(window)"
        )
        var summaries: [String] = []
        for chartWorkers in workers {
            let result = try await measureMix(mix, chartWorkers: chartWorkers, amqp: amqp, database: database)
            summaries.append(result)
            print(result)
        }
        if summaries.count > 1 {
            print("summary:")
            for line in summaries { print(line) }
        }
    }

    /// A port nobody listens on right now (bound once to port 0, then released).
    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw CommandFailure("socket() failed") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(descriptor, pointer, length) == 0 else { return -1 }
                return getsockname(descriptor, pointer, &length)
            }
        }
        guard bound == 0 else { throw CommandFailure("could not find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// The value of an unlabelled metric in Prometheus text.
    static func metric(_ name: String, in text: String) -> Double {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.split(separator: " ").last ?? "") ?? 0
        }
        return 0
    }

    static func drawProgress(done: Int, total: Int, since start: ContinuousClock.Instant?) {
        let width = 30
        let filled = total == 0 ? width : min(width, done * width / total)
        var rate = 0.0
        if let start {
            let elapsed = (ContinuousClock.now - start).benchSeconds
            if elapsed > 0 { rate = Double(done) / elapsed }
        }
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let line = String(format: "\r  [%@] %d/%d  %.0f jobs/s ", bar, done, total, rate)
        FileHandle.standardError.write(Data(line.utf8))
    }
}

/// Publish and finish times of every job of one measurement.
final class BenchTimes: Sendable {
    private struct State {
        var published: [JobID: ContinuousClock.Instant] = [:]
        var latencies: [Double] = []
        var firstPublish: ContinuousClock.Instant?
        var lastFinish: ContinuousClock.Instant?
        var failed = 0
        var seen: Set<JobID> = []
    }
    private let state: Mutex<State>

    init(count: Int) {
        var initial = State()
        initial.published.reserveCapacity(count)
        initial.latencies.reserveCapacity(count)
        state = Mutex(initial)
    }

    func published(_ ids: [JobID], at instant: ContinuousClock.Instant) {
        state.withLock { state in
            if state.firstPublish == nil { state.firstPublish = instant }
            for id in ids { state.published[id] = instant }
        }
    }

    /// Records a finished job once; returns how many have finished.
    func finish(_ id: JobID, at instant: ContinuousClock.Instant, failed: Bool) -> Int {
        state.withLock { state in
            guard let start = state.published[id], state.seen.insert(id).inserted else { return state.seen.count }
            state.latencies.append((instant - start).benchSeconds)
            state.lastFinish = instant
            if failed { state.failed += 1 }
            return state.seen.count
        }
    }

    var finishedCount: Int { state.withLock { $0.seen.count } }
    var firstPublish: ContinuousClock.Instant? { state.withLock { $0.firstPublish } }

    struct Report {
        var finished: Int
        var failed: Int
        var throughput: Double
        var p50: Double
        var p95: Double
        var p99: Double
    }

    func report() -> Report {
        state.withLock { state in
            let sorted = state.latencies.sorted()
            func percentile(_ p: Double) -> Double {
                guard !sorted.isEmpty else { return 0 }
                return sorted[min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
            }
            var throughput = 0.0
            if let first = state.firstPublish, let last = state.lastFinish {
                throughput = Double(sorted.count) / max((last - first).benchSeconds, 1e-9)
            }
            return Report(
                finished: sorted.count,
                failed: state.failed,
                throughput: throughput,
                p50: percentile(0.50),
                p95: percentile(0.95),
                p99: percentile(0.99)
            )
        }
    }
}

/// The peak resident memory of a set of processes, sampled from /proc.
final class PeakMemory: Sendable {
    private let pids: [Int32]
    private let peak = Mutex(0)

    init(pids: [Int32]) { self.pids = pids }

    /// The largest VmRSS (kB) any of the processes had at a sample.
    var peakKilobytes: Int { peak.withLock { $0 } }

    func sample() {
        for pid in pids {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { continue }
            for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
                let kilobytes =
                    Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
                peak.withLock { $0 = max($0, kilobytes) }
            }
        }
    }
}

/// Job bodies for the benchmark: valid, varied, reproducible.
struct JobBodyGenerator {
    let kind: BenchE2E.Kind
    private var random = SplitMix64(seed: 0x5EED)
    /// Jobs come from many users, as in production (one user's jobs contend for their row).
    private let users = (0..<1000).map { _ in UUID().uuidString.lowercased() }
    private var sequence = 0
    /// For the billing kinds: (user, profile) pairs seeded with credits; job i asks for report
    /// i % 10 (area × language) of pair i / 10, so every job is a different report.
    var reportRequesters: [(user: String, profile: String)] = []

    init(kind: BenchE2E.Kind) { self.kind = kind }

    private static let places: [(String, Double, Double, String)] = [
        ("Europe/Kyiv", 50.4501, 30.5234, "Kyiv, Ukraine"), ("Europe/London", 51.5072, -0.1276, "London, UK"),
        ("America/New_York", 40.7128, -74.0060, "New York, USA"),
        ("Asia/Kathmandu", 27.7172, 85.3240, "Kathmandu, Nepal"),
        ("Australia/Sydney", -33.8688, 151.2093, "Sydney, Australia"),
        ("America/Sao_Paulo", -23.5505, -46.6333, "São Paulo, Brazil"),
        ("Asia/Tokyo", 35.6762, 139.6503, "Tokyo, Japan"), ("Africa/Nairobi", -1.2921, 36.8219, "Nairobi, Kenya"),
    ]

    mutating func body(jobID: JobID) -> Data {
        sequence += 1
        switch kind {
        case .sample:
            return Data(#"{"jobId":"\#(jobID)","note":"bench \#(sequence)"}"#.utf8)
        case .consume, .consumeHot, .report:
            let index = sequence - 1
            let pair = reportRequesters[(index / 10) % max(reportRequesters.count, 1)]
            let area = ReportArea.allCases[index % 5]
            let language = ReportLanguage.allCases[(index / 5) % 2]
            return Data(
                #"{"jobId":"\#(jobID)","userId":"\#(pair.user)","profileId":"\#(pair.profile)","area":"\#(area.rawValue)","language":"\#(language.rawValue)"}"#
                    .utf8
            )
        case .chart:
            let place = Self.places[Int(random.next() % UInt64(Self.places.count))]
            let year = 1950 + Int(random.next() % 60)
            let month = 1 + Int(random.next() % 12)
            let day = 1 + Int(random.next() % 28)
            // Whole hours at :15 and :45 avoid DST gaps and overlaps in these zones' histories.
            let hour = 6 + Int(random.next() % 12)
            let minute = random.next() % 2 == 0 ? 15 : 45
            let date = String(format: "%04d-%02d-%02d", year, month, day)
            let time = String(format: "%02d:%02d", hour, minute)
            let body: JSONValue = [
                "jobId": .string(jobID.description),
                "userId": .string(users[sequence % users.count]),
                "profile": [
                    "name": .string("Bench \(sequence)"), "birthDate": .string(date), "birthTime": .string(time),
                    "timezone": .string(place.0), "latitude": .number(place.1), "longitude": .number(place.2),
                    "locationName": .string(place.3),
                ],
                "houseSystem": "placidus",
            ]
            return body.jsonData()
        }
    }
}

/// A small deterministic generator (so benchmark inputs are the same every run).
struct SplitMix64 {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
