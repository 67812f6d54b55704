import AMQP
import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import Postgres
import Stories
import StoryService
import UUIDText

struct StoriesGenerate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Publish story.generate and, with --wait, print the stored story.",
        discussion: """
            The child is a profile of the user (--child-profile) or a name (--child), \
            which gets a profile in --tz the first time. Exit status 1 when the story \
            could not be written.

            Example:
              astroctl stories generate --user <uuid> --child Mia --tz Europe/Kyiv \\
                  --hero "Felix the Fox" --theme courage --age 1 --language en --wait
            """
    )

    @Option(help: "The parent (UUID).") var user: String
    @Option(help: "The child's profile (UUID).") var childProfile: String?
    @Option(help: "The child's name (a profile is created for a new name).") var child: String?
    @Option(help: "The child's IANA time zone, for a new profile (reading streaks count its days).") var tz: String?
    @Option(help: "The main character, as the story should name it.") var hero: String
    @Option(help: "courage, friendship, kindness, curiosity, honesty, perseverance, sharing or feelings.")
    var theme: String
    @Option(help: "Age group: 0/preschool, 1/elementary, 2/preteen.") var age: StoryAgeGroup
    @Option(help: "en or uk.") var language: ReportLanguage = .en
    @Option(parsing: .unconditional, help: "Pages, 3…9 (default: the age group's).") var pages: Int?
    @Option(help: "Add the story to this collection of the user's (UUID).") var collection: String?
    @Flag(help: "Wait for the story and print it.") var wait = false
    @Option(parsing: .unconditional, help: "With --wait: give up after this many seconds.") var timeout = 120
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        guard let userID = UserID(user) else { throw ValidationError("--user: expected a UUID, got \(user)") }
        guard (childProfile == nil) != (child == nil) else {
            throw ValidationError("give either --child-profile or --child")
        }
        if let tz, TimeZone(identifier: tz) == nil {
            throw ValidationError("--tz: \(tz.debugDescription) is not an IANA time zone")
        }
        let request = StoryGenerateRequest(
            jobID: .random(),
            userID: userID,
            childProfileID: try childProfile.map { ChildID(try JobCommands.uuid($0, option: "--child-profile")) },
            childName: child,
            timeZone: tz,
            ageGroup: age.rawValue,
            theme: theme,
            mainCharacter: hero,
            language: language,
            pageCount: pages,
            collectionID: try collection.map { CollectionID(try JobCommands.uuid($0, option: "--collection")) }
        )
        try await JobCommands.publish(.storyGenerate, jobID: request.jobID, body: request, connection: connection)
        guard wait else {
            print(request.jobID)
            return
        }
        FileHandle.standardError.write(Data("published story.generate \(request.jobID); waiting…\n".utf8))
        let text = try await connection.withPool(size: 1) { pool in
            let finished = try await JobCommands.waitForEnd(
                of: request.jobID,
                pool: pool,
                timeout: timeout,
                worker: "story-worker"
            )
            guard finished.status == "succeeded" else {
                throw CommandFailure("the story was not written: \(finished.error?.description ?? finished.status)")
            }
            return try await pool.withConnection {
                try StoriesShow.render(request.storyID.uuid, database: $0, text: true)
            }
        }
        print(Terminal.safe(text))
    }
}

struct StoriesIllustrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "illustrate",
        abstract: "Publish story.illustrate (all pages not yet drawn, or --page …) and, with --wait, show the result.",
        discussion: """
            With --page, only the pages named are (re)drawn, e.g. one that failed. Exit \
            status 1 when a page could not be illustrated.

            Examples:
              astroctl stories illustrate <story-uuid> --wait
              astroctl stories illustrate <story-uuid> --page 3 --wait
            """
    )

    @Argument(help: "The story (storyId of story.generated).") var story: String
    @Option(
        name: .customLong("page"),
        parsing: .unconditionalSingleValue,
        help: "A page to (re)draw; repeat for several."
    ) var pages: [Int] = []
    @Flag(help: "With --page: redraw the pages even if they already have a picture.") var force = false
    @Option(help: "The story's owner (default: looked up in the database).") var user: String?
    @Flag(help: "Wait until the pages are done and show them.") var wait = false
    @Option(parsing: .unconditional, help: "With --wait: give up after this many seconds.") var timeout = 600
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let storyID = try JobCommands.uuid(story, option: "story")
        let owner = try await StoriesOwner.resolve(user, story: storyID, connection: connection)
        let request = StoryIllustrateRequest(
            jobID: .random(),
            userID: owner,
            storyID: StoryID(storyID),
            pages: pages.isEmpty ? nil : pages,
            force: force ? true : nil
        )
        try await JobCommands.publish(.storyIllustrate, jobID: request.jobID, body: request, connection: connection)
        guard wait else {
            print(request.jobID)
            return
        }
        FileHandle.standardError.write(Data("published story.illustrate \(request.jobID); waiting…\n".utf8))
        let (finished, text) = try await connection.withPool(size: 1) { pool in
            let finished = try await JobCommands.waitForEnd(
                of: request.jobID,
                pool: pool,
                timeout: timeout,
                worker: "story-worker"
            )
            let text = try await pool.withConnection { try StoriesShow.render(storyID, database: $0, text: false) }
            return (finished, text)
        }
        print(Terminal.safe(text))
        guard finished.status == "succeeded" else {
            throw CommandFailure("not every page was illustrated: \(finished.error?.description ?? finished.status)")
        }
    }
}

