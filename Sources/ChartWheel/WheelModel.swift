import AstroDomain
import Foundation

/// One body drawn on a ring of the wheel: a planet, a point, or any position another module
/// computed (a transiting planet, a partner's planet).
public struct WheelBody: Sendable, Hashable {
    /// A key unique within its ring that aspects refer to, e.g. `"Sun"`.
    public var key: String
    /// The name read out by screen readers and shown in tooltips, e.g. `"Sun"` or `"True Node"`.
    public var name: String
    /// The glyph drawn on the wheel (one or two characters; longer text is cut).
    public var glyph: String
    /// Ecliptic longitude in degrees (any finite angle; reduced to [0, 360)).
    public var longitude: Double
    /// Drawn with a ℞ after its degrees.
    public var isRetrograde: Bool

    public init(key: String, name: String, glyph: String, longitude: Double, isRetrograde: Bool) {
        self.key = key
        self.name = name
        self.glyph = glyph
        self.longitude = longitude
        self.isRetrograde = isRetrograde
    }
}

/// A set of positions drawn as one ring: the inner chart or the outer ring of a bi-wheel.
public struct WheelRing: Sendable, Hashable {
    /// What the ring is, for people: `"Olena"`, `"Transits 2026-11-24 18:00 UTC"`.
    public var label: String
    public var bodies: [WheelBody]
    /// The twelve house cusps in house order, or empty for a ring without houses.
    public var cusps: [Double]
    /// The ascendant and midheaven, when the ring has them (the inner ring's orient the wheel).
    public var ascendant: Double?
    public var midheaven: Double?

    public init(
        label: String,
        bodies: [WheelBody],
        cusps: [Double] = [],
        ascendant: Double? = nil,
        midheaven: Double? = nil
    ) {
        self.label = label
        self.bodies = bodies
        self.cusps = cusps
        self.ascendant = ascendant
        self.midheaven = midheaven
    }
}

/// An aspect line: between two bodies of the inner ring, or (cross aspects) from a body of the
/// inner ring (`first`) to a body of the outer ring (`second`).
public struct WheelAspect: Sendable, Hashable {
    public var first: String
    public var second: String
    public var type: AspectType
    /// Degrees from exact, shown in the line's tooltip and the description.
    public var orb: Double

    public init(first: String, second: String, type: AspectType, orb: Double) {
        self.first = first
        self.second = second
        self.type = type
        self.orb = orb
    }
}

/// Light (dark strokes on white) or dark (light strokes on near-black).
public enum WheelTheme: String, Sendable, Hashable, CaseIterable {
    case light
    case dark
}

/// Everything one SVG wheel shows.
public struct WheelInput: Sendable, Hashable {
    /// The heading line and the SVG `<title>`, e.g. `"Olena — natal chart"`.
    public var title: String
    /// The second heading line: date, time, place (user input: escaped and cut to fit).
    public var subtitle: String
    public var inner: WheelRing
    public var aspects: [WheelAspect]
    /// The second ring of a bi-wheel (partner or transits); `nil` for a single wheel.
    public var outer: WheelRing?
    /// Aspects from the inner ring (`first`) to the outer ring (`second`).
    public var crossAspects: [WheelAspect]
    public var theme: WheelTheme

    public init(
        title: String,
        subtitle: String,
        inner: WheelRing,
        aspects: [WheelAspect],
        outer: WheelRing? = nil,
        crossAspects: [WheelAspect] = [],
        theme: WheelTheme = .light
    ) {
        self.title = title
        self.subtitle = subtitle
        self.inner = inner
        self.aspects = aspects
        self.outer = outer
        self.crossAspects = crossAspects
        self.theme = theme
    }

    /// The most bodies one ring may hold: the ten planets, the four points and room for more.
    public static let maxBodiesPerRing = 24
    /// The most aspect lines (inner plus cross) one wheel draws.
    public static let maxAspects = 300
}

