import Foundation

/// The body of `user.delete`: erase the user's personal data; keep the money records detached
/// from the person (CONTRACT.md, "User deletion").
public struct UserDeleteRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var userID: UserID

    public init(jobID: JobID, userID: UserID) {
        self.jobID = jobID
        self.userID = userID
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case userID = "userId"
    }

    /// The JSON body.
    /// - Throws: `EncodingError` (not expected for these members).
    public func jsonData() throws -> Data { try JSONCoding.encoder.encode(self) }
}

/// The body of `story.erase-illustrations`: remove the stored illustration files of stories that
/// a `user.delete` erased. Only stories whose rows are gone are touched.
public struct EraseIllustrationsRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var userID: UserID
    /// At most `maxStories`.
    public var storyIDs: [StoryID]

    /// The most stories one job names; a deletion of more publishes several jobs.
    public static let maxStories = 500

    public init(jobID: JobID, userID: UserID, storyIDs: [StoryID]) {
        self.jobID = jobID
        self.userID = userID
        self.storyIDs = storyIDs
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case userID = "userId"
        case storyIDs = "storyIds"
    }

    /// The JSON body.
    /// - Throws: `EncodingError` (not expected for these members).
    public func jsonData() throws -> Data { try JSONCoding.encoder.encode(self) }
}

/// The vocabulary of user deletion shared by the workers, the gateway and astroctl.
public enum UserDeletion {
    /// The error code of a job refused because its user is deleted (or being deleted): permanent,
    /// recorded as the job's failure and in its `<type>.failed` event; the gateway answers a
    /// deleted user's access token with it (401).
    public static let refusedCode = ErrorCode.userDeleted.rawValue

    /// The job types that still run for a user being deleted: the deletion itself and its
    /// follow-up. Every other job naming the user is refused with `refusedCode`.
    public static let servesDeletedUsers: Set<JobType> = [.userDelete, .storyEraseIllustrations]
}