struct StoriesRead: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Publish story.read (a child read a story) and print the read count and achievements earned.",
        discussion: """
            The reader is the story's child unless --child says otherwise.

            Example:
              astroctl stories read <story-uuid> [--child <profile-uuid>] \\
                  [--at 2026-11-23T19:30:00Z]
            """
    )

    @Argument(help: "The story.") var story: String
    @Option(help: "The story's owner (default: looked up in the database).") var user: String?
    @Option(help: "The reader's child profile (default: the story's child).") var child: String?
    @Option(help: "When it was read, ISO 8601 (default: now).") var at: String?
    @Flag(help: "Publish and print the job id only, without waiting.") var noWait = false
    @Option(parsing: .unconditional, help: "Give up waiting after this many seconds.") var timeout = 60
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let storyID = try JobCommands.uuid(story, option: "story")
        var when: Date?
        if let at {
            guard let date = ISO8601.date(from: at) else {
                throw ValidationError("--at: expected ISO 8601, got \(InputQuote.short(at))")
            }
            when = date
        }
        let owner = try await StoriesOwner.resolve(user, story: storyID, connection: connection)
        let request = StoryReadRequest(
            jobID: .random(),
            userID: owner,
            storyID: StoryID(storyID),
            childProfileID: try child.map { ChildID(try JobCommands.uuid($0, option: "--child")) },
            at: when
        )
        try await JobCommands.publish(.storyRead, jobID: request.jobID, body: request, connection: connection)
        guard !noWait else {
            print(request.jobID)
            return
        }
        let finished = try await connection.withPool(size: 1) { pool in
            try await JobCommands.waitForEnd(of: request.jobID, pool: pool, timeout: timeout, worker: "story-worker")
        }
        guard finished.status == "succeeded", let result = finished.result else {
            throw CommandFailure("the reading was not recorded: \(finished.error?.description ?? finished.status)")
        }
        var readCount = 0
        if case .number(let count)? = result["readCount"] { readCount = Int(count) }
        print("read count \(readCount)")
        for achievement in result["achievementsEarned"]?.arrayValue ?? [] {
            print(
                Terminal.safe(
                    "earned: \(achievement["name"]?.stringValue ?? "?") (\(achievement["ruleKey"]?.stringValue ?? "?"))"
                )
            )
        }
    }
}

struct StoriesShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Print a stored story: its pages and each page's illustration status."
    )

    @Argument(help: "The story.") var story: String
    @Flag(help: "Only the illustration status of each page, not the text.") var statusOnly = false
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let storyID = try JobCommands.uuid(story, option: "story")
        let text = try await connection.withPool(size: 1) { pool in
            try await pool.withConnection { try Self.render(storyID, database: $0, text: !statusOnly) }
        }
        print(Terminal.safe(text))
    }

    /// The story as text: title, facts, then each page with its illustration status (and the
    /// page's text when `text`).
    static func render(_ storyID: UUID, database: PostgresConnection, text: Bool) throws -> String {
        guard
            let story = try database.query(
                """
                SELECT title, child_name, age_group, theme, main_character, language, read_count, last_read_at,
                       writer, writer_version, child_profile_id, created_at
                FROM stories.stories WHERE id = $1
                """,
                [storyID]
            ).first
        else { throw CommandFailure("no story \(storyID.lowercasedText)") }
        var lines = [
            try story.decode(String.self, "title"),
            "story \(storyID.lowercasedText)  child \(try story.decode(String.self, "child_name"))"
                + " (profile \(try story.decode(UUID?.self, "child_profile_id")?.lowercasedText ?? "none"))",
            "theme \(try story.decode(String.self, "theme"))  age group \(try story.decode(Int.self, "age_group"))"
                + "  hero \(try story.decode(String.self, "main_character"))"
                + "  language \(try story.decode(String.self, "language"))",
            "read \(try story.decode(Int.self, "read_count")) times"
                + (try story.decode(Date?.self, "last_read_at").map { ", last \(ISO8601.string(from: $0))" } ?? "")
                + "  written by \(try story.decode(String.self, "writer")) \(try story.decode(String.self, "writer_version"))",
        ]
        let pages = try database.query(
            """
            SELECT page_number, text, illustration_status, illustration_path, illustration_error, illustrator,
                   illustration_attempts
            FROM stories.pages WHERE story_id = $1 ORDER BY page_number
            """,
            [storyID]
        )
        for page in pages {
            let number = try page.decode(Int.self, "page_number")
            var status = try page.decode(String.self, "illustration_status")
            if let path = try page.decode(String?.self, "illustration_path") {
                status += " \(path) (\(try page.decode(String?.self, "illustrator") ?? "?"))"
            }
            if let error = try page.decode(String?.self, "illustration_error") { status += " — \(error)" }
            let attempts = try page.decode(Int.self, "illustration_attempts")
            if attempts > 1 { status += " [\(attempts) attempts]" }
            lines.append("")
            lines.append("[\(number)] illustration: \(status)")
            if text { lines.append(try page.decode(String.self, "text")) }
        }
        return lines.joined(separator: "\n")
    }
}