/// Input a wheel cannot be drawn from; nothing is written.
public struct WheelError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable code: `wheel-too-many-bodies`, `wheel-too-many-aspects`, `wheel-bad-number`,
    /// `wheel-bad-cusps`, `wheel-unknown-body`, `wheel-duplicate-key`.
    public var code: String
    public var message: String

    public init(code: ErrorCode, message: String) {
        self.code = code.rawValue
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

extension WheelRing {
    /// The ten planets, the chart's points, its cusps and angles as a ring.
    public init(chart: NatalChart, label: String) {
        var bodies = chart.planets.map {
            WheelBody(
                key: $0.name.rawValue,
                name: $0.name.rawValue,
                glyph: WheelGlyphs.planet($0.name),
                longitude: $0.longitude,
                isRetrograde: $0.isRetrograde
            )
        }
        for point in chart.points ?? [] {
            bodies.append(
                WheelBody(
                    key: point.name.rawValue,
                    name: WheelGlyphs.pointName(point.name),
                    glyph: WheelGlyphs.point(point.name),
                    longitude: point.longitude,
                    isRetrograde: point.isRetrograde
                )
            )
        }
        self.init(
            label: label,
            bodies: bodies,
            cusps: chart.houses.sorted { $0.number < $1.number }.map(\.cusp),
            ascendant: chart.ascendant,
            midheaven: chart.midheaven
        )
    }
}

extension WheelInput {
    /// A single wheel of a natal chart with its own aspects.
    public static func natal(_ chart: NatalChart, name: String, theme: WheelTheme = .light) -> WheelInput {
        WheelInput(
            title: "\(name) — natal chart",
            subtitle: subtitle(of: chart),
            inner: WheelRing(chart: chart, label: name),
            aspects: chart.aspects.map {
                WheelAspect(first: $0.planet1.rawValue, second: $0.planet2.rawValue, type: $0.type, orb: $0.orb)
            },
            theme: theme
        )
    }

    /// A bi-wheel: `inner` with its aspects inside, `outer` around it (a partner's chart or the
    /// sky at another instant), and the aspects between them. Without `crossAspects` they are
    /// found by `WheelCrossAspects.between` (the seed's orbs, planets and points).
    public static func biWheel(
        inner: NatalChart,
        innerName: String,
        outer: NatalChart,
        outerName: String,
        title: String? = nil,
        crossAspects: [WheelAspect]? = nil,
        theme: WheelTheme = .light
    ) -> WheelInput {
        let innerRing = WheelRing(chart: inner, label: innerName)
        let outerRing = WheelRing(chart: outer, label: outerName)
        return WheelInput(
            title: title ?? "\(innerName) (inner) and \(outerName) (outer)",
            subtitle: subtitle(of: inner),
            inner: innerRing,
            aspects: inner.aspects.map {
                WheelAspect(first: $0.planet1.rawValue, second: $0.planet2.rawValue, type: $0.type, orb: $0.orb)
            },
            outer: outerRing,
            crossAspects: crossAspects ?? WheelCrossAspects.between(inner: innerRing, outer: outerRing),
            theme: theme
        )
    }

    static func subtitle(of chart: NatalChart) -> String {
        var parts = ["\(chart.birthDate) \(chart.birthTime) \(chart.timezone)"]
        if !chart.locationName.isEmpty { parts.append(chart.locationName) }
        parts.append("\(chart.houseSystem.displayName) houses")
        return parts.joined(separator: ", ")
    }
}

/// The simple fallback for aspects between two rings, until a synastry or transit engine supplies
/// its own: every pair of an inner and an outer body whose separation is within the seed's
/// `AspectType.maxOrb` of an aspect angle, the tightest aspect per pair; ordered by inner body,
/// then outer body, as the rings list them.
public enum WheelCrossAspects {
    public static func between(inner: WheelRing, outer: WheelRing) -> [WheelAspect] {
        var found: [WheelAspect] = []
        for first in inner.bodies {
            for second in outer.bodies {
                guard first.longitude.isFinite, second.longitude.isFinite else { continue }
                let separation = abs(ChartMath.signedSeparation(from: first.longitude, to: second.longitude))
                var best: (AspectType, Double)?
                for type in AspectType.allCases {
                    let orb = abs(separation - type.angle)
                    if orb <= type.maxOrb, best == nil || orb < best!.1 { best = (type, orb) }
                }
                if let best {
                    found.append(WheelAspect(first: first.key, second: second.key, type: best.0, orb: best.1))
                }
            }
        }
        return found
    }
}
