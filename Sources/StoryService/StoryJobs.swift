import AstroDomain
import Foundation

/// The body of `story.generate`: write a story for a child and store it with its pages, each
/// page's illustration `notStarted`.
///
/// The child is named by `childProfileId` (a profile of the user) or by `childName`; a name the
/// user has no profile for yet gets one, in `timeZone` (UTC when absent), so readings can be
/// counted in the child's days.
public struct StoryGenerateRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var userID: UserID
    public var childProfileID: UUID?
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
    public var collectionID: UUID?

    public init(
        jobID: JobID,
        userID: UserID,
        childProfileID: UUID? = nil,
        childName: String? = nil,
        timeZone: String? = nil,
        ageGroup: Int,
        theme: String,
        mainCharacter: String,
        language: ReportLanguage,
        pageCount: Int? = nil,
        collectionID: UUID? = nil
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
    public var storyID: UUID { JobID.derived(from: jobID, purpose: "story").uuid }
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
    public var storyID: UUID
    public var pages: [Int]?
    /// With `pages`: redraw them even if they already have a picture.
    public var force: Bool?

    public init(jobID: JobID, userID: UserID, storyID: UUID, pages: [Int]? = nil, force: Bool? = nil) {
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
}

/// The body of `story.read`: a child finished reading a story at `at` (now when absent). The
/// story must belong to `userId` (`story-not-found` otherwise).
public struct StoryReadRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var userID: UserID
    public var storyID: UUID
    /// The reader; the story's own child when absent.
    public var childProfileID: UUID?
    public var at: Date?

    public init(jobID: JobID, userID: UserID, storyID: UUID, childProfileID: UUID? = nil, at: Date? = nil) {
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
}
