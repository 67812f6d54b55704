import AMQP
import AstroDomain
import Foundation
import Postgres
import Testing
import WorkerRuntime

@testable import Maintenance

/// Children's data is kept no longer than needed (issue 19, part 4): the maintenance task
/// deletes a child's profile and stories nobody opened for `CHILD_DATA_RETENTION`, with their
/// pages, readings, achievements and illustration files, and counts what it deleted; what was
/// opened within the period stays. Part of `RetentionTests` (serialized): a maintenance run of
/// one test deletes what another seeded.
extension RetentionTests {
    static let day: TimeInterval = 86_400

    /// A child last opened `age` seconds ago, with one reading and one achievement then.
    func seedChild(user: UUID, name: String, age: TimeInterval) async throws -> UUID {
        let child = UUID()
        try await owner.withConnection { database in
            _ = try database.execute(
                """
                INSERT INTO stories.child_profiles (id, user_id, name, date_of_birth, created_at, last_opened_at)
                VALUES ($1, $2, $3, '2019-05-04', now() - make_interval(secs => $4), now() - make_interval(secs => $4))
                """,
                [child, user, name, age]
            )
            _ = try database.execute(
                """
                INSERT INTO stories.achievements (id, child_profile_id, rule_key, name, type)
                VALUES (gen_random_uuid(), $1, 'stories-completed-1', 'First story', 'storiesCompleted')
                """,
                [child]
            )
        }
        return child
    }

    /// A story of `child` with two pages, last opened `age` seconds ago.
    func seedStory(user: UUID, child: UUID?, childName: String, age: TimeInterval) async throws -> UUID {
        let story = UUID()
        try await owner.withConnection { database in
            _ = try database.execute(
                """
                INSERT INTO stories.stories (id, user_id, child_profile_id, title, child_name, age_group, theme,
                    main_character, language, writer, writer_version, created_at, last_opened_at)
                VALUES ($1, $2, $3, 'A title', $4, 1, 'space', 'fox', 'en', 'built-in', '1',
                    now() - make_interval(secs => $5), now() - make_interval(secs => $5))
                """,
                [story, user, child, childName, age]
            )
            _ = try database.execute(
                """
                INSERT INTO stories.pages (id, story_id, page_number, text)
                SELECT gen_random_uuid(), $1, n, 'Once upon a time ' || $2 FROM generate_series(1, 2) AS n
                """,
                [story, childName]
            )
        }
        return story
    }

