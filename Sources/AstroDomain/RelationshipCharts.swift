import Foundation

// The vocabulary of charts for two people: synastry (inter-aspects and house overlays), the
// compatibility score, and the warning codes that mark composite and Davison charts (which are
// NatalChart values). Codable as job payloads and results; see CONTRACT.md "Charts for two".

/// Which of the two charts a point belongs to: `A` is the first chart given, `B` the second.
public enum SynastrySide: String, Sendable, Hashable, Codable, CaseIterable {
    case a = "A"
    case b = "B"

    /// The other chart.
    public var other: SynastrySide { self == .a ? .b : .a }
}

/// A point of a chart that takes part in synastry: one of the ten planets or an angle.
///
/// Encoded as one string: the planet's name (`"Sun"` … `"Pluto"`), `"ASC"` or `"MC"`. Ordered
/// Sun … Pluto, then ASC, then MC (the order of `all`).
public enum RelationshipPoint: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    case planet(PlanetName)
    case ascendant
    case midheaven

    /// The ten planets, then ASC and MC.
    public static let all: [RelationshipPoint] = PlanetName.allCases.map { .planet($0) } + [.ascendant, .midheaven]

    /// The wire name: a planet's name, `ASC` or `MC`.
    public var rawValue: String {
        switch self {
        case .planet(let name): name.rawValue
        case .ascendant: "ASC"
        case .midheaven: "MC"
        }
    }

    /// The point of a wire name; `nil` for anything else.
    public init?(rawValue: String) {
        switch rawValue {
        case "ASC": self = .ascendant
        case "MC": self = .midheaven
        default:
            guard let planet = PlanetName(rawValue: rawValue) else { return nil }
            self = .planet(planet)
        }
    }

    /// Whether this is ASC or MC.
    public var isAngle: Bool {
        if case .planet = self { return false }
        return true
    }

    /// Position in `all`.
    public var index: Int {
        switch self {
        case .planet(let name): name.index
        case .ascendant: 10
        case .midheaven: 11
        }
    }

    public var description: String { rawValue }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.index < rhs.index }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let point = RelationshipPoint(rawValue: text) else {
            throw DecodingError.dataCorruptedError(
                in: container,
                debugDescription: "expected a planet name, ASC or MC, got \(InputQuote.short(text))"
            )
        }
        self = point
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// One point of one of the two charts: `{"chart": "A", "point": "Venus", "longitude": 123.4}`.
public struct SynastryPointReference: Sendable, Hashable, Codable {
    /// The chart the point belongs to.
    public var chart: SynastrySide
    public var point: RelationshipPoint
    /// The point's ecliptic longitude in its own chart, in [0, 360).
    public var longitude: Double

    public init(chart: SynastrySide, point: RelationshipPoint, longitude: Double) {
        self.chart = chart
        self.point = point
        self.longitude = longitude
    }
}

/// An aspect between a point of chart A (`a`, always `chart: "A"`) and a point of chart B (`b`).
public struct InterAspect: Sendable, Hashable, Codable {
    public var a: SynastryPointReference
    public var b: SynastryPointReference
    public var type: AspectType
    /// |separation − aspect angle| in degrees.
    public var orb: Double
    /// The largest orb this pair was allowed (the seed's, or the tighter angle orb).
    public var maxOrb: Double
    /// Whether the orb shrinks with both charts' speeds (angles fixed; see CONTRACT.md).
    public var isApplying: Bool

    public init(
        a: SynastryPointReference,
        b: SynastryPointReference,
        type: AspectType,
        orb: Double,
        maxOrb: Double,
        isApplying: Bool
    ) {
        self.a = a
        self.b = b
        self.type = type
        self.orb = orb
        self.maxOrb = maxOrb
        self.isApplying = isApplying
    }
}

/// Where a point of one chart falls among the houses of the other.
public struct HouseOverlay: Sendable, Hashable, Codable {
    /// The point, with the chart it belongs to.
    public var point: SynastryPointReference
    /// The chart whose houses are used (always the other one).
    public var houseChart: SynastrySide
    /// 1…12, by CONTRACT.md's rule (longitude between consecutive cusps).
    public var house: Int

    public init(point: SynastryPointReference, houseChart: SynastrySide, house: Int) {
        self.point = point
        self.houseChart = houseChart
        self.house = house
    }
}