struct StoriesAchievements: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "achievements",
        abstract: "Print a child's achievements: those earned, then the progress of the others."
    )

    @Option(help: "The child's profile (UUID).") var child: String
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let childID = try JobCommands.uuid(child, option: "--child")
        let lines = try await connection.withPool(size: 1) { pool in
            try await pool.withConnection { database in
                guard
                    let profile = try database.query(
                        "SELECT name, timezone FROM stories.child_profiles WHERE id = $1",
                        [childID]
                    ).first
                else { throw CommandFailure("no child profile \(childID.lowercasedText)") }
                var lines = [
                    "\(try profile.decode(String.self, "name")) (\(try profile.decode(String.self, "timezone")))"
                ]
                let rows = try database.query(
                    """
                    SELECT rule_key, name, description, type, icon, earned_at, progress FROM stories.achievements
                    WHERE child_profile_id = $1 ORDER BY earned_at IS NULL, earned_at, progress DESC, rule_key
                    """,
                    [childID]
                )
                if rows.isEmpty { lines.append("no achievements yet: read a story first") }
                for row in rows {
                    let name = try row.decode(String.self, "name")
                    let key = try row.decode(String.self, "rule_key")
                    if let earned = try row.decode(Date?.self, "earned_at") {
                        lines.append(
                            "★ \(name) — \(try row.decode(String.self, "description")) [\(key), \(ISO8601.string(from: earned))]"
                        )
                    } else {
                        let progress = try row.decode(Double.self, "progress")
                        let percent = progress.isFinite ? Int((min(max(progress, 0), 1) * 100).rounded()) : 0
                        lines.append("  \(name) \(percent)% [\(key)]")
                    }
                }
                return lines
            }
        }
        print(Terminal.safe(lines.joined(separator: "\n")))
    }
}

struct StoriesCollection: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "collection",
        abstract: "Create a story collection for a user (stories join it through generate --collection).",
        discussion: """
            Prints the collection's id.

            Example:
              astroctl stories collection --user <uuid> --name "Brave Hearts" \\
                  --category confidenceLeadership --age 1
            """
    )

    @Option(help: "The parent (UUID).") var user: String
    @Option(help: "The collection's name.") var name: String
    @Option(help: "Its description.") var description = ""
    @Option(help: "emotionalIntelligence, cognitiveDevelopment, confidenceLeadership or socialResponsibility.")
    var category: String
    @Option(help: "Target age group: 0/preschool, 1/elementary, 2/preteen.") var age: StoryAgeGroup
    @Option(help: "Only for this child (profile UUID).") var child: String?
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let userID = try JobCommands.uuid(user, option: "--user")
        guard StoryKnowledgeBase.growthCategories.contains(category) else {
            throw ValidationError(
                "--category: one of \(StoryKnowledgeBase.growthCategories.sorted().joined(separator: ", "))"
            )
        }
        guard (1...100).contains(name.count) else { throw ValidationError("--name: 1–100 characters") }
        let childID = try child.map { try JobCommands.uuid($0, option: "--child") }
        let id = UUID()
        try await connection.withPool(size: 1) { pool in
            try await pool.withTransaction { database in
                try database.execute("INSERT INTO users (id) VALUES ($1) ON CONFLICT (id) DO NOTHING", [userID])
                try database.execute(
                    """
                    INSERT INTO stories.collections (id, user_id, child_profile_id, name, description, growth_category,
                        target_age_group)
                    VALUES ($1, $2, $3, $4, $5, $6, $7)
                    """,
                    [id, userID, childID, name, description, category, age.rawValue]
                )
            }
        }
        print(id.lowercasedText)
    }
}

/// The user a story.illustrate or story.read is published for: `--user`, else the story's owner
/// as the database records it (the worker checks the job's user owns the story).
enum StoriesOwner {
    static func resolve(_ user: String?, story: UUID, connection: ConnectionOptions) async throws -> UserID {
        if let user {
            guard let id = UserID(user) else {
                throw ValidationError("--user: expected a UUID, got \(InputQuote.short(user))")
            }
            return id
        }
        let owner = try await connection.withPool(size: 1) { pool in
            try await pool.withConnection { database in
                try database.query("SELECT user_id FROM stories.stories WHERE id = $1", [story]).first?
                    .decode(UUID.self, "user_id")
            }
        }
        guard let owner else {
            throw CommandFailure("no story \(story.lowercasedText); give --user to publish anyway")
        }
        return UserID(owner)
    }
}
