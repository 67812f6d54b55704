import AstroDomain
import Foundation
import Hummingbird

// The JSON answers of the API as Codable types, one per schema of `openapi.yaml`. They are
// written by hand rather than generated: the generated server types (swift-openapi-generator)
// would add ~16k lines and OpenAPIRuntime to the gateway for ~20 small structs, and the spec
// keeps its authority through two tests instead: `APIAnswerSchemaTests` checks each type's
// encoding against its schema (every required member, no undocumented one, the types, enums
// and nulls), and `GatewayGeneratedClientTests` decodes a whole journey through the client
// generated from the same spec.

/// A member that is always present: its value, or `null`. (A plain optional is left out when
/// nil; the spec marks these members required and `[type, 'null']`.)
struct OrNull<Wrapped: Encodable & Sendable>: Encodable, Sendable {
    var value: Wrapped?

    init(_ value: Wrapped?) { self.value = value }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let value { try container.encode(value) } else { try container.encodeNil() }
    }
}

extension OrNull: Equatable where Wrapped: Equatable {}

/// `Tokens`: what registering a device and refreshing a token answer.
struct TokensAnswer: Encodable, Sendable {
    var userId: UserID
    var accessToken: String
    var tokenType = "Bearer"
    /// Seconds until the access token expires.
    var expiresIn: Int64
    var refreshToken: String
}

/// `POST /v1/devices/challenge`'s answer.
struct DeviceChallengeAnswer: Encodable, Sendable {
    var challenge: String
    var expiresIn: Int64
}

/// `JobAccepted` and its profile and story forms: the job's id and, where the job writes a
/// resource, that resource's id, named before it exists.
struct JobAccepted: Encodable, Sendable {
    var jobId: JobID
    var profileId: ProfileID?
    var storyId: StoryID?
    /// `user.export`: where the zip will be downloaded.
    var downloadPath: String?

    init(_ jobID: JobID, profile: ProfileID? = nil, story: StoryID? = nil, downloadPath: String? = nil) {
        jobId = jobID
        profileId = profile
        storyId = story
        self.downloadPath = downloadPath
    }
}

/// A page of a list: `items`, and `nextCursor` when there is more.
struct PageAnswer<Item: Encodable & Sendable>: Encodable, Sendable {
    var items: [Item]
    var nextCursor: String?
}

/// `Profile`: a profile as the API shows it, as `ResourceStore` reads it.
struct ProfileAnswer: Encodable, Sendable, Equatable {
    /// What the profile shows of its chart.
    struct Chart: Encodable, Sendable, Equatable {
        var chartId: ChartID
        /// `chartId` under its old name, answered for one release.
        var id: ChartID
        var houseSystem: String
        var engineVersion: String
        var calculatedAt: Date

        init(chartId: ChartID, houseSystem: String, engineVersion: String, calculatedAt: Date) {
            self.chartId = chartId
            id = chartId
            self.houseSystem = houseSystem
            self.engineVersion = engineVersion
            self.calculatedAt = calculatedAt
        }
    }

    var profileId: ProfileID
    /// `profileId` under its old name, answered for one release.
    var id: ProfileID
    var name: String
    var birthDate: String
    var birthTime: String
    var timezone: String
    var latitude: Double
    var longitude: Double
    var locationName: String
    var createdAt: Date
    var updatedAt: Date
    var chart: OrNull<Chart>

    init(
        profileId: ProfileID,
        name: String,
        birthDate: String,
        birthTime: String,
        timezone: String,
        latitude: Double,
        longitude: Double,
        locationName: String,
        createdAt: Date,
        updatedAt: Date,
        chart: Chart?
    ) {
        self.profileId = profileId
        id = profileId
        self.name = name
        self.birthDate = birthDate
        self.birthTime = birthTime
        self.timezone = timezone
        self.latitude = latitude
        self.longitude = longitude
        self.locationName = locationName
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.chart = OrNull(chart)
    }
}

