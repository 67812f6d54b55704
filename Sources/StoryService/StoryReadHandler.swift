import AstroDomain
import Foundation
import Postgres
import Stories
import WorkerRuntime

/// `story.read`: a child read a story. In one transaction: the reading is recorded once per job,
/// the story's read count and last read move, the completion of every collection holding the
/// story is recomputed, and the achievement rules (data: `AchievementRuleBook`) are evaluated
/// over the child's whole reading history in the child's time zone. A newly earned achievement
/// is stored once (unique per child and rule) and announced with `achievement.earned`; progress
/// of the others is kept up to date. `story.read-recorded` reports the new counts.
///
/// The reads of one child are serialised by an advisory lock, so two readings committed at the
/// same moment still see each other (a streak both complete is not missed).
public struct StoryReadHandler: JobHandler {
    public let jobType = JobType.storyRead
    private let rules: AchievementRuleBook

    public init(rules: AchievementRuleBook) {
        self.rules = rules
    }

    public func prepare(_ job: JobEnvelope) async throws -> StoryReadRequest {
        let request = try job.decode(StoryReadRequest.self)
        if let at = request.at, at > Date().addingTimeInterval(24 * 3600) {
            throw JobRejection(code: .invalidReadTime, message: "at \(ISO8601.string(from: at)) is in the future")
        }
        return request
    }

    public func commit(_ request: StoryReadRequest, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome
    {
        guard
            let story = try database.query(
                """
                SELECT user_id, child_profile_id, theme, language FROM stories.stories WHERE id = $1
                """,
                [request.storyID.uuid]
            ).first
        else {
            throw JobRejection(code: .storyNotFound, message: "no story \(request.storyID)")
        }
        let owner = try story.decode(UUID.self, "user_id")
        // Another user's story reads as no story at all: a job cannot count readings, or earn
        // achievements, on a family's stories it does not own.
        guard owner == request.userID.uuid else {
            throw JobRejection(code: .storyNotFound, message: "no story \(request.storyID)")
        }
        guard
            let child = try request.childProfileID ?? story.decode(UUID?.self, "child_profile_id").map({ ChildID($0) })
        else {
            throw JobRejection(
                code: .childRequired,
                message: "the story has no child profile: give childProfileId"
            )
        }
        try database.execute("SELECT pg_advisory_xact_lock(stories.child_lock_key($1))", [child.uuid])
        guard
            let profile = try database.query(
                "SELECT timezone FROM stories.child_profiles WHERE id = $1 AND user_id = $2",
                [child.uuid, owner]
            ).first
        else {
            throw JobRejection(
                code: .childNotFound,
                message: "the story's parent has no child profile \(child)"
            )
        }
        let at = request.at ?? job.receivedAt
        let recorded = try database.execute(
            """
            INSERT INTO stories.story_reads (story_id, child_profile_id, read_at, job_id) VALUES ($1, $2, $3, $4)
            ON CONFLICT (job_id) DO NOTHING
            """,
            [request.storyID.uuid, child.uuid, at, request.jobID.uuid]
        )
        var fields: [String: JSONValue] = [
            "storyId": .string(request.storyID.description),
            "childProfileId": .string(child.description),
            "readAt": .string(ISO8601.string(from: at)),
        ]
        var messages: [OutboxMessage] = []
        if recorded == 1 {
            let counts = try database.query(
                """
                UPDATE stories.stories SET read_count = read_count + 1,
                    last_read_at = greatest(coalesce(last_read_at, $2), $2)
                WHERE id = $1 RETURNING read_count
                """,
                [request.storyID.uuid, at]
            )
            fields["readCount"] = .number(Double(try counts.first?.decode(Int.self, "read_count") ?? 0))
            let collections = try database.query(
                "SELECT collection_id FROM stories.collection_stories WHERE story_id = $1 ORDER BY collection_id",
                [request.storyID.uuid]
            ).map { row throws(PostgresError) in try row.decode(UUID.self, "collection_id") }
            let complete = try CollectionProgress.recompute(collections: collections, database: database)

            let history = try database.query(
                """
                SELECT r.story_id, s.theme, r.read_at FROM stories.story_reads r
                JOIN stories.stories s ON s.id = r.story_id
                WHERE r.child_profile_id = $1 ORDER BY r.read_at, r.id
                """,
                [child.uuid]
            ).map { row throws(PostgresError) in
                ReadingRecord(
                    storyID: try row.decode(UUID.self, "story_id"),
                    theme: try row.decode(String.self, "theme"),
                    readAt: try row.decode(Date.self, "read_at")
                )
            }
            let zone = TimeZone(identifier: try profile.decode(String.self, "timezone")) ?? .gmt
            let language = ReportLanguage(rawValue: try story.decode(String.self, "language")) ?? .en
            let statuses = rules.evaluate(
                reads: history,
                timeZone: zone,
                completedCollections: complete.map { CompletedCollection(id: $0.0, name: $0.1) },
                language: language
            )
            var earned: [JSONValue] = []
            for status in statuses {
                // Earned once: a stored earned achievement is never changed; an unearned one
                // follows the progress.
                let rows = try database.query(
                    """
                    INSERT INTO stories.achievements (id, child_profile_id, rule_key, name, description, type,
                        earned_at, icon, progress, story_id)
                    VALUES (gen_random_uuid(), $1, $2, $3, $4, $5, CASE WHEN $6 THEN $7::timestamptz END, $8, $9, $10)
                    ON CONFLICT (child_profile_id, rule_key) DO UPDATE SET
                        progress = EXCLUDED.progress, earned_at = EXCLUDED.earned_at, story_id = EXCLUDED.story_id,
                        name = EXCLUDED.name, description = EXCLUDED.description
                    WHERE stories.achievements.earned_at IS NULL
                        AND (EXCLUDED.earned_at IS NOT NULL OR EXCLUDED.progress <> stories.achievements.progress)
                    RETURNING id, earned_at
                    """,
                    [
                        child.uuid, status.ruleKey, status.name, status.description, status.type, status.earned, at,
                        status.icon, status.earned ? 1.0 : min(max(status.progress, 0), 1),
                        // A completed collection is earned by the reading that completed it: this one.
                        status.earned ? status.storyID ?? request.storyID.uuid : nil,
                    ]
                )
                guard status.earned, let row = rows.first, try row.decode(Date?.self, "earned_at") != nil else {
                    continue
                }
                let achievement: [String: JSONValue] = [
                    "achievementId": .string(AchievementID(try row.decode(UUID.self, "id")).description),
                    "childProfileId": .string(child.description),
                    "ruleKey": .string(status.ruleKey),
                    "type": .string(status.type),
                    "name": .string(status.name),
                    "icon": .string(status.icon),
                ]
                earned.append(.object(achievement))
                messages.append(
                    try .event(
                        JobEvent(
                            jobID: JobID.derived(from: request.jobID, purpose: "achievement:\(status.ruleKey)"),
                            userID: request.userID,
                            type: .achievementEarned,
                            fields: achievement
                        )
                    )
                )
            }
            fields["achievementsEarned"] = .array(earned)
            fields["collectionsCompleted"] = .array(complete.map { .string(CollectionID($0.0).description) })
        } else {
            fields["alreadyRecorded"] = true
        }
        messages.insert(
            try .event(
                JobEvent(jobID: request.jobID, userID: request.userID, type: .storyReadRecorded, fields: fields)
            ),
            at: 0
        )
        return JobOutcome(status: .succeeded, result: .object(fields), messages: messages)
    }
}
