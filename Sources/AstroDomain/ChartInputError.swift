/// Why a chart request or its birth data was refused: a stable `code`, the `field` at fault as a
/// path in the `chart.calculate` body (`profile.latitude`, `houseSystem`), and a message naming
/// the field and the rule, e.g. `profile.latitude: 95.0 is outside −90…90`.
///
/// Every one of these is permanent: the same input fails the same way, so a job that fails with
/// one is dead-lettered, never retried.
public struct ChartInputError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable machine-readable codes; clients switch on the raw values.
    public enum Code: String, Sendable, Hashable, Codable, CaseIterable {
        /// The body is not a JSON object.
        case invalidJSON = "invalid-json"
        /// A required field is absent (or `null`).
        case missingField = "missing-field"
        /// A field has the wrong JSON type (a string where a number is expected, ...).
        case invalidFieldType = "invalid-field-type"
        /// `jobId`, `userId` or `profile.id` is not a UUID.
        case invalidID = "invalid-id"
        /// The name is empty or longer than 50 characters after trimming.
        case invalidName = "invalid-name"
        /// The location name is longer than 200 characters.
        case invalidLocationName = "invalid-location-name"
        /// A text field holds a control character (NUL, escape, …), a line separator or a
        /// bidirectional override.
        case invalidCharacters = "invalid-characters"
        /// The birth date is not a real `yyyy-MM-dd` calendar date.
        case invalidBirthDate = "invalid-birth-date"
        /// The birth date is outside 1900-01-01 … 2100-12-31.
        case birthDateOutOfRange = "birth-date-out-of-range"
        /// The birth time is not `HH:mm` on a 24-hour clock.
        case invalidBirthTime = "invalid-birth-time"
        /// The latitude is outside −90…90 (or not a finite number).
        case latitudeOutOfRange = "latitude-out-of-range"
        /// The longitude is outside −180…180 (or not a finite number).
        case longitudeOutOfRange = "longitude-out-of-range"
        /// The time zone is not an IANA identifier known to the time zone database.
        case unknownTimezone = "unknown-timezone"
        /// The house system is not one of the seven supported.
        case unknownHouseSystem = "unknown-house-system"
        /// `dstPolicy` is neither `earlier` nor `later`.
        case invalidDSTPolicy = "invalid-dst-policy"
        /// A requested point is not one of `MeanNode`, `TrueNode`, `Chiron`, `MeanLilith`.
        case unknownPoint = "unknown-point"
        /// `sidereal` names no supported ayanamsa.
        case unknownAyanamsa = "unknown-ayanamsa"
        /// The local birth time falls in a clock change gap and no `dstPolicy` was given.
        case nonexistentLocalTime = "nonexistent-local-time"
        /// The local birth time happened twice (clocks went back) and no `dstPolicy` was given.
        case ambiguousLocalTime = "ambiguous-local-time"
    }

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
    public var jobError: JobError { JobError(code: code.rawValue, message: message) }

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
