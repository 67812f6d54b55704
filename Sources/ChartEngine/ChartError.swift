import AstroDomain
import Ephemeris

/// Why a chart could not be computed: the input broke a rule (the `ChartInputError`, with its
/// code and field), or the ephemeris could not answer.
public enum ChartError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The input is at fault: permanent, with the input's own code, field and message.
    case invalidInput(ChartInputError)
    /// `ephemeris-unavailable`: the Swiss Ephemeris files are missing or libswe fell back to the
    /// Moshier ephemeris, a deployment problem a retry after a fix can pass.
    case ephemerisUnavailable(message: String)
    /// `calculation-failed`: libswe reported an error, or answered with something unusable, for
    /// this instant and place; the same input fails again.
    case calculationFailed(message: String)

    /// The code of `ephemerisUnavailable`, as `chart.failed` events carry it.
    public static let ephemerisUnavailableCode = ErrorCode.ephemerisUnavailable.rawValue
    /// The code of `calculationFailed`, as `chart.failed` events carry it.
    public static let calculationFailedCode = ErrorCode.calculationFailed.rawValue

    /// An ephemeris failure: missing files and the Moshier fallback are `ephemeris-unavailable`;
    /// libswe errors and rejected arguments are `calculation-failed`.
    public init(_ error: EphemerisError) {
        switch error.kind {
        case .filesMissing, .moshierFallback: self = .ephemerisUnavailable(message: error.message)
        case .calculationFailed, .invalidInput: self = .calculationFailed(message: error.message)
        }
    }

    /// The stable code `chart.failed` events carry.
    public var code: String {
        switch self {
        case .invalidInput(let input): return input.code.rawValue
        case .ephemerisUnavailable: return Self.ephemerisUnavailableCode
        case .calculationFailed: return Self.calculationFailedCode
        }
    }

    /// The input's code when the input is at fault.
    public var inputCode: ChartInputError.Code? {
        if case .invalidInput(let input) = self { return input.code }
        return nil
    }

    /// The offending input field as a path in the `chart.calculate` body (`profile.birthTime`);
    /// `nil` when the input is not at fault.
    public var field: String? {
        if case .invalidInput(let input) = self { return input.field }
        return nil
    }

    /// What went wrong, naming the field and the rule when the input is at fault.
    public var message: String {
        switch self {
        case .invalidInput(let input): return input.message
        case .ephemerisUnavailable(let message), .calculationFailed(let message): return message
        }
    }

    /// Whether the same input would fail the same way again (dead-letter at once), as opposed to
    /// a failure of the deployment that a retry after a fix could pass.
    public var isPermanent: Bool {
        if case .ephemerisUnavailable = self { return false }
        return true
    }

    /// The error as a job error, for `chart.failed` events and dead letters.
    public var jobError: JobError { JobError(code: code, message: message) }

    public var description: String { "\(code): \(message)" }
}