    @Test func whatNobodyOpenedForThePeriodIsDeletedWithItsFilesAndCounted() async throws {
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("child-retention-\(UUID())")
        try FileManager.default.createDirectory(at: storage, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: storage) }
        let user = UUID()
        try await owner.withConnection { _ = try $0.execute("INSERT INTO users (id) VALUES ($1)", [user]) }
        let marker = "Zorya\(Int.random(in: 10_000...99_999))"
        // Not opened for 400 days: the child, their story, its pages, readings, achievement, files.
        let oldChild = try await seedChild(user: user, name: marker, age: 400 * Self.day)
        let oldStory = try await seedStory(user: user, child: oldChild, childName: marker, age: 400 * Self.day)
        try await owner.withConnection { database in
            _ = try database.execute(
                """
                INSERT INTO stories.story_reads (story_id, child_profile_id, read_at, job_id)
                VALUES ($1, $2, now() - interval '400 days', gen_random_uuid())
                """,
                [oldStory, oldChild]
            )
            // The reading above opened the child (trigger): set it back to when it happened.
            _ = try database.execute(
                "UPDATE stories.child_profiles SET last_opened_at = now() - interval '400 days' WHERE id = $1",
                [oldChild]
            )
        }
        let folder = storage.appendingPathComponent(oldStory.uuidString.lowercased(), isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data("png".utf8).write(to: folder.appendingPathComponent("1.png"))
        // Created 400 days ago but read yesterday (story.read sets last_read_at): kept.
        let readChild = try await seedChild(user: user, name: "Read\(marker)", age: 400 * Self.day)
        let readStory = try await seedStory(user: user, child: readChild, childName: "Read", age: 400 * Self.day)
        try await owner.withConnection { database in
            _ = try database.execute(
                "UPDATE stories.stories SET last_read_at = now() - interval '1 day' WHERE id = $1",
                [readStory]
            )
        }
        // A child opened 10 days ago with an old story: the story goes, the child stays.
        let recentChild = try await seedChild(user: user, name: "Recent\(marker)", age: 10 * Self.day)
        let staleStory = try await seedStory(user: user, child: recentChild, childName: "Recent", age: 500 * Self.day)
        let pagesBefore = try await count("SELECT count(*)::int AS n FROM stories.pages")
        let totalsBefore = try await count(
            """
            SELECT coalesce(sum(total), 0)::int AS n FROM maintenance_totals
            WHERE counter = 'deleted_rows' AND subject = 'stories.stories'
            """
        )

        let pool = PostgresPool(
            configuration: try PostgresConfiguration(
                url: try await RuntimeTestEnvironment.databaseURL(as: .maintenance)
            ),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        var configuration = RetentionConfiguration.defaults
        configuration.batchSize = 10
        configuration.childDataRetention = .seconds(365 * 86_400)
        let dry = await MaintenanceRun(
            pool: pool,
            amqp: nil,
            configuration: configuration,
            logger: RuntimeTestEnvironment.logger
        )
        .run(dryRun: true)
        #expect((dry.retention.deleted[.stories] ?? 0) >= 2)
        #expect(try await count("SELECT count(*)::int AS n FROM stories.stories WHERE id = $1", [oldStory]) == 1)
        let summary = await MaintenanceRun(
            pool: pool,
            amqp: nil,
            configuration: configuration,
            logger: RuntimeTestEnvironment.logger
        ).run(dryRun: false)
        await pool.close()

        #expect(summary.outcome == .completed, "\(summary.error ?? "")")
        func exists(_ table: String, _ id: UUID) async throws -> Bool {
            try await count(SQL(unsafeSQL: "SELECT count(*)::int AS n FROM \(table) WHERE id = $1"), [id]) == 1
        }
        #expect(try await !exists("stories.stories", oldStory))
        #expect(try await !exists("stories.stories", staleStory))
        #expect(try await !exists("stories.child_profiles", oldChild))
        #expect(try await exists("stories.stories", readStory))
        #expect(try await exists("stories.child_profiles", readChild))
        #expect(try await exists("stories.child_profiles", recentChild))
        #expect(try await count("SELECT count(*)::int AS n FROM stories.pages") == pagesBefore - 4)
        #expect(
            try await count(
                "SELECT count(*)::int AS n FROM stories.story_reads WHERE child_profile_id = $1",
                [oldChild]
            )
                == 0
        )
        #expect(
            try await count(
                "SELECT count(*)::int AS n FROM stories.achievements WHERE child_profile_id = $1",
                [oldChild]
            )
                == 0
        )
        // No personal value of the old child is left in the stories schema.
        #expect(
            try await count(
                "SELECT count(*)::int AS n FROM stories.child_profiles WHERE name = $1",
                [marker]
            ) == 0
        )
        #expect(
            try await count(
                "SELECT count(*)::int AS n FROM stories.pages WHERE text LIKE '%' || $1 || '%'",
                [marker]
            ) == 0
        )
        // Counted: in the run, in its record and in the exported totals.
        #expect(summary.retention.deleted[.stories] == 2)
        #expect(summary.retention.deleted[.storyPages] == 4)
        #expect(summary.retention.deleted[.childProfiles] == 1)
        #expect(
            try await count(
                """
                SELECT coalesce(sum(total), 0)::int AS n FROM maintenance_totals
                WHERE counter = 'deleted_rows' AND subject = 'stories.stories'
                """
            ) == totalsBefore + 2
        )

        // The files: a story.erase-illustrations job queued as the billing-worker's, naming both
        // stories; the story-worker it reaches removes the folder.
        let bodies = try await owner.withConnection { database in
            try database.query(
                """
                SELECT convert_from(body, 'UTF8') AS body FROM outbox
                WHERE routing_key = 'story.erase-illustrations' AND producer = 'astro_billing_worker'
                    AND convert_from(body, 'UTF8') LIKE '%' || $1 || '%'
                """,
                [user.uuidString.lowercased()]
            ).map { try $0.decode(String.self, "body") }
        }
        try #require(bodies.count == 1, "\(bodies)")
        let request = try JSONCoding.decoder.decode(EraseIllustrationsRequest.self, from: Data(bodies[0].utf8))
        #expect(Set(request.storyIDs.map(\.uuid)) == [oldStory, staleStory])
        #expect(request.userID.uuid == user)

        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [.storyEraseIllustrations])
        let worker = try await UserDeletionTests.startStoryWorker(storage: storage)
        defer { worker.stopWaiting() }
        try await ReportJourneyTests.publishJob(.storyEraseIllustrations, request, with: publisher)
        // Published here instead: no other test's relay is to find the row.
        try await owner.withConnection { database in
            _ = try database.execute(
                "DELETE FROM outbox WHERE job_id = $1 AND routing_key = 'story.erase-illustrations'",
                [request.jobID.uuid]
            )
        }
        try await RuntimeTestEnvironment.eventually("the illustrations are erased", timeout: .seconds(30)) {
            !FileManager.default.fileExists(atPath: folder.path)
        }
        await publisher.close()
    }

    @Test func theDatabaseRefusesACutoffNearerThanThirtyDays() async throws {
        let pool = PostgresPool(
            configuration: try PostgresConfiguration(
                url: try await RuntimeTestEnvironment.databaseURL(as: .maintenance)
            ),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        var state: String?
        do {
            _ = try await pool.withConnection { database in
                try database.query("SELECT * FROM stories.expire_unopened(now() - interval '1 day', 10)")
            }
        } catch let error as PostgresError {
            state = error.sqlState
        }
        #expect(state == "22023")
        // And it still cannot delete children's rows itself.
        state = nil
        do {
            _ = try await pool.withConnection { try $0.execute("DELETE FROM stories.child_profiles WHERE false") }
        } catch let error as PostgresError {
            state = error.sqlState
        }
        #expect(state == "42501")
        await pool.close()
    }
}
