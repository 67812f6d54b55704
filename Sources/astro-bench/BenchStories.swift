import AMQP
import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import LLMFake
import Postgres
import Schema
import StoryService
import Synchronization
import UUIDText
import WorkerRuntime

/// `astro-bench stories`: Magical Stories through real story-worker processes, broker and
/// database — stories written per second, then pages illustrated per second.
struct BenchStories: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stories",
        abstract: "Stories written per second and pages illustrated per second, end to end through story-workers.",
        discussion: """
            Starts --workers story-worker processes (the binary beside astro-bench), \
            publishes --count story.generate jobs (built-in writer) and times each from \
            its publish to story.generated; then publishes one story.illustrate per story \
            and times each to story.illustrated, and counts the pages drawn per second. \
            By default the built-in SVG illustrator draws; with --image-delay the workers \
            draw through a local fake OpenAI-compatible images endpoint that answers \
            after that many seconds (its concurrency is the workers' --prefetch).

            Examples:
              astro-bench stories --count 2000 --pages 5
              astro-bench stories --count 64 --pages 5 --prefetch 32 --image-delay 3
            """
    )

    @Option(parsing: .unconditional, help: "Stories (and illustrate jobs) per measurement.") var count = 2000
    @Option(parsing: .unconditional, help: "Pages per story, 3…9.") var pages = 5
    @Option(parsing: .unconditional, help: "story-worker processes.") var workers = 1
    @Option(parsing: .unconditional, help: "Worker PREFETCH (jobs in flight per worker).") var prefetch = 32
    @Option(parsing: .unconditional, help: "Jobs per confirmed publish batch.") var window = 200
    @Option(parsing: .unconditional, help: "Give up after this many seconds per phase.") var timeout = 600
    @Option(
        name: .customLong("image-delay"),
        parsing: .unconditional,
        help: "Illustrate through a local fake images endpoint answering after this many seconds."
    )
    var imageDelay: Double?
    @Option(
        help:
            "Where the workers store the pictures (default: a fresh folder under the temporary directory, removed after)."
    )
    var storageRoot: String?
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard count > 0, window > 0, timeout > 0, (1...16).contains(workers), prefetch > 0 else {
            throw ValidationError("--count, --window, --timeout, --prefetch must be positive; --workers 1…16")
        }
        guard (3...9).contains(pages) else { throw ValidationError("--pages must be 3…9") }
        if let imageDelay, !(0...60).contains(imageDelay) {
            throw ValidationError("--image-delay must be 0…60 seconds")
        }
    }

    func run() async throws {
        let binary = BenchProcesses.sibling("story-worker")
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw CommandFailure("\(binary) not found beside astro-bench: build it first")
        }
        let logger = connection.logger
        let amqp = try connection.amqpConfiguration()
        try await connection.withPool { pool in
            _ = try await Migrator(migrations: try AstroSchema.migrations(), logger: logger).migrate(pool: pool)
        }
        let publisher = AMQPPublisher(configuration: amqp, logger: logger)
        try await publisher.connect()
        let retry = RetryPolicy(maxAttempts: 5, initialDelay: .seconds(1), maxDelay: .seconds(60))
        let queues = [JobType.storyGenerate, .storyIllustrate, .storyRead].map(\.rawValue)
        try await publisher.declare(WorkerTopology.topology(queues: queues, retry: retry))
        for queue in queues { _ = try await publisher.purgeQueue(queue) }

        var imageFake: OpenAIImagesFake?
        if let imageDelay { imageFake = try OpenAIImagesFake(defaultDelay: .milliseconds(Int(imageDelay * 1000))) }
        defer { imageFake?.stop() }
        let storage = URL(fileURLWithPath: storageRoot ?? NSTemporaryDirectory(), isDirectory: true)
            .appendingPathComponent("bench-stories-\(UUID())")
        defer { try? FileManager.default.removeItem(at: storage) }

        var environment = BenchWorkers.environment(connection: connection, prefetch: prefetch)
        environment["STORY_STORAGE_ROOT"] = storage.path
        if let imageFake {
            environment["IMAGE_BASE_URL"] = imageFake.baseURL.absoluteString
            environment["IMAGE_MODEL"] = "bench-fake-images"
            environment["IMAGE_API_KEY"] = imageFake.apiKey
            environment["IMAGE_TIMEOUT_SECONDS"] = String(Int((imageDelay ?? 0) + 60))
        }
        let processes = try BenchWorkers.start(Array(repeating: binary, count: workers), environment: environment)
        defer {
            for process in processes where process.isRunning { process.terminate() }
        }
        let started = ContinuousClock.now
        while try await publisher.queueState(JobType.storyIllustrate.rawValue).consumerCount < workers {
            guard ContinuousClock.now - started < .seconds(60) else {
                throw CommandFailure("the story-worker processes did not start consuming within 60 s")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        let peakMemory = PeakMemory(pids: processes.map(\.processIdentifier))
        let sampler = Task {
            while !Task.isCancelled {
                peakMemory.sample()
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        defer { sampler.cancel() }

        print(
            "bench stories: \(count) stories of \(pages) pages, \(workers) story-worker\(workers == 1 ? "" : "s"), "
                + "prefetch \(prefetch), illustrator "
                + (imageDelay.map { "fake images endpoint answering after \($0) s" } ?? "built-in SVG")
        )
        // Phase 1: story.generate. 100 parents with 10 children each, every story different.
        let generateRequests = (0..<count).map { index in
            StoryGenerateRequest(
                jobID: .random(),
                userID: UserID(Self.benchUsers[index % Self.benchUsers.count]),
                childName: "Bench child \(index % 10)",
                ageGroup: index % 3,
                theme: Self.themes[index % Self.themes.count],
                mainCharacter: "Hero \(index)",
                language: index % 2 == 0 ? .en : .uk,
                pageCount: pages
            )
        }
        let written = try await phase(
            JobType.storyGenerate.rawValue,
            jobs: try generateRequests.map { ($0.jobID, try JSONCoding.encoder.encode($0)) },
            done: [.storyGenerated, .storyFailed],
            publisher: publisher,
            amqp: amqp
        )
        print(written.line(unit: "stories"))

        // Phase 2: story.illustrate, one job per story, every page.
        let illustrateRequests = generateRequests.map {
            StoryIllustrateRequest(jobID: .random(), userID: $0.userID, storyID: $0.storyID)
        }
        let illustrated = try await phase(
            JobType.storyIllustrate.rawValue,
            jobs: try illustrateRequests.map { ($0.jobID, try JSONCoding.encoder.encode($0)) },
            done: [.storyIllustrated, .storyFailed],
            publisher: publisher,
            amqp: amqp
        )
        print(illustrated.line(unit: "stories"))
        print(
            String(
                format: "  pages illustrated: %d in %.2f s = %.1f pages/s%@",
                illustrated.pages,
                illustrated.seconds,
                Double(illustrated.pages) / max(illustrated.seconds, 1e-9),
                imageFake.map { "; image requests in flight at most \($0.maxConcurrentRequests)" } ?? ""
            )
        )
        print(String(format: "  story-worker peak RSS %.1f MB", Double(peakMemory.peakKilobytes) / 1024))
        BenchWorkers.stop(processes)
        await publisher.close()
    }

    static let themes = [
        "courage", "friendship", "kindness", "curiosity", "honesty", "perseverance", "sharing", "feelings",
    ]
    static let benchUsers = (0..<100).map { _ in UUID() }

    struct PhaseResult {
        var name: String
        var report: BenchTimes.Report
        var seconds: Double
        var pages: Int

        func line(unit: String) -> String {
            String(
                format: "%@: %7.1f %@/s  p50 %6.1f ms  p95 %6.1f ms  p99 %6.1f ms  failed %d",
                name,
                report.throughput,
                unit,
                report.p50 * 1000,
                report.p95 * 1000,
                report.p99 * 1000,
                report.failed
            )
        }
    }

    /// Publishes `jobs` on `queue` and waits for each one's done event; counts the pages the
    /// events report drawn.
    private func phase(
        _ queue: String,
        jobs: [(JobID, Data)],
        done: [EventType],
        publisher: AMQPPublisher,
        amqp: AMQPConfiguration
    ) async throws -> PhaseResult {
        let eventQueue = "bench.stories.events.\(UUID().lowercasedText.prefix(8))"
        try await publisher.declare(
            Topology(
                queues: [QueueSpec(name: eventQueue, durable: false, exclusive: false, autoDelete: false)],
                bindings: done.map {
                    BindingSpec(queue: eventQueue, exchange: BrokerNames.eventsExchange, routingKey: $0.rawValue)
                }
            )
        )
        let times = BenchTimes(count: jobs.count)
        let pagesDrawn = Mutex(0)
        let consumer = AMQPConsumer(
            configuration: amqp,
            topology: .empty,
            queues: [eventQueue],
            prefetch: 500,
            logger: connection.logger
        )
        try await consumer.start()
        let total = jobs.count
        let collector = Task {
            for await delivery in consumer.deliveries {
                let now = ContinuousClock.now
                try? await consumer.ack(delivery)
                guard let object = try? JSONValue.parse(delivery.body),
                    let id = object["jobId"]?.stringValue, let jobID = JobID(id)
                else { continue }
                let drawn = object["generatedPages"]?.arrayValue?.count ?? 0
                pagesDrawn.withLock { $0 += drawn }
                times.finish(jobID, at: now, failed: object["error"] != nil)
                if times.finishedCount >= total { break }
            }
        }
        let progress = Task {
            while !Task.isCancelled {
                BenchProgress.draw(done: times.finishedCount, total: total, since: times.firstPublish)
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        var published = 0
        while published < total {
            let batch = jobs[published..<min(total, published + window)]
            let messages = batch.map { job in
                var properties = MessageProperties(contentType: "application/json")
                properties.messageID = job.0.description
                properties.persistent = true
                return OutgoingMessage(
                    exchange: BrokerNames.jobsExchange,
                    routingKey: queue,
                    body: job.1,
                    properties: properties,
                    mandatory: true
                )
            }
            times.published(batch.map(\.0), at: ContinuousClock.now)
            try await publisher.publish(Array(messages), timeout: .seconds(60))
            published += batch.count
        }
        let deadline = ContinuousClock.now + .seconds(timeout)
        while times.finishedCount < total, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        progress.cancel()
        BenchProgress.draw(done: times.finishedCount, total: total, since: times.firstPublish)
        FileHandle.standardError.write(Data("\n".utf8))
        await consumer.close()
        collector.cancel()
        try? await publisher.deleteQueue(eventQueue)
        let report = times.report()
        guard report.finished == total else {
            throw CommandFailure("\(queue): only \(report.finished) of \(total) jobs finished within \(timeout) s")
        }
        let seconds = report.throughput > 0 ? Double(report.finished) / report.throughput : 0
        return PhaseResult(name: queue, report: report, seconds: seconds, pages: pagesDrawn.withLock { $0 })
    }
}
