import AstroDomain
import Foundation
import Postgres
import Reports
import Stories
import WorkerRuntime

/// `story.generate`: writes a story for a child and stores it with its pages, every page's
/// illustration `notStarted`, and `story.generated`, in one transaction.
///
/// The built-in writer (the story knowledge base) writes by default; an LLM writer when one is
/// configured, with the reports' rules: a bad answer is asked for once more, then the job fails;
/// rate limits and outages go back to the queue's retries. Whoever wrote it, the text is checked
/// for the age group (page length, sentence length, blocked words) before it is stored.
/// Requests that can never be written (unknown theme, page count outside 3…9, a child that is
/// not the user's, an unsuitable name) are dead-lettered with `story.failed` and the reason.
public struct StoryGenerateHandler: JobHandler {
    public let jobType = JobType.storyGenerate
    private let writer: BuiltInStoryWriter
    private let llm: LLMStoryWriter?
    private let pool: PostgresPool
    private let paidCalls: PaidCallLedger?

    /// - Parameters:
    ///   - writer: the built-in writer; also supplies the age groups' content rules, and writes
    ///     the story when the LLM's daily budget or the user's daily LLM calls are spent.
    ///   - llm: when given, stories are written by the LLM.
    ///   - pool: reads a named child profile in `prepare`, outside the commit transaction.
    ///   - paidCalls: meters and bounds the LLM's calls (nil: unmetered, as in tests and tools).
    public init(
        writer: BuiltInStoryWriter,
        llm: LLMStoryWriter? = nil,
        pool: PostgresPool,
        paidCalls: PaidCallLedger? = nil
    ) {
        self.writer = writer
        self.llm = llm
        self.pool = pool
        self.paidCalls = paidCalls
    }

