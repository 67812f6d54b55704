import Foundation
import UUIDText

/// A typed identifier: a UUID that knows what it identifies, so a user id can never be
/// passed where a job id is expected. Encoded as the UUID's lowercase string.
public protocol TypedID: Hashable, Sendable, Codable, CustomStringConvertible, LosslessStringConvertible {
    var uuid: UUID { get }
    init(_ uuid: UUID)
}

extension TypedID {
    /// A new random identifier.
    public static func random() -> Self { Self(UUID()) }

    /// Parses a UUID string (any case); `nil` when it is not a UUID.
    public init?(_ description: String) {
        guard let uuid = UUID(text: description) else { return nil }
        self.init(uuid)
    }

    public var description: String { uuid.lowercasedText }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let uuid = UUID(text: text) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "expected a UUID string, got \(InputQuote.short(text))"
            )
        }
        self.init(uuid)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// The idempotency key of a job: the same `JobID` processed twice has the effect of once.
public struct JobID: TypedID {
    public let uuid: UUID
    public init(_ uuid: UUID) { self.uuid = uuid }
}

/// An app user (anonymous device user in the seed model).
public struct UserID: TypedID {
    public let uuid: UUID
    public init(_ uuid: UUID) { self.uuid = uuid }
}

/// A birth profile of a user (a person whose chart is computed).
public struct ProfileID: TypedID {
    public let uuid: UUID
    public init(_ uuid: UUID) { self.uuid = uuid }
}

extension ProfileID {
    /// The id of the profile a `chart.calculate` job without `profile.id` creates: derived from
    /// the job's id, so the gateway can name the new profile in its 202 before the chart-worker
    /// has written it, and a replayed job names the same profile.
    public static func created(by jobID: JobID) -> ProfileID {
        ProfileID(JobID.derived(from: jobID, purpose: "profile").uuid)
    }
}

/// A stored natal chart (`birth_charts.id`; `chartId` of `chart.calculated`).
public struct ChartID: TypedID {
    public let uuid: UUID
    public init(_ uuid: UUID) { self.uuid = uuid }
}

/// A consumable credit's identifier (`purchase_credits.id`).
public struct CreditID: TypedID {
    public let uuid: UUID
    public init(_ uuid: UUID) { self.uuid = uuid }
}

/// A written report's identifier (`report_purchases.id`).
public struct ReportID: TypedID {
    public let uuid: UUID
    public init(_ uuid: UUID) { self.uuid = uuid }
}

/// A Magical Stories story (`stories.stories.id`; `storyId` of the story jobs and events).
public struct StoryID: TypedID {
    public let uuid: UUID
    public init(_ uuid: UUID) { self.uuid = uuid }
}

/// A child's profile in Magical Stories (`stories.child_profiles.id`; `childProfileId` on the
/// wire). Not a `ProfileID`: a child profile is no birth profile, and the two live in different
/// tables.
public struct ChildID: TypedID {
    public let uuid: UUID
    public init(_ uuid: UUID) { self.uuid = uuid }
}

/// A user's collection of stories (`stories.collections.id`; `collectionId` on the wire).
public struct CollectionID: TypedID {
    public let uuid: UUID
    public init(_ uuid: UUID) { self.uuid = uuid }
}

/// An achievement a child earned (`stories.achievements.id`; `achievementId` of `achievement.earned`).
public struct AchievementID: TypedID {
    public let uuid: UUID
    public init(_ uuid: UUID) { self.uuid = uuid }
}