/// `Credits`: the caller's available credits, in all and by area (every area present).
struct CreditsAnswer: Encodable, Sendable {
    var available: Int
    var byArea: [String: Int]

    /// - Parameter counts: Available credits by area; the `nil` key counts credits for any area.
    init(_ counts: [ReportArea?: Int]) {
        available = counts.values.reduce(0, +)
        var byArea = ["any": counts[nil] ?? 0]
        for area in ReportArea.allCases { byArea[area.rawValue] = counts[area] ?? 0 }
        self.byArea = byArea
    }
}

/// `LedgerEntry`: one movement of a credit, as `ResourceStore` reads it.
struct LedgerEntryAnswer: Encodable, Sendable, Equatable {
    var id: Int64
    var entry: String
    var creditId: CreditID
    var transactionId: String
    var jobId: JobID
    var profileId: OrNull<ProfileID>
    var area: OrNull<String>
    var language: OrNull<String>
    var reason: OrNull<String>
    var createdAt: Date
}

/// `Report` (with `text`) and `ReportSummary` (the list's items, without), as `ResourceStore`
/// reads them.
struct ReportAnswer: Encodable, Sendable, Equatable {
    var reportId: ReportID
    /// `reportId` under its old name, answered for one release.
    var id: ReportID
    var profileId: ProfileID
    /// The partner of a report for two.
    var partnerProfileId: ProfileID?
    var area: String
    var language: String
    var wordCount: Int
    var writer: String
    var generatedAt: Date
    var createdAt: Date
    var text: String?
    /// `created_at` in whole microseconds since 1970: the list's position, exactly (not answered).
    var position: Int64

    private enum CodingKeys: String, CodingKey {
        case reportId, id, profileId, partnerProfileId, area, language, wordCount, writer, generatedAt, createdAt, text
    }

    init(
        reportId: ReportID,
        profileId: ProfileID,
        partnerProfileId: ProfileID?,
        area: String,
        language: String,
        wordCount: Int,
        writer: String,
        generatedAt: Date,
        createdAt: Date,
        text: String?,
        position: Int64
    ) {
        self.reportId = reportId
        id = reportId
        self.profileId = profileId
        self.partnerProfileId = partnerProfileId
        self.area = area
        self.language = language
        self.wordCount = wordCount
        self.writer = writer
        self.generatedAt = generatedAt
        self.createdAt = createdAt
        self.text = text
        self.position = position
    }
}

/// `Consent`: the caller's latest answer as recorded.
struct ConsentAnswerView: Encodable, Sendable {
    var consented: Bool
    var textVersion: String
    var answeredAt: Date
    var recordedAt: Date

    init(_ record: ConsentRecord) {
        consented = record.answer.consented
        textVersion = record.answer.textVersion
        answeredAt = record.answer.answeredAt
        recordedAt = record.recordedAt
    }
}

/// `JobProblem`: a job's error as a problem document, with the worker's `message` kept for
/// one release.
struct JobProblemAnswer: Encodable, Sendable {
    var problem: Problem

    /// - Parameter error: The job's stored error, `{code, message}` as the worker wrote it.
    init(_ error: JSONValue) {
        let code = error["code"]?.stringValue.map(ErrorCode.init(rawValue:)) ?? .internalError
        problem = Problem(code, error["message"]?.stringValue ?? "")
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Problem.CodingKeys.self)
        try problem.encodeMembers(into: &container)
        try container.encode(problem.detail, forKey: .message)
    }
}

/// `Job`: `GET /v1/jobs/{id}`.
struct JobAnswer: Encodable, Sendable {
    var jobId: JobID
    var type: String
    var status: String
    var attempts: Int
    var createdAt: Date
    var finishedAt: Date?
    var error: JobProblemAnswer?
    /// What the worker wrote, as it wrote it (`JobResult` lets workers add members).
    var result: JSONValue?