/// Options of a synastry.
public struct SynastryOptions: Sendable, Hashable, Codable {
    /// When set, the largest orb of any aspect that involves an angle (ASC or MC), for every type
    /// (capped by the type's own maximum); `nil`: the seed's orbs for angles too. 0…8 degrees.
    public var angleMaxOrb: Double?

    /// The range `angleMaxOrb` must lie in.
    public static let angleMaxOrbRange: ClosedRange<Double> = 0...8

    public init(angleMaxOrb: Double? = nil) {
        self.angleMaxOrb = angleMaxOrb
    }

    /// The largest orb for an aspect of `type` between two points.
    public func maxOrb(_ type: AspectType, involvesAngle: Bool) -> Double {
        guard involvesAngle, let angleMaxOrb else { return type.maxOrb }
        return min(type.maxOrb, angleMaxOrb)
    }
}

/// The synastry of two charts.
public struct Synastry: Sendable, Hashable, Codable {
    /// The options the aspects were found with.
    public var options: SynastryOptions
    /// Every inter-aspect, ordered by A's point (Sun … Pluto, ASC, MC), then B's.
    public var aspects: [InterAspect]
    /// A's ten planets, ASC and MC in B's houses, in point order.
    public var overlaysAInB: [HouseOverlay]
    /// B's ten planets, ASC and MC in A's houses, in point order.
    public var overlaysBInA: [HouseOverlay]
    /// The house system of A's cusps and of B's (for the reader of the overlays).
    public var houseSystemA: ChartHouseSystem
    public var houseSystemB: ChartHouseSystem
    /// The chart engine that computed this, e.g. `chart-engine/1`.
    public var engineVersion: String

    public init(
        options: SynastryOptions,
        aspects: [InterAspect],
        overlaysAInB: [HouseOverlay],
        overlaysBInA: [HouseOverlay],
        houseSystemA: ChartHouseSystem,
        houseSystemB: ChartHouseSystem,
        engineVersion: String
    ) {
        self.options = options
        self.aspects = aspects
        self.overlaysAInB = overlaysAInB
        self.overlaysBInA = overlaysBInA
        self.houseSystemA = houseSystemA
        self.houseSystemB = houseSystemB
        self.engineVersion = engineVersion
    }
}

/// A compatibility score in 0…100 with the contributions it was summed from (CONTRACT.md
/// "Compatibility score" documents the method).
public struct CompatibilityScore: Sendable, Hashable, Codable {
    /// The method's name and version, e.g. `synastry-weighted/1`.
    public var method: String
    /// 0…100; 50 is balanced, higher is more harmonious.
    public var score: Int
    /// The sum of the positive contributions.
    public var harmony: Double
    /// The sum of the negative contributions, as a positive number.
    public var challenge: Double
    /// Every non-zero contribution, strongest first (ties in a fixed order).
    public var parts: [Part]

    public init(method: String, score: Int, harmony: Double, challenge: Double, parts: [Part]) {
        self.method = method
        self.score = score
        self.harmony = harmony
        self.challenge = challenge
        self.parts = parts
    }

    /// One contribution to the score.
    public struct Part: Sendable, Hashable, Codable {
        /// `aspect` or `overlay`.
        public var kind: Kind
        /// For an aspect, A's point; for an overlay, the point placed in the other's houses.
        public var point: SynastryPointReference
        /// For an aspect, B's point; `nil` for an overlay.
        public var otherPoint: SynastryPointReference?
        /// For an aspect, its type.
        public var aspect: AspectType?
        /// For an overlay, the house of the other chart.
        public var house: Int?
        /// The signed contribution to the score's balance.
        public var points: Double
        /// Why, in one English sentence.
        public var explanation: String

        public init(
            kind: Kind,
            point: SynastryPointReference,
            otherPoint: SynastryPointReference?,
            aspect: AspectType?,
            house: Int?,
            points: Double,
            explanation: String
        ) {
            self.kind = kind
            self.point = point
            self.otherPoint = otherPoint
            self.aspect = aspect
            self.house = house
            self.points = points
            self.explanation = explanation
        }

        /// What a part comes from.
        public enum Kind: String, Sendable, Hashable, Codable {
            case aspect
            case overlay
        }
    }
}

extension NatalChart.Warning {
    /// The chart is a composite (midpoints of two charts), not a moment in time: its `utc`,
    /// `julianDayUT`, `latitude` and `longitude` are the means the houses were cast from.
    public static let compositeChart = "composite-chart"
    /// The chart is a Davison chart: a real chart of the midpoint in time and space of two births.
    public static let davisonChart = "davison-chart"
}
