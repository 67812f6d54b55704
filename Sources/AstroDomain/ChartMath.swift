import Foundation

/// The pure geometry of a chart: angles, house placement and aspects. No ephemeris, no I/O.
public enum ChartMath {
    /// An angle reduced to [0, 360). Non-finite input gives 0.
    public static func normalizedDegrees(_ degrees: Double) -> Double {
        // Angles within one turn of the range (nearly all: longitudes, cusps and their
        // differences) are reduced with one exact addition or subtraction, the value fmod gives
        // (fmod is exact, and so is x − 360 for 360 ≤ x < 720); fmod is the costly path and
        // these are reduced ~100 times per chart.
        if degrees >= 0 {
            if degrees < 360 { return degrees }
            if degrees < 720 { return degrees - 360 }
        } else if degrees > -360 {
            let value = degrees + 360
            return value >= 360 ? 0 : value
        }
        guard degrees.isFinite else { return 0 }
        var value = fmod(degrees, 360)
        if value < 0 { value += 360 }
        // fmod of a tiny negative number plus 360 can round to exactly 360.
        return value >= 360 ? 0 : value
    }

    /// The signed shortest arc from `from` to `to`, in (−180, 180]: positive when `to` lies
    /// ahead of `from` in the order of the signs.
    public static func signedSeparation(from: Double, to: Double) -> Double {
        let forward = normalizedDegrees(to - from)
        return forward > 180 ? forward - 360 : forward
    }

    /// The house (1…12) that holds an ecliptic longitude, by longitude between consecutive cusps:
    /// house *n* runs from cusp *n* (included) forward to cusp *n + 1* (excluded), and house 12
    /// runs from cusp 12 to cusp 1, wrapping at 360°. This is CONTRACT.md's rule, not
    /// `swe_house_pos` (which measures in the houses' own frame and can differ near cusps for
    /// bodies off the ecliptic).
    /// - Parameters:
    ///   - longitude: ecliptic longitude of the body, any finite angle.
    ///   - cusps: the twelve cusps in house order (cusp 1 = ascendant for most systems).
    /// - Returns: the house number; `nil` when `cusps` does not have 12 entries. Cusps of zero
    ///   width (two equal cusps) hold nothing; if no house matches (cusps out of order) the house
    ///   whose cusp lies closest behind the longitude is returned.
    public static func house(ofLongitude longitude: Double, cusps: [Double]) -> Int? {
        HouseCusps(cusps)?.house(ofLongitude: longitude)
    }

    /// Twelve cusps prepared for placing many bodies: each cusp's normalized start and the width
    /// of its house are computed once instead of once per body. `house(ofLongitude:)` gives exactly
    /// what `ChartMath.house(ofLongitude:cusps:)` gives (which uses it).
    public struct HouseCusps: Sendable, Hashable {
        private let cusps: [Double]
        private let starts: [Double]
        private let widths: [Double]

        /// - Parameter cusps: the twelve cusps in house order; `nil` when there are not 12.
        public init?(_ cusps: [Double]) {
            guard cusps.count == 12 else { return nil }
            self.cusps = cusps
            let starts = cusps.map(normalizedDegrees)
            self.starts = starts
            widths = (0..<12).map { index in normalizedDegrees(starts[(index + 1) % 12] - starts[index]) }
        }

        /// The house (1…12) that holds an ecliptic longitude; the rule of
        /// `ChartMath.house(ofLongitude:cusps:)`.
        public func house(ofLongitude longitude: Double) -> Int {
            let point = normalizedDegrees(longitude)
            for index in 0..<12 {
                let width = widths[index]
                if width > 0, normalizedDegrees(point - starts[index]) < width { return index + 1 }
            }
            let behind = (0..<12).min {
                normalizedDegrees(point - cusps[$0]) < normalizedDegrees(point - cusps[$1])
            }
            return (behind ?? 0) + 1
        }
    }

    /// An aspect found between two bodies.
    public struct AspectMatch: Sendable, Hashable {
        public var type: AspectType
        /// |separation − aspect angle|, in degrees.
        public var orb: Double
        /// Whether the orb is shrinking at the instant of the chart (see `aspect(between:and:)`).
        public var isApplying: Bool
    }

    /// The aspect, if any, between two bodies given their longitudes and longitude speeds.
    ///
    /// The separation is the shortest arc between the two longitudes, in [0, 180]. For each
    /// aspect type the orb is |separation − angle|; a type matches when its orb is at most its
    /// `maxOrb` (an orb exactly at the limit counts, no tolerance is added). When two types match
    /// (impossible with the seed's orbs, whose ranges do not overlap) the smaller orb wins, and on
    /// a tie the type listed first in `AspectType.allCases`.
    ///
    /// Applying rule: with Δ the signed arc from body 1 to body 2 (in (−180, 180]) and the
    /// separation |Δ|, the orb changes at the rate
    /// `d(orb)/dt = sign(separation − angle) · sign(Δ) · (speed2 − speed1)`.
    /// The aspect is applying when that rate is negative (the orb is shrinking) and separating
    /// otherwise. An exact aspect (orb 0) or bodies at the same longitude can only separate, and
    /// bodies with equal speeds keep their orb: both count as separating.
    /// - Parameters:
    ///   - first: longitude and longitude speed (degrees/day) of body 1.
    ///   - second: longitude and longitude speed of body 2.
    /// - Returns: the matching aspect, or `nil`.
    public static func aspect(
        between first: (longitude: Double, speed: Double),
        and second: (longitude: Double, speed: Double)
    ) -> AspectMatch? {
        let delta = signedSeparation(from: first.longitude, to: second.longitude)
        let separation = abs(delta)
        var best: (type: AspectType, orb: Double)?
        for type in AspectType.allCases {
            let orb = abs(separation - type.angle)
            guard orb <= type.maxOrb else { continue }
            if best == nil || orb < best!.orb { best = (type, orb) }
        }
        guard let best else { return nil }
        let relativeSpeed = second.speed - first.speed
        let rate = sign(separation - best.type.angle) * sign(delta) * relativeSpeed
        return AspectMatch(type: best.type, orb: best.orb, isApplying: rate < 0)
    }

    /// −1, 0 or 1.
    private static func sign(_ value: Double) -> Double {
        value > 0 ? 1 : (value < 0 ? -1 : 0)
    }
}
