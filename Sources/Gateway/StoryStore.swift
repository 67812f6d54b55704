import AstroDomain
import Foundation
import Postgres

/// What the gateway reads of Magical Stories (schema `stories`, written only by the
/// story-worker): a caller's children, stories, pages and achievements. Every query is scoped to
/// the caller's user id, so another user's ids find nothing (the routes answer 404). The
/// gateway's role may read only the columns these queries name (migration 0018).
struct StoryStore: Sendable {
    let pool: PostgresPool

    /// A position in a list ordered newest first: the last item's creation time (microseconds
    /// since 1970, as PostgreSQL keeps it) and id.
    struct Cursor: Sendable, Hashable {
        var createdAtMicros: Int64
        var id: UUID

        init(createdAtMicros: Int64, id: UUID) {
            self.createdAtMicros = createdAtMicros
            self.id = id
        }
    }

    /// One page of a list and where the next one starts (nil at the end).
    struct Page<Item: Sendable>: Sendable {
        var items: [Item]
        var next: Cursor?
    }

    struct Child: Sendable {
        var id: UUID
        var name: String
        var timeZone: String
        var createdAt: Date
    }

    struct StorySummary: Sendable {
        var id: UUID
        var childProfileID: UUID?
        var title: String
        var childName: String
        var ageGroup: Int
        var theme: String
        var mainCharacter: String
        var language: String
        var readCount: Int
        var lastReadAt: Date?
        var isFavorite: Bool
        var createdAt: Date
    }

    struct StoryPage: Sendable {
        var number: Int
        var text: String
        var illustrationStatus: String
    }

    struct Achievement: Sendable {
        var id: UUID
        var ruleKey: String
        var name: String
        var description: String
        var type: String
        var icon: String
        var progress: Double
        var earnedAt: Date?
        var storyID: UUID?
    }

    /// The caller's children, oldest first.
    func children(user: UserID, after cursor: Cursor?, limit: Int) async throws -> Page<Child> {
        try await pool.withConnection { database -> Page<Child> in
            let rows = try database.query(
                """
                SELECT id, name, timezone, created_at,
                       (extract(epoch FROM created_at) * 1000000)::bigint AS created_micros
                FROM stories.child_profiles
                WHERE user_id = $1 AND ($2::bigint IS NULL
                    OR (created_at, id) > ('epoch'::timestamptz + $2::bigint * interval '1 microsecond', $3::uuid))
                ORDER BY created_at, id LIMIT $4
                """,
                [user.uuid, cursor?.createdAtMicros, cursor?.id, limit + 1]
            )
            var items: [(Child, Cursor)] = []
            for row in rows {
                let child = Child(
                    id: try row.decode(UUID.self, "id"),
                    name: try row.decode(String.self, "name"),
                    timeZone: try row.decode(String.self, "timezone"),
                    createdAt: try row.decode(Date.self, "created_at")
                )
                items.append(
                    (child, Cursor(createdAtMicros: try row.decode(Int64.self, "created_micros"), id: child.id))
                )
            }
            return Self.page(items, limit: limit)
        }
    }

    /// Whether `child` is one of the caller's children.
    func ownsChild(_ child: UUID, user: UserID) async throws -> Bool {
        try await pool.withConnection { database in
            try !database.query(
                "SELECT 1 FROM stories.child_profiles WHERE id = $1 AND user_id = $2",
                [child, user.uuid]
            ).isEmpty
        }
    }

    /// The caller's stories (of one child when `child` is given), newest first.
    func stories(user: UserID, child: UUID?, after cursor: Cursor?, limit: Int) async throws -> Page<StorySummary> {
        try await pool.withConnection { database -> Page<StorySummary> in
            let rows = try database.query(
                """
                SELECT id, child_profile_id, title, child_name, age_group, theme, main_character, language,
                    read_count, last_read_at, is_favorite, created_at,
                    (extract(epoch FROM created_at) * 1000000)::bigint AS created_micros
                FROM stories.stories
                WHERE user_id = $1 AND ($2::uuid IS NULL OR child_profile_id = $2::uuid)
                    AND ($3::bigint IS NULL
                        OR (created_at, id) < ('epoch'::timestamptz + $3::bigint * interval '1 microsecond', $4::uuid))
                ORDER BY created_at DESC, id DESC LIMIT $5
                """,
                [user.uuid, child, cursor?.createdAtMicros, cursor?.id, limit + 1]
            )
            var items: [(StorySummary, Cursor)] = []
            for row in rows {
                let story = try Self.summary(row)
                items.append(
                    (story, Cursor(createdAtMicros: try row.decode(Int64.self, "created_micros"), id: story.id))
                )
            }
            return Self.page(items, limit: limit)
        }
    }

    /// The caller's story with its pages (in page order, at most `maxPages`), or nil.
    func story(_ id: UUID, user: UserID, maxPages: Int) async throws -> (StorySummary, [StoryPage])? {
        try await pool.withConnection { database -> (StorySummary, [StoryPage])? in
            guard
                let row = try database.query(
                    """
                    SELECT id, child_profile_id, title, child_name, age_group, theme, main_character, language,
                        read_count, last_read_at, is_favorite, created_at
                    FROM stories.stories WHERE id = $1 AND user_id = $2
                    """,
                    [id, user.uuid]
                ).first
            else { return nil }
            try Self.markOpened(story: id, child: try row.decode(UUID?.self, "child_profile_id"), in: database)
            let pages = try database.query(
                """
                SELECT page_number, text, illustration_status FROM stories.pages
                WHERE story_id = $1 ORDER BY page_number LIMIT $2
                """,
                [id, maxPages]
            ).map { page throws(PostgresError) in
                StoryPage(
                    number: try page.decode(Int.self, "page_number"),
                    text: try page.decode(String.self, "text"),
                    illustrationStatus: try page.decode(String.self, "illustration_status")
                )
            }
            return (try Self.summary(row), pages)
        }
    }

