/// Why a chart request or its birth data was refused: a stable `code`, the `field` at fault as a
/// path in the `chart.calculate` body (`profile.latitude`, `houseSystem`), and a message naming
/// the field and the rule, e.g. `profile.latitude: 95.0 is outside −90…90`.
///
/// Every one of these is permanent: the same input fails the same way, so a job that fails with
/// one is dead-lettered, never retried.
public struct ChartInputError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The codes of a refused chart request: catalogue members (`ErrorCode.chartInputCodes`).
    public typealias Code = ErrorCode

    public var code: Code
    /// The offending field as a path in the `chart.calculate` body, e.g. `profile.birthDate`.
    public var field: String
    /// What is wrong, naming the field and the rule.
    public var message: String

    public init(_ code: Code, field: String, message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    /// The error as a job error, for `chart.failed` events and dead letters.
    public var jobError: JobError { JobError(code: code, message: message) }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// Field paths of the `chart.calculate` body, defined once so messages and tests agree.
public enum ChartField {
    public static let jobID = "jobId"
    public static let userID = "userId"
    public static let profile = "profile"
    public static let profileID = "profile.id"
    public static let name = "profile.name"
    public static let birthDate = "profile.birthDate"
    public static let birthTime = "profile.birthTime"
    public static let timezone = "profile.timezone"
    public static let latitude = "profile.latitude"
    public static let longitude = "profile.longitude"
    public static let locationName = "profile.locationName"
    public static let houseSystem = "houseSystem"
    public static let dstPolicy = "dstPolicy"
    public static let points = "points"
    public static let sidereal = "sidereal"
}

extension ErrorCode {
    /// The codes a `ChartInputError` has, in the order of CONTRACT.md's `chart.calculate` row.
    public static let chartInputCodes: [ErrorCode] = [
        .invalidJSON, .missingField, .invalidFieldType, .invalidID, .invalidName, .invalidLocationName,
        .invalidCharacters, .invalidBirthDate, .birthDateOutOfRange, .invalidBirthTime, .latitudeOutOfRange,
        .longitudeOutOfRange, .unknownTimezone, .unknownHouseSystem, .invalidDSTPolicy, .unknownPoint,
        .unknownAyanamsa, .nonexistentLocalTime, .ambiguousLocalTime,
    ]
}
