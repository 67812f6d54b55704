import AstroDomain
import Foundation
import Postgres
import Stories
import StoryIllustration
import StoryService
import Testing
import WorkerRuntime

/// The story-worker's three jobs against the real database: each job's prepare, then its commit
/// in a real transaction, as the runtime runs them (the broker side: StoryWorkerProcessTests).
@Suite(.timeLimit(.minutes(3)))
struct StoryHandlerTests {
    static let writer = try! BuiltInStoryWriter()
    static let rules = try! AchievementRuleBook.load()

    let pool: PostgresPool
    let generate: StoryGenerateHandler
    let read: StoryReadHandler

    init() async throws {
        pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 4),
            logger: RuntimeTestEnvironment.logger
        )
        generate = StoryGenerateHandler(writer: Self.writer, pool: pool)
        read = StoryReadHandler(rules: Self.rules)
    }

    /// Runs one job through a handler: prepare, then commit in a transaction.
    func run<H: JobHandler>(
        _ handler: H,
        _ body: some Encodable,
        type: JobType,
        jobID: JobID
    ) async throws
        -> JobOutcome
    {
        let envelope = JobEnvelope(jobID: jobID, type: type, body: try JSONCoding.encoder.encode(body))
        let prepared = try await handler.prepare(envelope)
        return try await pool.withTransaction { database in
            try handler.commit(prepared, job: envelope, database: database)
        }
    }

    func story(
        user: UserID = .random(),
        child: String = "Mia",
        timeZone: String? = nil,
        age: Int = 1,
        theme: String = "courage",
        hero: String = "Felix the Fox",
        language: ReportLanguage = .en,
        pages: Int? = nil,
        collection: CollectionID? = nil
    ) async throws -> (StoryGenerateRequest, JobOutcome) {
        let request = StoryGenerateRequest(
            jobID: .random(),
            userID: user,
            childName: child,
            timeZone: timeZone,
            ageGroup: age,
            theme: theme,
            mainCharacter: hero,
            language: language,
            pageCount: pages,
            collectionID: collection
        )
        return (request, try await run(generate, request, type: .storyGenerate, jobID: request.jobID))
    }

    func rejection(_ body: StoryGenerateRequest) async -> String? {
        do {
            _ = try await run(generate, body, type: .storyGenerate, jobID: body.jobID)
            return nil
        } catch let rejection as JobRejection {
            return rejection.code
        } catch {
            return "\(error)"
        }
    }

    func pages(
        _ story: StoryID
    ) async throws -> [(number: Int, text: String, status: String, path: String?, attempts: Int)] {
        try await pool.withConnection { database in
            try database.query(
                """
                SELECT page_number, text, illustration_status, illustration_path, illustration_attempts
                FROM stories.pages WHERE story_id = $1 ORDER BY page_number
                """,
                [story.uuid]
            ).map { row in
                (
                    try row.decode(Int.self, "page_number"), try row.decode(String.self, "text"),
                    try row.decode(String.self, "illustration_status"),
                    try row.decode(String?.self, "illustration_path"), try row.decode(Int.self, "illustration_attempts")
                )
            }
        }
    }

    // MARK: - story.generate

    @Test func aGeneratedStoryIsStoredWithEveryPageNotStarted() async throws {
        let (request, outcome) = try await story(timeZone: "Europe/Kyiv")
        #expect(outcome.status == .succeeded)
        #expect(outcome.messages.map(\.routingKey) == ["story.generated"])
        #expect(outcome.result?["storyId"]?.stringValue == request.storyID.description)
        let stored = try await pages(request.storyID)
        // Age group 1's default length, every page waiting for its picture.
        #expect(stored.map(\.number) == Array(1...7))
        #expect(stored.allSatisfy { $0.status == "notStarted" && $0.path == nil })
        #expect(stored.contains { $0.text.contains("Felix the Fox") })
        let profile = try await pool.withConnection { database in
            try database.query(
                """
                SELECT c.name, c.timezone, s.child_name, s.writer FROM stories.stories s
                JOIN stories.child_profiles c ON c.id = s.child_profile_id WHERE s.id = $1
                """,
                [request.storyID.uuid]
            ).first
        }
        #expect(try profile?.decode(String.self, "timezone") == "Europe/Kyiv")
        #expect(try profile?.decode(String.self, "child_name") == "Mia")
        #expect(try profile?.decode(String.self, "writer") == "built-in")
        // The same job again (a redelivery racing its own commit) stores nothing new.
        let again = try await run(generate, request, type: .storyGenerate, jobID: request.jobID)
        #expect(again.status == .succeeded)
        #expect(try await pages(request.storyID).count == 7)
        // A second story for the same child name reuses the child's profile.
        let (second, _) = try await story(user: request.userID, theme: "kindness")
        let profiles = try await pool.withConnection { database in
            try database.query(
                "SELECT count(DISTINCT child_profile_id)::int AS n FROM stories.stories WHERE id IN ($1, $2)",
                [request.storyID.uuid, second.storyID.uuid]
            ).first?.decode(Int.self, "n")
        }
        #expect(profiles == 1)
    }

    @Test(arguments: StoryAgeGroup.allCases)
    func ukrainianStoriesFitTheirAgeGroup(age: StoryAgeGroup) async throws {
        let (request, outcome) = try await story(
            child: "Оленка",
            age: age.rawValue,
            theme: "friendship",
            hero: "Їжачок Тимко",
            language: .uk
        )
        #expect(outcome.status == .succeeded)
        let stored = try await pages(request.storyID)
        let rules = Self.writer.knowledgeBase(.uk).ageRules[age]!
        #expect(stored.count == rules.defaultPages)
        #expect(
            StoryContentCheck.problems(
                title: "t",
                pages: stored.map(\.text),
                ageGroup: age,
                base: Self.writer.knowledgeBase(.uk)
            ).isEmpty
        )
        #expect(stored.contains { $0.text.contains("Їжачок Тимко") })
    }

    @Test func requestsThatCanNeverBeWrittenAreRejectedWithTheirCode() async throws {
        let user = UserID.random()
        func request(_ change: (inout StoryGenerateRequest) -> Void) -> StoryGenerateRequest {
            var body = StoryGenerateRequest(
                jobID: .random(),
                userID: user,
                childName: "Mia",
                ageGroup: 1,
                theme: "courage",
                mainCharacter: "Felix",
                language: .en
            )
            change(&body)
            return body
        }
        #expect(await rejection(request { $0.theme = "dragons" }) == "unknown-theme")
        #expect(await rejection(request { $0.pageCount = 12 }) == "invalid-page-count")
        #expect(await rejection(request { $0.ageGroup = 5 }) == "invalid-age-group")
        #expect(await rejection(request { $0.childName = nil }) == "child-required")
        #expect(await rejection(request { $0.timeZone = "Mars/Olympus" }) == "unknown-timezone")
        #expect(await rejection(request { $0.mainCharacter = "" }) == "invalid-name")
        #expect(
            await rejection(
                request {
                    $0.childName = nil
                    $0.childProfileID = .random()
                }
            ) == "child-not-found"
        )
        #expect(await rejection(request { $0.collectionID = .random() }) == "collection-not-found")
        // Nothing was stored for the user.
        let stories = try await pool.withConnection { database in
            try database.query("SELECT count(*)::int AS n FROM stories.stories WHERE user_id = $1", [user.uuid])
                .first?.decode(Int.self, "n")
        }
        #expect(stories == 0)
    }

    // MARK: - story.illustrate

    static func storageRoot() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("story-illustrations-\(UUID())")
    }

    @Test func theBuiltInIllustratorDrawsEveryPageInOrder() async throws {
        let (generated, _) = try await story(age: 0)
        let root = Self.storageRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let handler = StoryIllustrateHandler(
            pool: pool,
            illustrator: try BuiltInIllustrator(),
            storage: try IllustrationStorage(root: root),
            logger: RuntimeTestEnvironment.logger
        )
        let request = StoryIllustrateRequest(jobID: .random(), userID: generated.userID, storyID: generated.storyID)
        let outcome = try await run(handler, request, type: .storyIllustrate, jobID: request.jobID)
        #expect(outcome.status == .succeeded)
        #expect(outcome.messages.map(\.routingKey) == ["story.illustrated"])
        #expect(outcome.result?["generatedPages"]?.arrayValue?.count == 5)
        let stored = try await pages(generated.storyID)
        #expect(stored.allSatisfy { $0.status == "generated" && $0.attempts == 1 })
        for page in stored {
            let path = try #require(page.path)
            #expect(
                path
                    == IllustrationStorage.relativePath(
                        storyID: generated.storyID.uuid,
                        page: page.number,
                        fileExtension: "png"
                    )
            )
            let picture = StoryImage(
                data: try Data(contentsOf: root.appendingPathComponent(path)),
                fileExtension: "png",
                mediaType: "image/png"
            )
            #expect(StoryImage.isPNG(picture.data) && BuiltInIllustrator.drew(picture))
        }
        // Nothing left to draw: a second job redraws nothing.
        let again = StoryIllustrateRequest(jobID: .random(), userID: generated.userID, storyID: generated.storyID)
        let second = try await run(handler, again, type: .storyIllustrate, jobID: again.jobID)
        #expect(second.result?["generatedPages"]?.arrayValue?.isEmpty == true)
        #expect(try await pages(generated.storyID).allSatisfy { $0.attempts == 1 })
    }

    @Test func aPageAnotherJobIsDrawingIsLeftToItUntilItsClaimIsStale() async throws {
        let (generated, _) = try await story(age: 0, pages: 3)
        let root = Self.storageRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let other = UUID()
        _ = try await pool.withConnection { database in
            try database.execute(
                """
                UPDATE stories.pages SET illustration_status = 'generating', illustration_job = $2
                WHERE story_id = $1 AND page_number = 2
                """,
                [generated.storyID.uuid, other]
            )
        }
        let handler = StoryIllustrateHandler(
            pool: pool,
            illustrator: try BuiltInIllustrator(),
            storage: try IllustrationStorage(root: root),
            claimLease: .seconds(60),
            logger: RuntimeTestEnvironment.logger
        )
        let first = StoryIllustrateRequest(jobID: .random(), userID: generated.userID, storyID: generated.storyID)
        let outcome = try await run(handler, first, type: .storyIllustrate, jobID: first.jobID)
        #expect(outcome.result?["skippedPages"] == [2])
        #expect(try await pages(generated.storyID).map(\.status) == ["generated", "generating", "generated"])
        // Its worker died: once the claim is older than the lease, the page is taken over.
        _ = try await pool.withConnection { database in
            try database.execute(
                "UPDATE stories.pages SET updated_at = now() - interval '2 minutes' WHERE story_id = $1 AND page_number = 2",
                [generated.storyID.uuid]
            )
        }
        let second = StoryIllustrateRequest(jobID: .random(), userID: generated.userID, storyID: generated.storyID)
        let taken = try await run(handler, second, type: .storyIllustrate, jobID: second.jobID)
        #expect(taken.result?["generatedPages"] == [2])
        #expect(try await pages(generated.storyID).allSatisfy { $0.status == "generated" })
    }

    @Test func illustratingPagesThatDoNotExistIsRejected() async throws {
        let (generated, _) = try await story(age: 0, pages: 3)
        let handler = StoryIllustrateHandler(
            pool: pool,
            illustrator: try BuiltInIllustrator(),
            storage: try IllustrationStorage(root: Self.storageRoot()),
            logger: RuntimeTestEnvironment.logger
        )
        for (pages, storyID) in [([4], generated.storyID), ([1, 1], generated.storyID), ([1], StoryID.random())] {
            let request = StoryIllustrateRequest(
                jobID: .random(),
                userID: generated.userID,
                storyID: storyID,
                pages: pages
            )
            await #expect(throws: JobRejection.self) {
                _ = try await run(handler, request, type: .storyIllustrate, jobID: request.jobID)
            }
        }
        #expect(try await pages(generated.storyID).allSatisfy { $0.status == "notStarted" && $0.attempts == 0 })
    }

    /// Issue 14: a story.illustrate names its user, and only that user's story is drawn.
    @Test func anotherUsersStoryIsNotFound() async throws {
        let (generated, _) = try await story(age: 0, pages: 3)
        let handler = StoryIllustrateHandler(
            pool: pool,
            illustrator: try BuiltInIllustrator(),
            storage: try IllustrationStorage(root: Self.storageRoot()),
            logger: RuntimeTestEnvironment.logger
        )
        let request = StoryIllustrateRequest(jobID: .random(), userID: .random(), storyID: generated.storyID)
        do {
            _ = try await run(handler, request, type: .storyIllustrate, jobID: request.jobID)
            Issue.record("another user's story was illustrated")
        } catch let rejection as JobRejection {
            #expect(rejection.code == "story-not-found")
        }
        #expect(try await pages(generated.storyID).allSatisfy { $0.status == "notStarted" && $0.attempts == 0 })
    }

    /// Named pages that already have a picture are left alone unless the job says `force`.
    @Test func explicitPagesAreRedrawnOnlyWithoutAPictureUnlessForced() async throws {
        let (generated, _) = try await story(age: 0, pages: 3)
        let root = Self.storageRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let handler = StoryIllustrateHandler(
            pool: pool,
            illustrator: try BuiltInIllustrator(),
            storage: try IllustrationStorage(root: root),
            logger: RuntimeTestEnvironment.logger
        )
        let all = StoryIllustrateRequest(jobID: .random(), userID: generated.userID, storyID: generated.storyID)
        _ = try await run(handler, all, type: .storyIllustrate, jobID: all.jobID)
        let named = StoryIllustrateRequest(
            jobID: .random(),
            userID: generated.userID,
            storyID: generated.storyID,
            pages: [2, 3]
        )
        let kept = try await run(handler, named, type: .storyIllustrate, jobID: named.jobID)
        #expect(kept.status == .succeeded)
        #expect(kept.result?["unchangedPages"] == [2, 3])
        #expect(kept.result?["generatedPages"] == [])
        #expect(try await pages(generated.storyID).map(\.attempts) == [1, 1, 1])
        let forced = StoryIllustrateRequest(
            jobID: .random(),
            userID: generated.userID,
            storyID: generated.storyID,
            pages: [2],
            force: true
        )
        let redrawn = try await run(handler, forced, type: .storyIllustrate, jobID: forced.jobID)
        #expect(redrawn.result?["generatedPages"] == [2])
        #expect(try await pages(generated.storyID).map(\.attempts) == [1, 2, 1])
        // The same forced job again (a redelivery after its worker died before acknowledging):
        // the page it drew is not drawn (nor paid for) a second time.
        let again = try await run(handler, forced, type: .storyIllustrate, jobID: forced.jobID)
        #expect(again.result?["generatedPages"] == [2])
        #expect(try await pages(generated.storyID).map(\.attempts) == [1, 2, 1])
    }

    /// Stored page numbers with a gap (1, 3) neither trap nor shift the text of a page.
    @Test func pageNumbersWithGapsAreIllustratedByNumber() async throws {
        let (generated, _) = try await story(age: 0, pages: 3)
        let root = Self.storageRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        _ = try await pool.withConnection { database in
            try database.execute(
                "DELETE FROM stories.pages WHERE story_id = $1 AND page_number = 2",
                [generated.storyID.uuid]
            )
        }
        let handler = StoryIllustrateHandler(
            pool: pool,
            illustrator: try BuiltInIllustrator(),
            storage: try IllustrationStorage(root: root),
            logger: RuntimeTestEnvironment.logger
        )
        let request = StoryIllustrateRequest(jobID: .random(), userID: generated.userID, storyID: generated.storyID)
        let outcome = try await run(handler, request, type: .storyIllustrate, jobID: request.jobID)
        #expect(outcome.result?["generatedPages"] == [1, 3])
        let missing = StoryIllustrateRequest(
            jobID: .random(),
            userID: generated.userID,
            storyID: generated.storyID,
            pages: [2]
        )
        await #expect(throws: JobRejection.self) {
            _ = try await run(handler, missing, type: .storyIllustrate, jobID: missing.jobID)
        }
    }

    // MARK: - story.read

    func readStory(_ story: StoryID, at: String, jobID: JobID = .random()) async throws -> JobOutcome {
        let request = StoryReadRequest(
            jobID: jobID,
            userID: try await owner(of: story),
            storyID: story,
            at: ISO8601.date(from: at)!
        )
        return try await run(read, request, type: .storyRead, jobID: jobID)
    }

    func owner(of story: StoryID) async throws -> UserID {
        let owner = try await pool.withConnection { database in
            try database.query("SELECT user_id FROM stories.stories WHERE id = $1", [story.uuid]).first?
                .decode(UUID.self, "user_id")
        }
        return UserID(try #require(owner))
    }

    func achievements(of story: StoryID) async throws -> [String: Bool] {
        try await pool.withConnection { database in
            var earned: [String: Bool] = [:]
            for row in try database.query(
                """
                SELECT a.rule_key, a.earned_at IS NOT NULL AS earned FROM stories.achievements a
                JOIN stories.stories s ON s.child_profile_id = a.child_profile_id WHERE s.id = $1
                """,
                [story.uuid]
            ) {
                earned[try row.decode(String.self, "rule_key")] = try row.decode(Bool.self, "earned")
            }
            return earned
        }
    }

    @Test func streaksAreCountedInTheChildsTimeZone() async throws {
        // The same three readings: on three days in UTC, but 00:30, 23:00 and 00:30 in Kyiv
        // (UTC+2 in early March) fall on 2, 2 and 4 March there.
        let times = ["2026-03-01T22:30:00Z", "2026-03-02T21:00:00Z", "2026-03-03T22:30:00Z"]
        var earned: [String: [String: Bool]] = [:]
        for zone in ["UTC", "Europe/Kyiv"] {
            let user = UserID.random()
            var stories: [StoryID] = []
            for theme in ["courage", "kindness", "honesty"] {
                let (request, _) = try await story(user: user, timeZone: zone, theme: theme)
                stories.append(request.storyID)
            }
            for (story, time) in zip(stories, times) { _ = try await readStory(story, at: time) }
            earned[zone] = try await achievements(of: stories[0])
        }
        #expect(earned["UTC"]?["reading-streak-3"] == true)
        #expect(earned["Europe/Kyiv"]?["reading-streak-3"] == false)
        #expect(earned["UTC"]?["first-story"] == true && earned["Europe/Kyiv"]?["first-story"] == true)
    }

    @Test func aRedeliveredReadingCountsOnceAndAwardsNothingTwice() async throws {
        let (request, _) = try await story()
        let job = JobID.random()
        let first = try await readStory(request.storyID, at: "2026-11-20T18:00:00Z", jobID: job)
        #expect(first.result?["readCount"] == 1)
        let earnedEvents = first.messages.filter { $0.routingKey == "achievement.earned" }
        #expect(earnedEvents.count == 1)
        #expect(first.messages.first?.routingKey == "story.read-recorded")
        let again = try await readStory(request.storyID, at: "2026-11-20T18:00:00Z", jobID: job)
        #expect(again.result?["alreadyRecorded"] == true)
        #expect(!again.messages.contains { $0.routingKey == "achievement.earned" })
        // A new reading of the same story is counted, and first-story stays awarded once.
        let third = try await readStory(request.storyID, at: "2026-11-21T18:00:00Z")
        #expect(third.result?["readCount"] == 2)
        #expect(!third.messages.contains { $0.routingKey == "achievement.earned" })
        let stored = try await pool.withConnection { database in
            try database.query(
                """
                SELECT s.read_count, s.last_read_at,
                    (SELECT count(*)::int FROM stories.achievements a WHERE a.child_profile_id = s.child_profile_id
                        AND a.rule_key = 'first-story') AS first_story,
                    (SELECT a.story_id FROM stories.achievements a WHERE a.child_profile_id = s.child_profile_id
                        AND a.rule_key = 'first-story') AS earned_by
                FROM stories.stories s WHERE s.id = $1
                """,
                [request.storyID.uuid]
            ).first
        }
        #expect(try stored?.decode(Int.self, "read_count") == 2)
        #expect(try stored?.decode(Date.self, "last_read_at") == ISO8601.date(from: "2026-11-21T18:00:00Z"))
        #expect(try stored?.decode(Int.self, "first_story") == 1)
        #expect(try stored?.decode(UUID?.self, "earned_by") == request.storyID.uuid)
    }

    @Test func readingEveryStoryOfACollectionCompletesIt() async throws {
        let user = UserID.random()
        let collection = UUID()
        _ = try await pool.withConnection { database in
            try database.execute("INSERT INTO users (id) VALUES ($1)", [user.uuid])
            try database.execute(
                """
                INSERT INTO stories.collections (id, user_id, name, growth_category, target_age_group)
                VALUES ($1, $2, 'Brave Hearts', 'confidenceLeadership', 1)
                """,
                [collection, user.uuid]
            )
        }
        let (first, _) = try await story(user: user, collection: CollectionID(collection))
        let (second, _) = try await story(user: user, theme: "perseverance", collection: CollectionID(collection))
        func progress() async throws -> Double? {
            try await pool.withConnection { database in
                try database.query("SELECT completion_progress FROM stories.collections WHERE id = $1", [collection])
                    .first?.decode(Double.self, "completion_progress")
            }
        }
        #expect(try await progress() == 0)
        let half = try await readStory(first.storyID, at: "2026-11-20T18:00:00Z")
        #expect(try await progress() == 0.5)
        #expect(half.result?["collectionsCompleted"]?.arrayValue?.isEmpty == true)
        let done = try await readStory(second.storyID, at: "2026-11-20T19:00:00Z")
        #expect(try await progress() == 1)
        #expect(done.result?["collectionsCompleted"] == [.string(collection.uuidString.lowercased())])
        let key = "collection-completed:\(collection.uuidString.lowercased())"
        #expect(try await achievements(of: first.storyID)[key] == true)
        #expect(
            done.messages.contains { message in
                message.routingKey == "achievement.earned"
                    && String(decoding: message.body, as: UTF8.self).contains(key)
            }
        )
    }

    @Test func aReadingOfAnUnknownStoryOrChildIsRejected() async throws {
        let missing = StoryReadRequest(jobID: .random(), userID: .random(), storyID: .random())
        await #expect(throws: JobRejection.self) {
            _ = try await run(read, missing, type: .storyRead, jobID: missing.jobID)
        }
        let (request, _) = try await story()
        let stranger = StoryReadRequest(
            jobID: .random(),
            userID: request.userID,
            storyID: request.storyID,
            childProfileID: .random()
        )
        await #expect(throws: JobRejection.self) {
            _ = try await run(read, stranger, type: .storyRead, jobID: stranger.jobID)
        }
        // Another user's job cannot read the story (and earn achievements on it) at all.
        let intruder = StoryReadRequest(jobID: .random(), userID: .random(), storyID: request.storyID)
        do {
            _ = try await run(read, intruder, type: .storyRead, jobID: intruder.jobID)
            Issue.record("another user's reading was recorded")
        } catch let rejection as JobRejection {
            #expect(rejection.code == "story-not-found")
        }
        #expect(try await pages(request.storyID).count == 7)
        let reads = try await pool.withConnection { database in
            try database.query("SELECT read_count FROM stories.stories WHERE id = $1", [request.storyID.uuid]).first?
                .decode(Int.self, "read_count")
        }
        #expect(reads == 0)
    }
}
