import AstroDomain

/// Why a chart for two people could not be computed. Every case but `chart` of an
/// `ephemeris-unavailable` error is permanent: the same two charts fail the same way.
public enum RelationshipChartError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `zodiac-mismatch`: one chart is tropical and the other sidereal (or another ayanamsa).
    case zodiacMismatch(String)
    /// `unsupported-zodiac`: composite houses are cast in the tropical zodiac only.
    case unsupportedZodiac(String)
    /// `antipodal-places`: the two birthplaces are antipodes, so the great-circle midpoint of a
    /// Davison chart is undefined.
    case antipodalPlaces(String)
    /// `invalid-option`: an option is out of its range (`angleMaxOrb`).
    case invalidOption(String)
    /// `invalid-chart`: a chart lacks what the computation needs (twelve cusps, ten planets).
    case invalidChart(String)
    /// The ephemeris failed (its `ChartError` code).
    case chart(ChartError)

    /// The stable code.
    public var code: String {
        switch self {
        case .zodiacMismatch: ErrorCode.zodiacMismatch.rawValue
        case .unsupportedZodiac: ErrorCode.unsupportedZodiac.rawValue
        case .antipodalPlaces: ErrorCode.antipodalPlaces.rawValue
        case .invalidOption: ErrorCode.invalidOption.rawValue
        case .invalidChart: ErrorCode.invalidChart.rawValue
        case .chart(let error): error.code
        }
    }

    /// What went wrong.
    public var message: String {
        switch self {
        case .zodiacMismatch(let text), .unsupportedZodiac(let text), .antipodalPlaces(let text),
            .invalidOption(let text), .invalidChart(let text):
            text
        case .chart(let error): error.message
        }
    }

    /// Whether the same input fails again (dead-letter), as opposed to a deployment problem.
    public var isPermanent: Bool {
        if case .chart(let error) = self { return error.isPermanent }
        return true
    }

    public var description: String { "\(code): \(message)" }
}