    public struct Prepared: Sendable {
        var request: StoryGenerateRequest
        var ageGroup: StoryAgeGroup
        var childName: String
        var story: WrittenStory
        var usage: ReportUsage?
    }

    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        let request = try job.decode(StoryGenerateRequest.self)
        guard let ageGroup = StoryAgeGroup(rawValue: request.ageGroup) else {
            throw JobRejection(
                code: .invalidAgeGroup,
                message:
                    "ageGroup must be 0 (preschool 3–5), 1 (elementary 6–8) or 2 (preteen 9–10), got \(request.ageGroup)"
            )
        }
        if let zone = request.timeZone, (try? BirthData.timeZone(named: zone)) == nil {
            throw JobRejection(
                code: .unknownTimezone,
                message: "timeZone \(InputQuote.short(zone)) is not an IANA zone"
            )
        }
        let childName: String
        if let profile = request.childProfileID {
            let name = try await pool.withConnection { database in
                try database.query(
                    "SELECT name FROM stories.child_profiles WHERE id = $1 AND user_id = $2",
                    [profile.uuid, request.userID.uuid]
                ).first?.decode(String.self, "name")
            }
            guard let name else { throw Self.childNotFound(request) }
            childName = name
        } else if let name = request.childName {
            childName = name
        } else {
            throw JobRejection(code: .childRequired, message: "give childProfileId or childName")
        }
        let details = StoryRequestDetails(
            childName: childName,
            ageGroup: ageGroup,
            theme: request.theme,
            mainCharacter: request.mainCharacter,
            language: request.language,
            pageCount: request.pageCount
        )
        var usage: ReportUsage?
        let story: WrittenStory
        do {
            if let llm {
                do {
                    (story, usage) = try await llm.write(
                        details,
                        meter: paidCalls?.meter(user: request.userID, job: job.jobID)
                    )
                } catch  where error.code == StoryWriterError.paidCallRefused {
                    // Past the budget or the user's daily calls: the built-in writer writes it.
                    story = try writer.write(details)
                }
            } else {
                story = try writer.write(details)
            }
        } catch {
            // Rate limits, outages and timeouts: the runtime retries the job later.
            guard error.isPermanent else { throw error }
            throw JobRejection(code: error.code, message: error.message)
        }
        let problems = StoryContentCheck.problems(
            title: story.title,
            pages: story.pages,
            ageGroup: ageGroup,
            base: writer.knowledgeBase(request.language)
        )
        guard problems.isEmpty else {
            throw JobRejection(code: .unsuitableContent, message: problems.joined(separator: "; "))
        }
        return Prepared(
            request: request,
            ageGroup: ageGroup,
            childName: childName.trimmingCharacters(in: .whitespacesAndNewlines),
            story: story,
            usage: usage
        )
    }

    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        let request = prepared.request
        let storyID = request.storyID
        try database.execute("INSERT INTO users (id) VALUES ($1) ON CONFLICT (id) DO NOTHING", [request.userID.uuid])

        let childID: ChildID
        if let profile = request.childProfileID {
            guard
                try !database.query(
                    "SELECT 1 FROM stories.child_profiles WHERE id = $1 AND user_id = $2",
                    [profile.uuid, request.userID.uuid]
                ).isEmpty
            else { throw Self.childNotFound(request) }
            childID = profile
        } else {
            // One profile per child name and parent: later stories and readings count for it.
            try database.execute(
                """
                INSERT INTO stories.child_profiles (id, user_id, name, timezone) VALUES ($1, $2, $3, $4)
                ON CONFLICT (user_id, name) DO NOTHING
                """,
                [
                    JobID.derived(from: request.jobID, purpose: "child-profile").uuid, request.userID.uuid,
                    prepared.childName, request.timeZone ?? "UTC",
                ]
            )
            guard
                let row = try database.query(
                    "SELECT id FROM stories.child_profiles WHERE user_id = $1 AND name = $2",
                    [request.userID.uuid, prepared.childName]
                ).first
            else {
                throw PostgresError(kind: .decoding, message: "child profile \(prepared.childName) vanished")
            }
            childID = ChildID(try row.decode(UUID.self, "id"))
        }
        if let collection = request.collectionID {
            guard
                try !database.query(
                    "SELECT 1 FROM stories.collections WHERE id = $1 AND user_id = $2",
                    [collection.uuid, request.userID.uuid]
                ).isEmpty
            else {
                throw JobRejection(
                    code: .collectionNotFound,
                    message: "user \(request.userID) has no collection \(collection)"
                )
            }
        }

        let story = prepared.story
        let inserted = try database.execute(
            """
            INSERT INTO stories.stories (id, user_id, child_profile_id, title, child_name, age_group, theme,
                main_character, language, writer, writer_version, llm_model, prompt_tokens, completion_tokens,
                cost_usd)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
            ON CONFLICT (id) DO NOTHING
            """,
            [
                storyID.uuid, request.userID.uuid, childID.uuid, story.title, prepared.childName,
                prepared.ageGroup.rawValue,
                request.theme, request.mainCharacter.trimmingCharacters(in: .whitespacesAndNewlines),
                request.language.rawValue, story.writer, story.version, prepared.usage?.model,
                prepared.usage?.promptTokens, prepared.usage?.completionTokens, prepared.usage?.costUSD,
            ]
        )
        if inserted == 1 {
            // All pages in one statement: page numbers are the array's order.
            let pages = String(decoding: try JSONCoding.encoder.encode(story.pages), as: UTF8.self)
            try database.execute(
                """
                INSERT INTO stories.pages (id, story_id, page_number, text)
                SELECT gen_random_uuid(), $1, p.number, p.text
                FROM jsonb_array_elements_text($2::jsonb) WITH ORDINALITY AS p(text, number)
                """,
                [storyID.uuid, pages]
            )
            if let collection = request.collectionID {
                try database.execute(
                    """
                    INSERT INTO stories.collection_stories (collection_id, story_id, position)
                    SELECT $1, $2, coalesce(max(position) + 1, 0) FROM stories.collection_stories
                    WHERE collection_id = $1
                    """,
                    [collection.uuid, storyID.uuid]
                )
                // A new, unread story lowers the collection's completion.
                try CollectionProgress.recompute(collections: [collection.uuid], database: database)
            }
        }
        var fields: [String: JSONValue] = [
            "storyId": .string(storyID.description),
            "userId": .string(request.userID.description),
            "childProfileId": .string(childID.description),
            "title": .string(story.title),
            "pageCount": .number(Double(story.pages.count)),
            "language": .string(request.language.rawValue),
            "theme": .string(request.theme),
            "ageGroup": .number(Double(prepared.ageGroup.rawValue)),
            "writer": .string(story.writer),
        ]
        if let collection = request.collectionID {
            fields["collectionId"] = .string(collection.description)
        }
        return JobOutcome(
            status: .succeeded,
            result: .object(fields),
            messages: [
                try .event(
                    JobEvent(jobID: request.jobID, userID: request.userID, type: .storyGenerated, fields: fields)
                )
            ],
            measurements: StoryMeasurements.written(story, language: request.language)
        )
    }

    private static func childNotFound(_ request: StoryGenerateRequest) -> JobRejection {
        JobRejection(
            code: .childNotFound,
            message:
                "user \(request.userID) has no child profile \(request.childProfileID?.description ?? "")"
        )
    }
}

/// A collection's completion: the share of its stories read at least once.
enum CollectionProgress {
    /// Recomputes `completion_progress` of `collections`; returns those now complete (id, name).
    @discardableResult
    static func recompute(collections: [UUID], database: PostgresConnection) throws -> [(UUID, String)] {
        var complete: [(UUID, String)] = []
        for collection in collections {
            let rows = try database.query(
                """
                UPDATE stories.collections c SET completion_progress = coalesce((
                    SELECT count(*) FILTER (WHERE s.read_count > 0)::double precision / count(*)
                    FROM stories.collection_stories cs JOIN stories.stories s ON s.id = cs.story_id
                    WHERE cs.collection_id = c.id
                    HAVING count(*) > 0), 0)
                WHERE c.id = $1
                RETURNING c.name, c.completion_progress
                """,
                [collection]
            )
            if let row = rows.first, try row.decode(Double.self, "completion_progress") >= 1 {
                complete.append((collection, try row.decode(String.self, "name")))
            }
        }
        return complete
    }
}

/// A writer's failure carries its own classification (from the LLM client's): the runtime
/// retries only what a retry can mend, under the writer's code.
extension StoryWriterError: RetryClassifiedError {
    public var failureCode: String { code }
    public var isTransient: Bool { !isPermanent }
}
