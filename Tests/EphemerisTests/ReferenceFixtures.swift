import Ephemeris
import Foundation
import Testing

/// The golden charts in Fixtures/reference_charts.json, written by
/// scripts/reference/generate_reference_charts.py with pyswisseph 2.10.3.2 (see the file's "source").
struct ReferenceFile: Decodable {
    var source: String
    var generated: String
    var pyswissephVersion: String
    var swissEphemerisVersion: String
    var caseCount: Int
    var cases: [ReferenceCase]

    /// The decoded fixture file, or why it could not be read.
    static let loaded: Result<ReferenceFile, any Error> = Result {
        guard
            let url = Bundle.module.url(
                forResource: "reference_charts",
                withExtension: "json",
                subdirectory: "Fixtures"
            )
        else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "Fixtures/reference_charts.json"])
        }
        return try JSONDecoder().decode(ReferenceFile.self, from: Data(contentsOf: url))
    }

    /// The cases, or none when the file is unreadable (`fixturesLoad` then fails).
    static var cases: [ReferenceCase] {
        (try? loaded.get().cases) ?? []
    }
}

struct ReferenceCase: Decodable, Sendable, CustomTestStringConvertible {
    struct Input: Decodable, Sendable {
        var local: String
        var utc: String
        var year: Int
        var month: Int
        var day: Int
        var hour: Double
        var julianDayUT: Double
        var latitude: Double
        var longitude: Double
        var houseSystem: HouseSystem
        var zodiac: String
        var ayanamsa: Ayanamsa?
    }

    struct Body: Decodable, Sendable {
        var body: CelestialBody
        var longitude: Double
        var latitude: Double
        var distance: Double
        var longitudeSpeed: Double
        var latitudeSpeed: Double
        var distanceSpeed: Double
        var retflag: Int
    }

    struct HouseValues: Decodable, Sendable {
        var requested: HouseSystem
        var system: HouseSystem
        var fallbackMessage: String?
        var cusps: [Double]
        var ascendant: Double
        var midheaven: Double
        var armc: Double
        var vertex: Double
    }

    struct Output: Decodable, Sendable {
        var bodies: [Body]
        var houses: HouseValues
    }

    struct SignBoundary: Decodable, Sendable {
        var body: CelestialBody
        var boundary: Double
        var side: String
        var distance: Double
    }

    var id: String
    var description: String
    var tags: [String]
    var input: Input
    var output: Output
    var signBoundary: SignBoundary?

    var testDescription: String { id }

    var zodiac: Zodiac {
        if input.zodiac == "sidereal", let ayanamsa = input.ayanamsa {
            return .sidereal(ayanamsa)
        }
        return .tropical
    }

    var bodies: [CelestialBody] { output.bodies.map(\.body) }
}

/// Tolerances of the accuracy tests.
enum Tolerance {
    /// One arcsecond, in degrees.
    static let angle = 1.0 / 3600
    /// Degrees per day.
    static let speed = 1e-6
    /// Astronomical units (about 15 m).
    static let distance = 1e-10
}

/// The smallest difference between two angles, in degrees (so that 359.9999 and 0.0001 are close).
func angularDifference(_ a: Double, _ b: Double) -> Double {
    let difference = abs(a - b).truncatingRemainder(dividingBy: 360)
    return min(difference, 360 - difference)
}

/// Checks a computed chart against a reference case, recording one issue per value out of tolerance.
func expectMatches(
    _ chart: ChartPositions,
    _ reference: ReferenceCase,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let id = reference.id
    #expect(chart.julianDayUT == reference.input.julianDayUT, "\(id): julianDayUT", sourceLocation: sourceLocation)
    #expect(chart.zodiac == reference.zodiac, "\(id): zodiac", sourceLocation: sourceLocation)
    #expect(chart.bodies.map(\.body) == reference.bodies, "\(id): body order", sourceLocation: sourceLocation)
    for (computed, expected) in zip(chart.bodies, reference.output.bodies) {
        let name = "\(id) \(expected.body.rawValue)"
        #expect((0..<360).contains(computed.longitude), "\(name): longitude range", sourceLocation: sourceLocation)
        #expect(
            angularDifference(computed.longitude, expected.longitude) <= Tolerance.angle,
            "\(name): longitude \(computed.longitude) vs \(expected.longitude)",
            sourceLocation: sourceLocation
        )
        #expect(
            abs(computed.latitude - expected.latitude) <= Tolerance.angle,
            "\(name): latitude \(computed.latitude) vs \(expected.latitude)",
            sourceLocation: sourceLocation
        )
        #expect(
            abs(computed.distance - expected.distance) <= Tolerance.distance,
            "\(name): distance \(computed.distance) vs \(expected.distance)",
            sourceLocation: sourceLocation
        )
        #expect(
            abs(computed.longitudeSpeed - expected.longitudeSpeed) <= Tolerance.speed,
            "\(name): longitude speed \(computed.longitudeSpeed) vs \(expected.longitudeSpeed)",
            sourceLocation: sourceLocation
        )
        #expect(
            abs(computed.latitudeSpeed - expected.latitudeSpeed) <= Tolerance.speed,
            "\(name): latitude speed",
            sourceLocation: sourceLocation
        )
        #expect(
            abs(computed.distanceSpeed - expected.distanceSpeed) <= Tolerance.speed,
            "\(name): distance speed",
            sourceLocation: sourceLocation
        )
        #expect(
            computed.isRetrograde == (expected.longitudeSpeed < 0),
            "\(name): retrograde",
            sourceLocation: sourceLocation
        )
    }
    let houses = chart.houses
    let expected = reference.output.houses
    #expect(houses.requested == expected.requested, "\(id): requested system", sourceLocation: sourceLocation)
    #expect(houses.system == expected.system, "\(id): system used", sourceLocation: sourceLocation)
    #expect(
        (houses.fallbackReason != nil) == (expected.system != expected.requested),
        "\(id): fallback reason \(houses.fallbackReason ?? "nil")",
        sourceLocation: sourceLocation
    )
    #expect(houses.cusps.count == 12, "\(id): cusp count", sourceLocation: sourceLocation)
    for (index, (computed, reference)) in zip(houses.cusps, expected.cusps).enumerated() {
        #expect(
            angularDifference(computed, reference) <= Tolerance.angle,
            "\(id): cusp \(index + 1) \(computed) vs \(reference)",
            sourceLocation: sourceLocation
        )
    }
    for (name, computed, reference) in [
        ("ascendant", houses.ascendant, expected.ascendant),
        ("midheaven", houses.midheaven, expected.midheaven),
        ("armc", houses.armc, expected.armc),
        ("vertex", houses.vertex, expected.vertex),
    ] {
        #expect(
            angularDifference(computed, reference) <= Tolerance.angle,
            "\(id): \(name) \(computed) vs \(reference)",
            sourceLocation: sourceLocation
        )
    }
}
