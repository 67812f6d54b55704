import Foundation
import Testing

@testable import AstroDomain

@Suite struct ChartMathTests {
    @Test func normalizesAngles() {
        #expect(ChartMath.normalizedDegrees(0) == 0)
        #expect(ChartMath.normalizedDegrees(360) == 0)
        #expect(ChartMath.normalizedDegrees(-30) == 330)
        #expect(ChartMath.normalizedDegrees(725) == 5)
        #expect(ChartMath.normalizedDegrees(-1e-20) == 0)
        #expect(ChartMath.normalizedDegrees(.nan) == 0)
        #expect(ChartMath.signedSeparation(from: 350, to: 10) == 20)
        #expect(ChartMath.signedSeparation(from: 10, to: 350) == -20)
        #expect(ChartMath.signedSeparation(from: 0, to: 180) == 180)
    }

    /// The fast paths give fmod's reduction bit for bit, near the edges and everywhere else.
    @Test func normalizingWithoutFmodGivesFmodsValue() {
        func reference(_ degrees: Double) -> Double {
            guard degrees.isFinite else { return 0 }
            var value = fmod(degrees, 360)
            if value < 0 { value += 360 }
            return value >= 360 ? 0 : value
        }
        var generator = SystemRandomNumberGenerator()
        var values: [Double] = [
            0, -0.0, 360, -360, 720, -720, 359.99999999999994, 360.00000000000006, 719.9999999999999,
            -1e-20, -Double.leastNonzeroMagnitude, Double.leastNonzeroMagnitude, 1e300, -1e300, .infinity, -.infinity,
            .nan, -359.99999999999994,
        ]
        for _ in 0..<200_000 { values.append(Double.random(in: -2000...2000, using: &generator)) }
        for _ in 0..<20_000 { values.append(Double.random(in: -1...1, using: &generator) * 1e-12) }
        for value in values {
            #expect(ChartMath.normalizedDegrees(value).bitPattern == reference(value).bitPattern, "\(value)")
        }
    }

    /// Cusps of a chart whose first house starts at 300°: houses 3–4 cross 0° Aries.
    static let wrappingCusps: [Double] = [300, 330, 355, 20, 50, 80, 120, 150, 175, 200, 230, 260]

    @Test func housePlacementWrapsAt360() {
        let cusps = Self.wrappingCusps
        #expect(ChartMath.house(ofLongitude: 300, cusps: cusps) == 1)  // on a cusp: the house it opens
        #expect(ChartMath.house(ofLongitude: 329.999, cusps: cusps) == 1)
        #expect(ChartMath.house(ofLongitude: 330, cusps: cusps) == 2)
        #expect(ChartMath.house(ofLongitude: 359.5, cusps: cusps) == 3)
        #expect(ChartMath.house(ofLongitude: 0, cusps: cusps) == 3)
        #expect(ChartMath.house(ofLongitude: 19.999, cusps: cusps) == 3)
        #expect(ChartMath.house(ofLongitude: 20, cusps: cusps) == 4)
        #expect(ChartMath.house(ofLongitude: 100, cusps: cusps) == 6)
        #expect(ChartMath.house(ofLongitude: 270, cusps: cusps) == 12)
        #expect(ChartMath.house(ofLongitude: 299.999, cusps: cusps) == 12)
        #expect(ChartMath.house(ofLongitude: -60, cusps: cusps) == 1)  // −60° is 300°
        #expect(ChartMath.house(ofLongitude: 10, cusps: [1, 2]) == nil)
    }

    @Test func housePlacementWhenTheTwelfthHouseCrossesAries() {
        // Cusp 12 at 350°, cusp 1 at 15°: house 12 spans 350° → 15° across 0°.
        let cusps: [Double] = [15, 45, 75, 105, 135, 165, 195, 225, 255, 285, 320, 350]
        #expect(ChartMath.house(ofLongitude: 355, cusps: cusps) == 12)
        #expect(ChartMath.house(ofLongitude: 5, cusps: cusps) == 12)
        #expect(ChartMath.house(ofLongitude: 15, cusps: cusps) == 1)
        #expect(ChartMath.house(ofLongitude: 349.9, cusps: cusps) == 11)
    }

    @Test func everyLongitudeHasExactlyOneHouse() {
        let cusps = Self.wrappingCusps
        var counts = [Int](repeating: 0, count: 13)
        for tenth in 0..<3600 {
            let house = ChartMath.house(ofLongitude: Double(tenth) / 10, cusps: cusps)
            counts[house ?? 0] += 1
        }
        #expect(counts[0] == 0)
        #expect(counts[1] == 300)  // 300°…330°
        #expect(counts[3] == 250)  // 355°…20°
    }

