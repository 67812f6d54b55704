import AstroDomain
import Ephemeris

/// Why a chart could not be computed: a stable `code`, the input `field` at fault (when the input
/// is at fault) and a message naming the field and the rule.
public struct ChartError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable codes; the raw values are what `chart.failed` events carry.
    public enum Code: String, Sendable, Hashable, CaseIterable {
        case invalidJSON = "invalid-json"
        case missingField = "missing-field"
        case invalidFieldType = "invalid-field-type"
        case invalidID = "invalid-id"
        case invalidName = "invalid-name"
        case invalidLocationName = "invalid-location-name"
        case invalidCharacters = "invalid-characters"
        case invalidBirthDate = "invalid-birth-date"
        case birthDateOutOfRange = "birth-date-out-of-range"
        case invalidBirthTime = "invalid-birth-time"
        case latitudeOutOfRange = "latitude-out-of-range"
        case longitudeOutOfRange = "longitude-out-of-range"
        case unknownTimezone = "unknown-timezone"
        case unknownHouseSystem = "unknown-house-system"
        case invalidDSTPolicy = "invalid-dst-policy"
        case unknownPoint = "unknown-point"
        case unknownAyanamsa = "unknown-ayanamsa"
        /// The local birth time falls in a DST gap and no `dstPolicy` was given.
        case nonexistentLocalTime = "nonexistent-local-time"
        /// The local birth time happened twice and no `dstPolicy` was given.
        case ambiguousLocalTime = "ambiguous-local-time"
        /// The Swiss Ephemeris files are missing or libswe fell back to the Moshier ephemeris: a
        /// deployment problem, not the input's.
        case ephemerisUnavailable = "ephemeris-unavailable"
        /// libswe reported an error for this computation.
        case calculationFailed = "calculation-failed"
    }

    public var code: Code
    /// The offending input field as a path in the `chart.calculate` body (`profile.birthTime`);
    /// `nil` when the input is not at fault.
    public var field: String?
    public var message: String
    /// Whether the same input would fail the same way again (dead-letter at once), as opposed to
    /// a failure of the deployment that a retry after a fix could pass.
    public var isPermanent: Bool

    public init(_ code: Code, field: String? = nil, message: String, isPermanent: Bool) {
        self.code = code
        self.field = field
        self.message = message
        self.isPermanent = isPermanent
    }

    /// A validation failure: permanent, with the input's code and field.
    public init(_ input: ChartInputError) {
        // Every ChartInputError code has a ChartError code of the same raw value (tested).
        let code = Code(rawValue: input.code.rawValue) ?? .calculationFailed
        self.init(code, field: input.field, message: input.message, isPermanent: true)
    }

    /// An ephemeris failure: missing files and the Moshier fallback are `ephemeris-unavailable`
    /// (not permanent); libswe errors and rejected arguments are `calculation-failed` (permanent:
    /// the same instant and place fail again).
    public init(_ error: EphemerisError) {
        switch error.kind {
        case .filesMissing, .moshierFallback:
            self.init(.ephemerisUnavailable, message: error.message, isPermanent: false)
        case .calculationFailed:
            self.init(.calculationFailed, message: error.message, isPermanent: true)
        case .invalidInput:
            self.init(.calculationFailed, message: error.message, isPermanent: true)
        }
    }

    /// The error as a job error, for `chart.failed` events and dead letters.
    public var jobError: JobError { JobError(code: code.rawValue, message: message) }

    public var description: String { "\(code.rawValue): \(message)" }
}
