import AMQP
import AstroDomain
import Foundation
import LLMFake
import Postgres
import Schema
import TestProcesses
import Testing
import WorkerRuntime

/// Magical Stories end to end: a story-worker process on its own database role, the real broker
/// and database, pictures from a local fake of an OpenAI-compatible images API, and astroctl as a
/// user runs it — generate, illustrate (one page refused, then retried on its own), read, show,
/// achievements.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct StoryWorkerProcessTests {
    let pool: PostgresPool

    init() async throws {
        pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 2),
            logger: RuntimeTestEnvironment.logger
        )
    }

    /// A story-worker process on the emptied story queues, drawing through `images` (or the
    /// built-in illustrator), storing pictures under `storage`.
    func startWorker(images: OpenAIImagesFake?, storage: URL) async throws -> (ChildProcess, AMQPPublisher) {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(
            purging: [.storyGenerate, .storyIllustrate, .storyRead]
        )
        var environment = [
            "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.storyWorker),
            // As deployed: its own least-privilege role.
            "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .storyWorker),
            "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "warning", "MIGRATE_ON_START": "false",
            "STORY_STORAGE_ROOT": storage.path,
        ]
        if let images {
            environment["IMAGE_BASE_URL"] = images.baseURL.absoluteString
            environment["IMAGE_MODEL"] = "fake-image-model"
            environment["IMAGE_API_KEY"] = images.apiKey
        }
        let process = try await ChildProcess.product("story-worker", environment: environment, label: "story-worker")
        do {
            try await RuntimeTestEnvironment.eventually("the story-worker consumes", timeout: .seconds(60)) {
                try await publisher.queueState(JobType.storyRead.rawValue).consumerCount > 0
            }
        } catch {
            await process.stop()
            await publisher.close()
            throw TestFailure("\(error)\n\(process.tail())")
        }
        return (process, publisher)
    }

    func astroctl(_ arguments: [String]) async throws -> ProcessRunner.Result {
        let database = try await RuntimeTestEnvironment.database()
        return try await ProcessRunner.run(
            ProcessRunner.productPath("astroctl"),
            arguments,
            environment: [
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.client),
                "DATABASE_URL":
                    "postgres://\(database.user):\(database.password ?? "")@\(database.host):\(database.port)/\(database.database)",
            ]
        )
    }

    func pageStates(_ story: String) async throws -> [(status: String, attempts: Int, path: String?)] {
        try await pool.withConnection { database in
            try database.query(
                """
                SELECT illustration_status, illustration_attempts, illustration_path FROM stories.pages
                WHERE story_id = $1::uuid ORDER BY page_number
                """,
                [story]
            ).map { row in
                (
                    try row.decode(String.self, "illustration_status"),
                    try row.decode(Int.self, "illustration_attempts"),
                    try row.decode(String?.self, "illustration_path")
                )
            }
        }
    }

    @Test func theJourneyThroughTheWorkerWithAFailedPageRetriedOnItsOwn() async throws {
        let images = try OpenAIImagesFake()
        defer { images.stop() }
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("story-journey-\(UUID())")
        defer { try? FileManager.default.removeItem(at: storage) }
        let (worker, publisher) = try await startWorker(images: images, storage: storage)
        defer { worker.stopWaiting() }
        let user = UUID().uuidString.lowercased()

        // 1. A three-page story, waited for and printed.
        let generated = try await astroctl([
            "stories", "generate", "--user", user, "--child", "Mia", "--tz", "Europe/Kyiv", "--hero", "Felix the Fox",
            "--theme", "courage", "--age", "0", "--pages", "3", "--wait", "--timeout", "60",
        ])
        #expect(generated.status == 0, "\(generated.error)")
        #expect(generated.output.contains("Felix the Fox"))
        #expect(generated.output.contains("[3] illustration: notStarted"))
        let storyLine = try #require(generated.output.split(separator: "\n").first { $0.hasPrefix("story ") })
        let story = String(storyLine.split(separator: " ")[1])

        // 2. Illustrated: page 2 is refused by the images API's safety system; 1 and 3 are drawn,
        //    page 3 with page 1's picture as its reference (the latest one drawn before it). Page 1
        //    has no reference (a generation); 2 and 3 are edits of the picture before them.
        images.enqueue(.success())
        images.enqueue(.contentPolicy)
        let illustrated = try await astroctl(["stories", "illustrate", story, "--wait", "--timeout", "60"])
        #expect(illustrated.status == 1)
        #expect(illustrated.error.contains("pages-not-illustrated") && illustrated.error.contains("page 2"))
        #expect(illustrated.output.contains("[2] illustration: failed"))
        var states = try await pageStates(story)
        #expect(states.map(\.status) == ["generated", "failed", "generated"])
        #expect(images.generationsCount == 1 && images.editsCount == 2)
        let firstPicture = try Data(contentsOf: storage.appendingPathComponent(try #require(states[0].path)))
        #expect(images.lastEditImage == firstPicture)
        let thirdPicture = try Data(contentsOf: storage.appendingPathComponent(try #require(states[2].path)))

        // 3. Page 2 alone again: drawn with page 1 as reference; pages 1 and 3 untouched.
        let retried = try await astroctl(["stories", "illustrate", story, "--page", "2", "--wait", "--timeout", "60"])
        #expect(retried.status == 0, "\(retried.error)")
        states = try await pageStates(story)
        #expect(states.map(\.status) == ["generated", "generated", "generated"])
        #expect(states.map(\.attempts) == [1, 2, 1])
        #expect(images.editsCount == 3 && images.lastEditImage == firstPicture)
        #expect(try Data(contentsOf: storage.appendingPathComponent(try #require(states[2].path))) == thirdPicture)

        // 4. Read: the count moves and the first achievement is earned, once.
        let read = try await astroctl(["stories", "read", story, "--timeout", "30"])
        #expect(read.status == 0, "\(read.error)")
        #expect(read.output.contains("read count 1") && read.output.contains("earned: First Story"))
        let shown = try await astroctl(["stories", "show", story, "--status-only"])
        #expect(shown.status == 0, "\(shown.error)")
        #expect(shown.output.contains("read 1 times") && !shown.output.contains("failed"))
        let child = try #require(
            try await pool.withConnection { database in
                try database.query("SELECT child_profile_id FROM stories.stories WHERE id = $1::uuid", [story]).first?
                    .decode(UUID.self, "child_profile_id")
            }
        )
        let achievements = try await astroctl(["stories", "achievements", "--child", child.uuidString.lowercased()])
        #expect(achievements.status == 0, "\(achievements.error)")
        #expect(achievements.output.contains("★ First Story"))
        #expect(achievements.output.contains("Mia (Europe/Kyiv)"))
        await worker.stop()
        await publisher.close()
    }

    @Test func anUnknownThemeFailsTheJobWithItsReason() async throws {
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("story-journey-\(UUID())")
        defer { try? FileManager.default.removeItem(at: storage) }
        let (worker, publisher) = try await startWorker(images: nil, storage: storage)
        defer { worker.stopWaiting() }
        let result = try await astroctl([
            "stories", "generate", "--user", UUID().uuidString, "--child", "Mia", "--hero", "Felix", "--theme",
            "pirates", "--age", "1", "--wait", "--timeout", "30",
        ])
        #expect(result.status == 1)
        #expect(result.error.contains("unknown-theme"))
        // What the user asked is refused: the job is failed, and nothing waits for an operator.
        let status = try await pool.withConnection { database in
            try database.query(
                "SELECT status FROM jobs WHERE kind = 'story.generate' AND error->>'code' = 'unknown-theme'"
            ).map { try $0.decode(String.self, "status") }
        }
        #expect(status == ["failed"])
        #expect(
            try await publisher.queueState(BrokerNames.deadLetterQueue(of: JobType.storyGenerate.rawValue))
                .messageCount == 0
        )
        await worker.stop()
        await publisher.close()
    }
}