    @Test func aspectAtExactlyItsOrbLimitCounts() throws {
        // Trine (120°, orb 7): separation 127° is exactly at the limit.
        let atLimit = try #require(ChartMath.aspect(between: (10, 1), and: (137, 1)))
        #expect(atLimit.type == .trine)
        #expect(atLimit.orb == 7)
        #expect(ChartMath.aspect(between: (10, 1), and: (137.000_001, 1)) == nil)
        // Across 0°: 350.5° and 117.5° are 127° apart.
        #expect(ChartMath.aspect(between: (350.5, 1), and: (117.5, 1))?.orb == 7)
        // Conjunction and opposition 8, square 7, sextile 6.
        #expect(ChartMath.aspect(between: (100, 0), and: (108, 0))?.type == .conjunction)
        #expect(ChartMath.aspect(between: (100, 0), and: (108.5, 0)) == nil)
        #expect(ChartMath.aspect(between: (0, 0), and: (172, 0))?.type == .opposition)
        #expect(ChartMath.aspect(between: (0, 0), and: (171.9, 0)) == nil)
        #expect(ChartMath.aspect(between: (0, 0), and: (97, 0))?.type == .square)
        #expect(ChartMath.aspect(between: (0, 0), and: (83, 0))?.type == .square)
        #expect(ChartMath.aspect(between: (0, 0), and: (97.25, 0)) == nil)
        #expect(ChartMath.aspect(between: (0, 0), and: (66, 0))?.type == .sextile)
        #expect(ChartMath.aspect(between: (0, 0), and: (54, 0))?.type == .sextile)
        #expect(ChartMath.aspect(between: (0, 0), and: (66.5, 0)) == nil)
        #expect(ChartMath.aspect(between: (0, 0), and: (53.5, 0)) == nil)
    }

    @Test func orbIsDistanceFromTheExactAngle() throws {
        let square = try #require(ChartMath.aspect(between: (200, 0), and: (112.5, 0)))
        #expect(square.type == .square)
        #expect(square.orb == 2.5)
    }

    @Test func applyingAndSeparating() throws {
        // Moon (fast) 5° behind the Sun in a conjunction: catching up, applying.
        #expect(ChartMath.aspect(between: (100, 1), and: (95, 13))?.isApplying == true)
        // Moon 5° ahead of the Sun, moving away: separating.
        #expect(ChartMath.aspect(between: (100, 1), and: (105, 13))?.isApplying == false)
        // Sextile at 58° (inside the angle): widening the separation applies.
        #expect(ChartMath.aspect(between: (0, 0), and: (58, 1))?.isApplying == true)
        #expect(ChartMath.aspect(between: (0, 0), and: (58, -1))?.isApplying == false)
        // Sextile at 62° (beyond the angle): narrowing applies.
        #expect(ChartMath.aspect(between: (0, 0), and: (62, -1))?.isApplying == true)
        // Body 2 behind body 1, across 0° (62° apart): body 1 running away widens the orb, coming
        // back toward 60° applies.
        #expect(ChartMath.aspect(between: (10, 1), and: (308, 0))?.isApplying == false)
        #expect(ChartMath.aspect(between: (10, -1), and: (308, 0))?.isApplying == true)
        // Opposition at 175°: the separation grows toward 180° when body 2 runs ahead.
        #expect(ChartMath.aspect(between: (0, 0.5), and: (175, 1))?.isApplying == true)
        // A retrograde body moving back onto a conjunction applies.
        #expect(ChartMath.aspect(between: (100, 0), and: (103, -0.5))?.isApplying == true)
        // Exact aspects and equal speeds separate.
        #expect(ChartMath.aspect(between: (0, 1), and: (120, 2))?.isApplying == false)
        #expect(ChartMath.aspect(between: (0, 1), and: (118, 1))?.isApplying == false)
    }

    /// The house rule as first written (every cusp normalized per body), kept to check that the
    /// prepared `HouseCusps` give the same houses.
    private static func referenceHouse(ofLongitude longitude: Double, cusps: [Double]) -> Int {
        let normalize = ChartMath.normalizedDegrees
        let point = normalize(longitude)
        for index in 0..<12 {
            let start = normalize(cusps[index])
            let end = normalize(cusps[(index + 1) % 12])
            let width = normalize(end - start)
            if width > 0, normalize(point - start) < width { return index + 1 }
        }
        return (0..<12).min { normalize(point - cusps[$0]) < normalize(point - cusps[$1]) }! + 1
    }

    @Test func preparedCuspsPlaceLikeTheRule() throws {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<2000 {
            var cusps = (0..<12).map { _ in Double.random(in: -720...720, using: &generator) }
            if round % 2 == 0 { cusps.sort() }
            if round % 5 == 0 { cusps[3] = cusps[2] }
            let prepared = try #require(ChartMath.HouseCusps(cusps))
            for _ in 0..<12 {
                let longitude = Double.random(in: -400...400, using: &generator)
                let expected = Self.referenceHouse(ofLongitude: longitude, cusps: cusps)
                #expect(prepared.house(ofLongitude: longitude) == expected)
                #expect(ChartMath.house(ofLongitude: longitude, cusps: cusps) == expected)
            }
            #expect(prepared.house(ofLongitude: cusps[7]) == Self.referenceHouse(ofLongitude: cusps[7], cusps: cusps))
        }
        #expect(ChartMath.HouseCusps([1, 2, 3]) == nil)
    }
}