    /// The caller's story's child and page numbers, for checking a job before it is published;
    /// nil when the story is not the caller's.
    func storyFacts(_ id: UUID, user: UserID) async throws -> (child: UUID?, pages: Set<Int>)? {
        try await pool.withConnection { database -> (child: UUID?, pages: Set<Int>)? in
            guard
                let row = try database.query(
                    "SELECT child_profile_id FROM stories.stories WHERE id = $1 AND user_id = $2",
                    [id, user.uuid]
                ).first
            else { return nil }
            let pages = try database.query(
                "SELECT page_number FROM stories.pages WHERE story_id = $1",
                [id]
            ).map { page throws(PostgresError) in try page.decode(Int.self, "page_number") }
            return (try row.decode(UUID?.self, "child_profile_id"), Set(pages))
        }
    }

    /// A page of the caller's story: its illustration state and stored picture path; nil when
    /// the story is not the caller's or has no such page.
    func illustration(story: UUID, page: Int, user: UserID) async throws -> (status: String, path: String?)? {
        try await pool.withConnection { database -> (status: String, path: String?)? in
            guard
                let row = try database.query(
                    """
                    SELECT p.illustration_status, p.illustration_path
                    FROM stories.pages p JOIN stories.stories s ON s.id = p.story_id
                    WHERE p.story_id = $1 AND p.page_number = $2 AND s.user_id = $3
                    """,
                    [story, page, user.uuid]
                ).first
            else { return nil }
            return (
                try row.decode(String.self, "illustration_status"), try row.decode(String?.self, "illustration_path")
            )
        }
    }

    /// A child's achievements (earned first, newest first; then in progress), at most `limit`.
    func achievements(child: UUID, user: UserID, limit: Int) async throws -> [Achievement]? {
        try await pool.withConnection { database -> [Achievement]? in
            guard
                try !database.query(
                    "SELECT 1 FROM stories.child_profiles WHERE id = $1 AND user_id = $2",
                    [child, user.uuid]
                ).isEmpty
            else { return nil }
            try Self.markOpened(story: nil, child: child, in: database)
            return try database.query(
                """
                SELECT id, rule_key, name, description, type, icon, progress, earned_at, story_id
                FROM stories.achievements WHERE child_profile_id = $1
                ORDER BY earned_at DESC NULLS LAST, progress DESC, rule_key LIMIT $2
                """,
                [child, limit]
            ).map { row throws(PostgresError) in
                Achievement(
                    id: try row.decode(UUID.self, "id"),
                    ruleKey: try row.decode(String.self, "rule_key"),
                    name: try row.decode(String.self, "name"),
                    description: try row.decode(String.self, "description"),
                    type: try row.decode(String.self, "type"),
                    icon: try row.decode(String.self, "icon"),
                    progress: try row.decode(Double.self, "progress"),
                    earnedAt: try row.decode(Date?.self, "earned_at"),
                    storyID: try row.decode(UUID?.self, "story_id")
                )
            }
        }
    }

    /// Children's retention (migration 0029) deletes what nobody opened for a long time: the app
    /// opening a story (and so its child) or a child's achievements moves `last_opened_at`. At
    /// most once a day per row, so that nearly every read writes nothing.
    private static func markOpened(story: UUID?, child: UUID?, in database: PostgresConnection) throws(PostgresError) {
        if let story {
            try database.execute(
                """
                UPDATE stories.stories SET last_opened_at = now()
                WHERE id = $1 AND last_opened_at < now() - interval '1 day'
                """,
                [story]
            )
        }
        if let child {
            try database.execute(
                """
                UPDATE stories.child_profiles SET last_opened_at = now()
                WHERE id = $1 AND last_opened_at < now() - interval '1 day'
                """,
                [child]
            )
        }
    }

    private static func summary(_ row: PostgresRow) throws(PostgresError) -> StorySummary {
        StorySummary(
            id: try row.decode(UUID.self, "id"),
            childProfileID: try row.decode(UUID?.self, "child_profile_id"),
            title: try row.decode(String.self, "title"),
            childName: try row.decode(String.self, "child_name"),
            ageGroup: try row.decode(Int.self, "age_group"),
            theme: try row.decode(String.self, "theme"),
            mainCharacter: try row.decode(String.self, "main_character"),
            language: try row.decode(String.self, "language"),
            readCount: try row.decode(Int.self, "read_count"),
            lastReadAt: try row.decode(Date?.self, "last_read_at"),
            isFavorite: try row.decode(Bool.self, "is_favorite"),
            createdAt: try row.decode(Date.self, "created_at")
        )
    }

    /// The first `limit` items, and the cursor after the last of them when there are more.
    private static func page<Item>(_ items: [(Item, Cursor)], limit: Int) -> Page<Item> {
        let kept = items.prefix(limit)
        return Page(items: kept.map(\.0), next: items.count > limit ? kept.last?.1 : nil)
    }
}
