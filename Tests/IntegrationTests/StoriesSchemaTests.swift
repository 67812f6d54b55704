import Foundation
import Postgres
import Testing

/// The Magical Stories schema (migration 0005) against a real PostgreSQL: the seed's delete
/// rules and the constraints that keep pages, illustration states and achievements sane.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct StoriesSchemaTests {
    let pool: PostgresPool

    init() async throws {
        pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
    }

    struct Seeded {
        var user: UUID
        var child: UUID
        var story: UUID
        var collection: UUID
        var achievement: UUID
    }

    /// A parent, a child, a three-page story in a collection, and an achievement it earned.
    func seed() async throws -> Seeded {
        let seeded = Seeded(user: UUID(), child: UUID(), story: UUID(), collection: UUID(), achievement: UUID())
        try await pool.withTransaction { database in
            try database.execute("INSERT INTO users (id) VALUES ($1)", [seeded.user])
            try database.execute(
                "INSERT INTO stories.child_profiles (id, user_id, name, timezone) VALUES ($1, $2, 'Оля', 'Europe/Kyiv')",
                [seeded.child, seeded.user]
            )
            try database.execute(
                """
                INSERT INTO stories.stories (id, user_id, child_profile_id, title, child_name, age_group, theme,
                    main_character, language, writer, writer_version)
                VALUES ($1, $2, $3, 'The Brave Little Fox', 'Оля', 1, 'courage', 'a fox', 'en', 'built-in', 'test')
                """,
                [seeded.story, seeded.user, seeded.child]
            )
            for page in 1...3 {
                try database.execute(
                    "INSERT INTO stories.pages (id, story_id, page_number, text) VALUES ($1, $2, $3, $4)",
                    [UUID(), seeded.story, page, "Page \(page)."]
                )
            }
            try database.execute(
                """
                INSERT INTO stories.collections (id, user_id, child_profile_id, name, growth_category, target_age_group)
                VALUES ($1, $2, $3, 'Brave hearts', 'confidenceLeadership', 1)
                """,
                [seeded.collection, seeded.user, seeded.child]
            )
            try database.execute(
                "INSERT INTO stories.collection_stories (collection_id, story_id) VALUES ($1, $2)",
                [seeded.collection, seeded.story]
            )
            try database.execute(
                """
                INSERT INTO stories.achievements (id, child_profile_id, rule_key, name, type, earned_at, progress, story_id)
                VALUES ($1, $2, 'first-story', 'First story', 'specialMilestone', now(), 1, $3)
                """,
                [seeded.achievement, seeded.child, seeded.story]
            )
        }
        return seeded
    }

    func count(_ sql: SQL, _ parameters: [any PostgresBindable]) async throws -> Int {
        try await pool.withConnection { try $0.query(sql, parameters).first?.decode(Int.self, "n") ?? -1 }
    }

    /// The SQLSTATE a statement fails with, or nil when it succeeds.
    func failure(_ sql: SQL, _ parameters: [any PostgresBindable]) async -> String? {
        do {
            try await pool.withConnection { _ = try $0.execute(sql, parameters) }
            return nil
        } catch let error as PostgresError {
            return error.sqlState ?? "\(error)"
        } catch {
            return "\(error)"
        }
    }

    @Test func deletingAStoryDeletesItsPagesLeavesItsCollectionsAndUnlinksItsAchievements() async throws {
        let seeded = try await seed()
        #expect(
            try await count("SELECT count(*)::int AS n FROM stories.pages WHERE story_id = $1", [seeded.story]) == 3
        )
        _ = try await pool.withConnection {
            try $0.execute("DELETE FROM stories.stories WHERE id = $1", [seeded.story])
        }

        #expect(
            try await count("SELECT count(*)::int AS n FROM stories.pages WHERE story_id = $1", [seeded.story]) == 0
        )
        #expect(
            try await count(
                "SELECT count(*)::int AS n FROM stories.collection_stories WHERE story_id = $1",
                [seeded.story]
            ) == 0
        )
        #expect(
            try await count("SELECT count(*)::int AS n FROM stories.collections WHERE id = $1", [seeded.collection])
                == 1
        )
        let achievement = try await pool.withConnection { database in
            try database.query(
                "SELECT story_id, earned_at IS NOT NULL AS earned FROM stories.achievements WHERE id = $1",
                [seeded.achievement]
            ).first
        }
        #expect(try achievement?.decode(UUID?.self, "story_id") == nil)
        #expect(try achievement?.decode(Bool.self, "earned") == true)
    }

    @Test func deletingAChildKeepsTheirStoriesButNotTheirAchievements() async throws {
        let seeded = try await seed()
        _ = try await pool.withConnection {
            try $0.execute("DELETE FROM stories.child_profiles WHERE id = $1", [seeded.child])
        }
        #expect(try await count("SELECT count(*)::int AS n FROM stories.stories WHERE id = $1", [seeded.story]) == 1)
        #expect(
            try await count("SELECT count(*)::int AS n FROM stories.achievements WHERE id = $1", [seeded.achievement])
                == 0
        )
    }

    @Test func pagesAndAchievementsRefuseWhatCannotBe() async throws {
        let seeded = try await seed()
        // A page number twice in one story.
        #expect(
            await failure(
                "INSERT INTO stories.pages (id, story_id, page_number, text) VALUES (gen_random_uuid(), $1, 2, 'x')",
                [seeded.story]
            ) == "23505"
        )
        // An illustration state outside the four, and "generated" without a stored image.
        #expect(
            await failure(
                "UPDATE stories.pages SET illustration_status = 'done' WHERE story_id = $1",
                [seeded.story]
            ) == "23514"
        )
        #expect(
            await failure(
                "UPDATE stories.pages SET illustration_status = 'generated' WHERE story_id = $1",
                [seeded.story]
            ) == "23514"
        )
        #expect(
            await failure(
                """
                UPDATE stories.pages SET illustration_status = 'generated', illustration_path = 'stories/p1.svg'
                WHERE story_id = $1 AND page_number = 1
                """,
                [seeded.story]
            ) == nil
        )
        // An age group outside 0…2.
        #expect(
            await failure("UPDATE stories.stories SET age_group = 3 WHERE id = $1", [seeded.story]) == "23514"
        )
        // The same achievement rule twice for one child: awarded once.
        #expect(
            await failure(
                """
                INSERT INTO stories.achievements (id, child_profile_id, rule_key, name, type)
                VALUES (gen_random_uuid(), $1, 'first-story', 'First story', 'specialMilestone')
                """,
                [seeded.child]
            ) == "23505"
        )
    }
}