    init(_ view: GatewayStore.JobView, jobID: JobID) {
        jobId = jobID
        type = view.kind
        status = view.progress.status
        attempts = view.progress.attempts
        createdAt = view.createdAt
        finishedAt = view.progress.finishedAt
        error = view.progress.error.map(JobProblemAnswer.init)
        result = view.progress.result
    }
}

/// `POST /v1/app-store/notifications`' answer: the job that handles the notification.
struct NotificationAcceptedAnswer: Encodable, Sendable {
    var jobId: JobID
}

/// `Child`.
struct ChildAnswer: Encodable, Sendable {
    var childProfileId: ChildID
    /// `childProfileId` under its old name, answered for one release.
    var childId: ChildID
    var name: String
    var timeZone: String
    var createdAt: Date

    init(_ child: StoryStore.Child) {
        childProfileId = ChildID(child.id)
        childId = ChildID(child.id)
        name = child.name
        timeZone = child.timeZone
        createdAt = child.createdAt
    }
}

/// `Achievement`.
struct AchievementAnswer: Encodable, Sendable {
    var achievementId: AchievementID
    var ruleKey: String
    var name: String
    var description: String
    var type: String
    var icon: String
    var progress: Double
    var earned: Bool
    var earnedAt: Date?
    var storyId: StoryID?

    init(_ achievement: StoryStore.Achievement) {
        achievementId = AchievementID(achievement.id)
        ruleKey = achievement.ruleKey
        name = achievement.name
        description = achievement.description
        type = achievement.type
        icon = achievement.icon
        progress = achievement.progress
        earned = achievement.earnedAt != nil
        earnedAt = achievement.earnedAt
        storyId = achievement.storyID.map(StoryID.init)
    }
}

/// `GET /v1/children/{id}/achievements`' answer.
struct ChildAchievementsAnswer: Encodable, Sendable {
    var childProfileId: ChildID
    /// `childProfileId` under its old name, answered for one release.
    var childId: ChildID
    var items: [AchievementAnswer]
}

/// `StorySummary` (lists) and `Story` (with `pages`).
struct StoryAnswer: Encodable, Sendable {
    struct Page: Encodable, Sendable {
        var number: Int
        var text: String
        var illustrationStatus: String
        /// The picture's path, once it is drawn.
        var image: String?
    }

    var storyId: StoryID
    var childProfileId: ChildID?
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
    var pages: [Page]?

    /// - Parameter pages: The story's pages for `Story`; nil for a list's `StorySummary`.
    init(_ story: StoryStore.StorySummary, pages: [StoryStore.StoryPage]? = nil) {
        storyId = StoryID(story.id)
        childProfileId = story.childProfileID.map(ChildID.init)
        title = story.title
        childName = story.childName
        ageGroup = story.ageGroup
        theme = story.theme
        mainCharacter = story.mainCharacter
        language = story.language
        readCount = story.readCount
        lastReadAt = story.lastReadAt
        isFavorite = story.isFavorite
        createdAt = story.createdAt
        let storyID = storyId
        self.pages = pages?.map { page in
            Page(
                number: page.number,
                text: page.text,
                illustrationStatus: page.illustrationStatus,
                image: page.illustrationStatus == "generated"
                    ? "/v1/stories/\(storyID)/pages/\(page.number)/image" : nil
            )
        }
    }
}

extension GatewayRoutes {
    /// The encoder of every JSON answer: ISO 8601 dates as the rest of the contract writes them,
    /// sorted keys (answers are byte-stable, which the idempotency replays and caches rely on).
    static let answerEncoder: JSONEncoder = JSONCoding.encoder

    /// A JSON answer of one of the answer types.
    /// - Throws: `EncodingError` only for a non-finite number, which no stored value holds.
    static func respond(_ answer: some Encodable, status: HTTPResponse.Status) throws -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: try answerEncoder.encode(answer)))
        )
    }
}
