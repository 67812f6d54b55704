/// A sign of the zodiac: a 30° slice of the ecliptic, starting with Aries at 0°.
///
/// Raw values are the seed enum's (`"Aries"` … `"Pisces"`), as they appear in the NatalChart JSON.
public enum ZodiacSign: String, Sendable, Hashable, Codable, CaseIterable {
    case aries = "Aries"
    case taurus = "Taurus"
    case gemini = "Gemini"
    case cancer = "Cancer"
    case leo = "Leo"
    case virgo = "Virgo"
    case libra = "Libra"
    case scorpio = "Scorpio"
    case sagittarius = "Sagittarius"
    case capricorn = "Capricorn"
    case aquarius = "Aquarius"
    case pisces = "Pisces"

    /// The classical element of a sign.
    public enum Element: String, Sendable, Hashable, Codable, CaseIterable {
        case fire, earth, air, water
    }

    /// The modality (quadruplicity) of a sign.
    public enum Modality: String, Sendable, Hashable, Codable, CaseIterable {
        case cardinal, fixed, mutable
    }

    /// The sign that holds an ecliptic longitude; any finite angle is first reduced to [0, 360),
    /// and a longitude exactly on a boundary belongs to the sign that starts there (30° is Taurus).
    /// A non-finite longitude gives Aries.
    public init(longitude: Double) {
        let index = Int((ChartMath.normalizedDegrees(longitude) / 30).rounded(.down))
        self = Self.allCases[min(max(index, 0), 11)]
    }

    /// Where the sign starts on the ecliptic, in degrees (Aries 0, Taurus 30, … Pisces 330).
    public var startLongitude: Double { Double(Self.allCases.firstIndex(of: self)!) * 30 }

    /// Fire, earth, air or water, repeating in that order from Aries.
    public var element: Element {
        switch self {
        case .aries, .leo, .sagittarius: .fire
        case .taurus, .virgo, .capricorn: .earth
        case .gemini, .libra, .aquarius: .air
        case .cancer, .scorpio, .pisces: .water
        }
    }

    /// Cardinal, fixed or mutable, repeating in that order from Aries.
    public var modality: Modality {
        switch self {
        case .aries, .cancer, .libra, .capricorn: .cardinal
        case .taurus, .leo, .scorpio, .aquarius: .fixed
        case .gemini, .virgo, .sagittarius, .pisces: .mutable
        }
    }
}
