import Foundation

/// The themes a story may have (`theme` of `story.generate`): the story knowledge base of every
/// language has exactly these (checked when it loads), openapi.yaml lists them (checked by a
/// test), and the gateway refuses another before anything is queued.
public enum StoryThemes {
    public static let keys: [String] = [
        "courage", "curiosity", "feelings", "friendship", "honesty", "kindness", "perseverance", "sharing",
    ]
}

/// The body of `story.generate`: write a story for a child and store it with its pages, each
/// page's illustration `notStarted`.
///
/// The child is named by `childProfileId` (a profile of the user) or by `childName`; a name the
/// user has no profile for yet gets one, in `timeZone` (UTC when absent), so readings can be
/// counted in the child's days.
public struct StoryGenerateRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var userID: UserID
    public var childProfileID: ChildID?
    public var childName: String?
    /// IANA zone of a child profile created by this job; ignored for an existing profile.
    public var timeZone: String?
    /// 0 preschool (3–5), 1 elementary (6–8), 2 preteen (9–10).
    public var ageGroup: Int
    public var theme: String
    public var mainCharacter: String
    public var language: ReportLanguage
    /// 3…9; the age group's default when absent.
    public var pageCount: Int?
    /// A collection of the user's to add the story to.
    public var collectionID: CollectionID?

    public init(
        jobID: JobID,
        userID: UserID,
        childProfileID: ChildID? = nil,
        childName: String? = nil,
        timeZone: String? = nil,
        ageGroup: Int,
        theme: String,
        mainCharacter: String,
        language: ReportLanguage,
        pageCount: Int? = nil,
        collectionID: CollectionID? = nil
    ) {
        self.jobID = jobID
        self.userID = userID
        self.childProfileID = childProfileID
        self.childName = childName
        self.timeZone = timeZone
        self.ageGroup = ageGroup
        self.theme = theme
        self.mainCharacter = mainCharacter
        self.language = language
        self.pageCount = pageCount
        self.collectionID = collectionID
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case userID = "userId"
        case childProfileID = "childProfileId"
        case childName, timeZone, ageGroup, theme, mainCharacter, language, pageCount
        case collectionID = "collectionId"
    }

    /// The stored story's id: derived from the job's, so a replayed job names the same story.
    public var storyID: StoryID { StoryID(JobID.derived(from: jobID, purpose: "story").uuid) }

    // Members in the order of CodingKeys, as the synthesized coding read them: a body with several
    // faults is refused for the same one as before.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        jobID = try container.decode(JobID.self, forKey: .jobID)
        userID = try container.decode(UserID.self, forKey: .userID)
        childProfileID = try container.decodeStoryIDIfPresent(ChildID.self, forKey: .childProfileID)
        childName = try container.decodeIfPresent(String.self, forKey: .childName)
        timeZone = try container.decodeIfPresent(String.self, forKey: .timeZone)
        ageGroup = try container.decode(Int.self, forKey: .ageGroup)
        theme = try container.decode(String.self, forKey: .theme)
        mainCharacter = try container.decode(String.self, forKey: .mainCharacter)
        language = try container.decode(ReportLanguage.self, forKey: .language)
        pageCount = try container.decodeIfPresent(Int.self, forKey: .pageCount)
        collectionID = try container.decodeStoryIDIfPresent(CollectionID.self, forKey: .collectionID)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(jobID, forKey: .jobID)
        try container.encode(userID, forKey: .userID)
        try container.encodeStoryIDIfPresent(childProfileID, forKey: .childProfileID)
        try container.encodeIfPresent(childName, forKey: .childName)
        try container.encodeIfPresent(timeZone, forKey: .timeZone)
        try container.encode(ageGroup, forKey: .ageGroup)
        try container.encode(theme, forKey: .theme)
        try container.encode(mainCharacter, forKey: .mainCharacter)
        try container.encode(language, forKey: .language)
        try container.encodeIfPresent(pageCount, forKey: .pageCount)
        try container.encodeStoryIDIfPresent(collectionID, forKey: .collectionID)
    }
}

