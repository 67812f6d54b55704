import AMQP
import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import LLMFake
import Postgres
import Schema
import UUIDText
import WorkerRuntime

struct BenchE2E: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "e2e",
        abstract: "Jobs per second from publish to committed result, through real workers, broker and database.",
        discussion: """
            For each worker count in --workers, starts that many worker processes (the \
            binaries beside astro-bench), publishes --count jobs with confirms, and times \
            each job from its publish to the event its worker's transaction committed \
            (chart.calculated, sample.done, …). Prints the throughput, p50/p95/p99 \
            latency, and the workers' peak resident memory, with a progress bar on \
            standard error while it runs. Needs PostgreSQL and RabbitMQ running; it \
            applies the schema migrations itself.

            --type report is the paid journey: report.request through one billing-worker \
            (spends a seeded credit) and --workers report-workers (write and store the \
            report), timed to report.completed. With --llm-delay the report-workers write \
            through a local fake OpenAI-compatible endpoint that answers after that many \
            seconds; their LLM concurrency is --prefetch.

            Examples:
              astro-bench e2e --type chart --count 20000 --workers 1 --workers 2
              astro-bench e2e --type sample --count 5000
              astro-bench e2e --type report --count 2000 --workers 1
              astro-bench e2e --type report --count 640 --workers 1 --prefetch 32 \\
                  --llm-delay 1.5
              astro-bench e2e --mix chart=80,report=20 --count 20000 \\
                  --workers 1 --workers 2 --workers 4
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
        // A URL that does not parse is a usage error before anything starts.
        _ = try connection.amqpConfiguration()
        _ = try connection.databaseConfiguration()
        if let mix {
            try await runMix(try BenchMix(parsing: mix))
            return
        }
        let binary = BenchProcesses.sibling(workerBinary)
        for needed in [binary] + (type == .report ? [BenchProcesses.sibling("billing-worker")] : [])
        where !FileManager.default.isExecutableFile(atPath: needed) {
            throw CommandFailure("\(needed) not found beside astro-bench: build it first")
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
            let result = try await measure(workers: workerCount, binary: binary)
            summaries.append(result)
            print(result)
        }
        if summaries.count > 1 {
            print("summary:")
            for line in summaries { print("  " + line) }
        }
    }

    /// One measurement of --type with `workerCount` workers, as the line it prints.
    private func measure(workers workerCount: Int, binary: String) async throws -> String {
        try await connection.withPublisher { publisher in
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

            let environment = workerProcessEnvironment { environment in
                environment["SAMPLE_QUEUE"] = queue
                if type.isBilling, environment["BILLING_ENVIRONMENT"] == nil {
                    environment["BILLING_ENVIRONMENT"] = "Sandbox"
                }
                if let llmFake {
                    environment["LLM_BASE_URL"] = llmFake.baseURL.absoluteString
                    environment["LLM_MODEL"] = "bench-fake"
                    environment["LLM_API_KEY"] = llmFake.apiKey
                }
            }
            let measurement = E2EMeasurement(
                kinds: [.init(routingKey: queue, bodies: generator)],
                kindOfJob: { _ in 0 },
                count: count,
                window: window,
                rate: rate,
                timeout: timeout,
                doneEvents: doneEvents,
                eventQueuePrefix: "bench.e2e.events",
                // --type report: the measured report-workers, then the billing-worker feeding them.
                workerBinaries: Array(repeating: binary, count: workerCount)
                    + (type == .report ? [BenchProcesses.sibling("billing-worker")] : []),
                workerEnvironment: environment,
                requiredConsumers: [(workerQueue, workerCount), (queue, 1)],
                workersDescription: "the \(workerBinary) processes"
            )
            let result = try await measurement.run(publisher: publisher, connection: connection)
            for extra in extraQueues { _ = try? await publisher.purgeQueue(extra) }
            let report = result.reports[0]
            let llmNote = llmFake.map { "  LLM requests in flight at most \($0.maxConcurrentRequests)" } ?? ""
            return String(
                format:
                    "%d worker%@: %7.1f jobs/s  p50 %6.1f ms  p95 %6.1f ms  p99 %6.1f ms  failed %d"
                    + "  worker peak RSS %.1f MB  jobs per commit %.1f%@",
                workerCount,
                workerCount == 1 ? "" : "s",
                report.throughput,
                report.p50 * 1000,
                report.p95 * 1000,
                report.p99 * 1000,
                report.failed,
                Double(result.peakKilobytes) / 1024,
                result.jobsPerCommit,
                llmNote
            )
        }
    }

    /// The workers' environment: the benchmark's (BenchWorkers.environment) with what `adjust`
    /// sets for the job type, then --worker-env, which has the last word.
    func workerProcessEnvironment(_ adjust: (inout [String: String]) -> Void) -> [String: String] {
        var environment = BenchWorkers.environment(connection: connection, prefetch: prefetch)
        adjust(&environment)
        for item in workerEnvironment {
            let parts = item.split(separator: "=", maxSplits: 1)
            environment[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        return environment
    }
}

/// Job bodies for the benchmark: valid, varied, reproducible.
struct JobBodyGenerator {
    let kind: BenchE2E.Kind
    private var random = SplitMix64(seed: 0x5EED)
    /// Jobs come from many users, as in production (one user's jobs contend for their row).
    private let users = (0..<1000).map { _ in UUID().lowercasedText }
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
