/// Which zodiac longitudes are measured in: tropical (from the vernal equinox, the contract's
/// default) or sidereal (from a fixed star frame, shifted by an ayanamsa).
///
/// Its JSON form is a string: `"tropical"`, or `"sidereal:"` followed by the ayanamsa's raw value
/// (`"sidereal:lahiri"`, `"sidereal:faganBradley"`, `"sidereal:raman"`).
public enum ZodiacSystem: Sendable, Hashable, Codable, CustomStringConvertible {
    case tropical
    case sidereal(Ayanamsa)

    /// The offset between the tropical and a sidereal zodiac, by the convention it is named for.
    public enum Ayanamsa: String, Sendable, Hashable, Codable, CaseIterable {
        case lahiri
        case faganBradley
        case raman
    }

    /// Parses `"tropical"` or `"sidereal:<ayanamsa>"`; `nil` for anything else.
    public init?(rawValue: String) {
        if rawValue == "tropical" {
            self = .tropical
            return
        }
        let prefix = "sidereal:"
        guard rawValue.hasPrefix(prefix), let ayanamsa = Ayanamsa(rawValue: String(rawValue.dropFirst(prefix.count)))
        else { return nil }
        self = .sidereal(ayanamsa)
    }

    /// `"tropical"` or `"sidereal:<ayanamsa>"`.
    public var rawValue: String {
        switch self {
        case .tropical: "tropical"
        case .sidereal(let ayanamsa): "sidereal:" + ayanamsa.rawValue
        }
    }

    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = Self(rawValue: text) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "expected \"tropical\" or \"sidereal:<ayanamsa>\", got \(InputQuote.short(text))"
            )
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