/// The body of `story.illustrate`: illustrate a story's pages in order.
///
/// Without `pages`, every page not yet `generated` is illustrated (a page another job is drawing
/// right now is left to it). With `pages`, those of them that are not `generated` are drawn —
/// how one failed page is retried without redoing the others; `force` redraws them even when
/// they are. The story must belong to `userId` (`story-not-found` otherwise).
public struct StoryIllustrateRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var userID: UserID
    public var storyID: StoryID
    public var pages: [Int]?
    /// With `pages`: redraw them even if they already have a picture.
    public var force: Bool?

    public init(jobID: JobID, userID: UserID, storyID: StoryID, pages: [Int]? = nil, force: Bool? = nil) {
        self.jobID = jobID
        self.userID = userID
        self.storyID = storyID
        self.pages = pages
        self.force = force
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case userID = "userId"
        case storyID = "storyId"
        case pages, force
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        jobID = try container.decode(JobID.self, forKey: .jobID)
        userID = try container.decode(UserID.self, forKey: .userID)
        storyID = try container.decodeStoryID(StoryID.self, forKey: .storyID)
        pages = try container.decodeIfPresent([Int].self, forKey: .pages)
        force = try container.decodeIfPresent(Bool.self, forKey: .force)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(jobID, forKey: .jobID)
        try container.encode(userID, forKey: .userID)
        try container.encodeStoryID(storyID, forKey: .storyID)
        try container.encodeIfPresent(pages, forKey: .pages)
        try container.encodeIfPresent(force, forKey: .force)
    }
}

/// The body of `story.read`: a child finished reading a story at `at` (now when absent). The
/// story must belong to `userId` (`story-not-found` otherwise).
public struct StoryReadRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var userID: UserID
    public var storyID: StoryID
    /// The reader; the story's own child when absent.
    public var childProfileID: ChildID?
    public var at: Date?

    public init(jobID: JobID, userID: UserID, storyID: StoryID, childProfileID: ChildID? = nil, at: Date? = nil) {
        self.jobID = jobID
        self.userID = userID
        self.storyID = storyID
        self.childProfileID = childProfileID
        self.at = at
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case userID = "userId"
        case storyID = "storyId"
        case childProfileID = "childProfileId"
        case at
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        jobID = try container.decode(JobID.self, forKey: .jobID)
        userID = try container.decode(UserID.self, forKey: .userID)
        storyID = try container.decodeStoryID(StoryID.self, forKey: .storyID)
        childProfileID = try container.decodeStoryIDIfPresent(ChildID.self, forKey: .childProfileID)
        at = try container.decodeIfPresent(Date.self, forKey: .at)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(jobID, forKey: .jobID)
        try container.encode(userID, forKey: .userID)
        try container.encodeStoryID(storyID, forKey: .storyID)
        try container.encodeStoryIDIfPresent(childProfileID, forKey: .childProfileID)
        try container.encodeIfPresent(at, forKey: .at)
    }
}

// The story bodies' own ids (`storyId`, `childProfileId`, `collectionId`) were Foundation `UUID`s
// before they were typed, and are still read and written as Foundation codes a `UUID`: written in
// upper case (a `TypedID` writes lower case), and a malformed one refused with Foundation's
// message. So the bodies astroctl publishes and the errors a bad id gets stay as they were.
extension KeyedDecodingContainer {
    fileprivate func decodeStoryID<ID: TypedID>(_ type: ID.Type, forKey key: Key) throws -> ID {
        ID(try decode(UUID.self, forKey: key))
    }

    fileprivate func decodeStoryIDIfPresent<ID: TypedID>(_ type: ID.Type, forKey key: Key) throws -> ID? {
        try decodeIfPresent(UUID.self, forKey: key).map { ID($0) }
    }
}

extension KeyedEncodingContainer {
    fileprivate mutating func encodeStoryID<ID: TypedID>(_ id: ID, forKey key: Key) throws {
        try encode(id.uuid, forKey: key)
    }

    fileprivate mutating func encodeStoryIDIfPresent<ID: TypedID>(_ id: ID?, forKey key: Key) throws {
        try encodeIfPresent(id?.uuid, forKey: key)
    }
}
