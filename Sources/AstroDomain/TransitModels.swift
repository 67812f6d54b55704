import Foundation

/// A natal point a transit can aspect: one of the ten planets, or an angle.
///
/// Encoded as its name: `"Sun"`…`"Pluto"`, `"ASC"`, `"MC"`.
public enum NatalTransitPoint: Sendable, Hashable, Codable, CustomStringConvertible {
    case planet(PlanetName)
    case ascendant
    case midheaven

    /// The planets in Sun…Pluto order, then ASC and MC: the order of transit lists.
    public static let all: [NatalTransitPoint] = PlanetName.allCases.map { .planet($0) } + [.ascendant, .midheaven]

    /// `"Sun"`…`"Pluto"`, `"ASC"`, `"MC"`.
    public var description: String {
        switch self {
        case .planet(let name): name.rawValue
        case .ascendant: "ASC"
        case .midheaven: "MC"
        }
    }

    /// The point named `text`, if any.
    public init?(name text: String) {
        switch text {
        case "ASC": self = .ascendant
        case "MC": self = .midheaven
        default:
            guard let planet = PlanetName(rawValue: text) else { return nil }
            self = .planet(planet)
        }
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let point = NatalTransitPoint(name: text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "unknown natal point '\(text)'")
            )
        }
        self = point
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// One moment a transiting planet is exactly at an aspect's angle to a natal point.
public struct TransitHit: Sendable, Hashable, Codable {
    /// The instant of exactness (UTC; found to well under a minute).
    public var exact: Date
    /// Whether the transiting planet moves backwards at that instant.
    public var isRetrograde: Bool

    public init(exact: Date, isRetrograde: Bool) {
        self.exact = exact
        self.isRetrograde = isRetrograde
    }
}

/// One transit: a transiting planet within orb of one aspect to one natal point, from entering
/// the orb to leaving it, with every exact hit inside (one, or up to three when a retrograde
/// loop passes the point back and forth; more only for the slowest planets' long stations).
///
/// The exact hits listed are those inside the requested range; the orb window is searched a
/// bounded margin beyond the range (`TransitSearch` in CONTRACT.md), and `entersOrb` /
/// `leavesOrb` are `nil` when it lies beyond that margin.
public struct Transit: Sendable, Hashable, Codable {
    /// The moving planet.
    public var transiting: PlanetName
    /// The natal planet or angle.
    public var natal: NatalTransitPoint
    public var aspect: AspectType
    /// The exact angle this transit measures: 0, 60, 90, 120, 180, 240, 270 or 300 degrees,
    /// transiting longitude minus natal longitude (so the two sextiles, squares and trines of a
    /// natal point are told apart).
    public var angle: Double
    /// The orb used for the window, in degrees.
    public var orb: Double
    /// When the separation first came within `orb` of `angle`.
    public var entersOrb: Date?
    /// When it last left the orb.
    public var leavesOrb: Date?
    /// The exact hits in the range, in time order; never empty.
    public var hits: [TransitHit]

    public init(
        transiting: PlanetName,
        natal: NatalTransitPoint,
        aspect: AspectType,
        angle: Double,
        orb: Double,
        entersOrb: Date?,
        leavesOrb: Date?,
        hits: [TransitHit]
    ) {
        self.transiting = transiting
        self.natal = natal
        self.aspect = aspect
        self.angle = angle
        self.orb = orb
        self.entersOrb = entersOrb
        self.leavesOrb = leavesOrb
        self.hits = hits
    }
}

/// A transiting planet entering a zodiac sign or a natal house.
public struct TransitIngress: Sendable, Hashable, Codable {
    /// What was entered.
    public enum Kind: String, Sendable, Hashable, Codable {
        case sign
        case house
    }

    public var planet: PlanetName
    public var kind: Kind
    /// The instant (UTC).
    public var instant: Date
    /// The sign entered (`kind == .sign`), or the sign of the planet at the instant.
    public var sign: ZodiacSign
    /// The natal house entered (`kind == .house`); `nil` for a sign ingress.
    public var house: Int?
    /// Whether the planet entered moving backwards (a retrograde re-entry).
    public var isRetrograde: Bool

    public init(planet: PlanetName, kind: Kind, instant: Date, sign: ZodiacSign, house: Int?, isRetrograde: Bool) {
        self.planet = planet
        self.kind = kind
        self.instant = instant
        self.sign = sign
        self.house = house
        self.isRetrograde = isRetrograde
    }
}

/// Every transit of Sun…Pluto to a natal chart in a UTC range: the result of a transit search.
public struct TransitReport: Sendable, Hashable, Codable {
    /// The range searched, `from` inclusive, `to` exclusive.
    public var from: Date
    public var to: Date
    /// The orb rule: `"seed"` (each AspectType's maxOrb) or a fixed orb in degrees (`"1.5"`).
    public var orbRule: String
    /// Transits ordered by their first exact hit.
    public var transits: [Transit]
    /// Sign and natal-house ingresses in the range, in time order.
    public var ingresses: [TransitIngress]
    public var engineVersion: String
    public var ephemerisVersion: String

    public init(
        from: Date,
        to: Date,
        orbRule: String,
        transits: [Transit],
        ingresses: [TransitIngress],
        engineVersion: String,
        ephemerisVersion: String
    ) {
        self.from = from
        self.to = to
        self.orbRule = orbRule
        self.transits = transits
        self.ingresses = ingresses
        self.engineVersion = engineVersion
        self.ephemerisVersion = ephemerisVersion
    }
}

/// A solar return: the instant the Sun comes back to its natal longitude, and the chart of it.
public struct SolarReturn: Sendable, Hashable, Codable {
    /// The calendar year (UTC) the return falls in.
    public var year: Int
    /// The instant (UTC; found to well under a second).
    public var instant: Date
    /// The natal Sun longitude the return repeats.
    public var natalSunLongitude: Double
    /// The chart cast for `instant` at the chosen place.
    public var chart: NatalChart

    public init(year: Int, instant: Date, natalSunLongitude: Double, chart: NatalChart) {
        self.year = year
        self.instant = instant
        self.natalSunLongitude = natalSunLongitude
        self.chart = chart
    }
}

/// A secondary-progressed chart: positions one day after birth for each year of life.
public struct ProgressedChart: Sendable, Hashable, Codable {
    /// The date the progression is for.
    public var target: Date
    /// The progressed instant: birth + (target − birth) / 365.242199 days.
    public var progressedInstant: Date
    /// The angle method, `"progressed-instant-armc"` (see CONTRACT.md).
    public var angleMethod: String
    /// The chart of the progressed instant at the birth place.
    public var chart: NatalChart

    public init(target: Date, progressedInstant: Date, angleMethod: String, chart: NatalChart) {
        self.target = target
        self.progressedInstant = progressedInstant
        self.angleMethod = angleMethod
        self.chart = chart
    }
}
