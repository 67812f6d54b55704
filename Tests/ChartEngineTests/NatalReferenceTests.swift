import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import Testing

// Whole natal charts from local birth data against Fixtures/natal_reference.json, written by
// scripts/reference/generate_natal_charts.py: an implementation of CONTRACT.md's NatalChart rules independent of
// the Swift code (Python's zoneinfo on the system tz database for local time → UTC, pyswisseph 2.10.3.2 for the
// positions and houses, signs, houses, retrograde flags and aspects computed in Python). See the file's "source".
//
// Aspect convention, the engine's (`NatalChart.Aspect`): planet1 is the earlier planet in Sun…Pluto order. The
// fixture lists aspects in pair order; the engine's list is matched by pair, whatever order it comes in.
// isApplying in the fixture: the orb 1e-6 day later, with both longitudes moved by speed × dt, is smaller than
// the orb now; the engine's analytic rule (`ChartMath.aspect(between:and:)`) gives the same answer whenever
// exactness is not passed within that step, which the generator guarantees.

/// The decoded fixture file.
struct NatalReferenceFile: Decodable {
    var source: String
    var generated: String
    var pyswissephVersion: String
    var swissEphemerisVersion: String
    var tzdataVersion: String
    var applyingTimeStepDays: Double
    var caseCount: Int
    var cases: [NatalReferenceCase]

    /// The decoded fixture file, or why it could not be read.
    static let loaded: Result<NatalReferenceFile, any Error> = Result {
        guard
            let url = Bundle.module.url(
                forResource: "natal_reference",
                withExtension: "json",
                subdirectory: "Fixtures"
            )
        else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "Fixtures/natal_reference.json"])
        }
        return try JSONDecoder().decode(NatalReferenceFile.self, from: Data(contentsOf: url))
    }

    /// The cases, or none when the file is unreadable (`fixtureLoads` then fails).
    static var cases: [NatalReferenceCase] {
        (try? loaded.get().cases) ?? []
    }
}

/// One birth and the chart the reference implementation computed for it.
struct NatalReferenceCase: Decodable, Sendable, CustomTestStringConvertible {
    struct Input: Decodable, Sendable {
        var name: String
        var birthDate: String
        var birthTime: String
        var timezone: String
        var latitude: Double
        var longitude: Double
        var locationName: String
        var houseSystem: ChartHouseSystem
    }

    struct Planet: Decodable, Sendable {
        var name: PlanetName
        var longitude: Double
        var latitude: Double
        var speed: Double
        var sign: ZodiacSign
        var house: Int
        var isRetrograde: Bool
    }

    struct House: Decodable, Sendable {
        var number: Int
        var cusp: Double
        var sign: ZodiacSign
    }

    struct Aspect: Decodable, Sendable {
        var planet1: PlanetName
        var planet2: PlanetName
        var type: AspectType
        var orb: Double
        var isApplying: Bool
    }

    struct Expected: Decodable, Sendable {
        var utc: String
        var utcSecondsSince1970: Int
        var utcOffset: String
        var julianDayUT: Double
        var houseSystem: ChartHouseSystem
        var houseSystemRequested: ChartHouseSystem?
        var warningCodes: [String]
        var planets: [Planet]
        var houses: [House]
        var ascendant: Double
        var midheaven: Double
        var aspects: [Aspect]
    }

    var id: String
    var description: String
    var tags: [String]
    var input: Input
    var expected: Expected

    var testDescription: String { id }

    var birthData: BirthData {
        BirthData(
            name: input.name,
            birthDate: input.birthDate,
            birthTime: input.birthTime,
            timezone: input.timezone,
            latitude: input.latitude,
            longitude: input.longitude,
            locationName: input.locationName,
            houseSystem: input.houseSystem
        )
    }
}

/// One ephemeris for the whole test process (it starts a thread and opens the data files).
private let referenceEngine: ChartEngine = {
    do {
        return ChartEngine(ephemeris: try Ephemeris())
    } catch {
        fatalError("the Swiss Ephemeris files are needed for these tests: \(error)")
    }
}()

private let arcsecond = 1.0 / 3600
private let speedTolerance = 1e-6
private let julianDayTolerance = 1e-9
private let orbTolerance = 1e-6

/// The smaller angle between two longitudes, in degrees (so 359.9999° and 0.0001° are 0.0002° apart).
private func angularDistance(_ first: Double, _ second: Double) -> Double {
    let difference = abs(first - second).truncatingRemainder(dividingBy: 360)
    return min(difference, 360 - difference)
}

/// An unordered planet pair, for matching aspects whatever order the engine names them in.
private struct PlanetPair: Hashable, CustomStringConvertible {
    var first: PlanetName
    var second: PlanetName

    init(_ one: PlanetName, _ other: PlanetName) {
        first = min(one, other)
        second = max(one, other)
    }

    var description: String { "\(first.rawValue)-\(second.rawValue)" }
}

@Suite struct NatalReferenceTests {
    @Test func fixtureLoads() throws {
        let file = try NatalReferenceFile.loaded.get()
        #expect(file.caseCount == file.cases.count)
        #expect(file.cases.count >= 36)
        #expect(Set(file.cases.map(\.id)).count == file.cases.count, "case ids are unique")
        #expect(file.swissEphemerisVersion == Ephemeris.libraryVersion)
        #expect(file.pyswissephVersion == "2.10.3.2")
        for reference in file.cases {
            #expect(reference.expected.planets.map(\.name) == PlanetName.allCases, "\(reference.id): planets")
            #expect(reference.expected.houses.map(\.number) == Array(1...12), "\(reference.id): houses")
        }
    }

    /// Every case, pre-1970 local mean time included (amsterdam-1935, +00:19:32): the engine reads
    /// zones from the system time zone database, which has the tz "backzone" history that
    /// Foundation's ICU data on Linux lacks.
    @Test(arguments: NatalReferenceFile.cases)
    func chartMatchesReference(_ reference: NatalReferenceCase) async throws {
        try await check(reference)
    }

    func check(_ reference: NatalReferenceCase) async throws {
        let id = reference.id
        let expected = reference.expected
        let chart = try await referenceEngine.chart(for: reference.birthData)

        // The instant: local time → UTC → Julian day.
        #expect(
            chart.utc.timeIntervalSince1970 == Double(expected.utcSecondsSince1970),
            "\(id): utc \(ISO8601.string(from: chart.utc)), expected \(expected.utc) (offset \(expected.utcOffset))"
        )
        #expect(ISO8601.string(from: chart.utc) == expected.utc, "\(id): utc text")
        #expect(
            abs(chart.julianDayUT - expected.julianDayUT) <= julianDayTolerance,
            "\(id): julianDayUT \(chart.julianDayUT), expected \(expected.julianDayUT)"
        )

        // Houses.
        #expect(chart.houseSystem == expected.houseSystem, "\(id): houseSystem")
        #expect(chart.houseSystemRequested == expected.houseSystemRequested, "\(id): houseSystemRequested")
        #expect(chart.warnings.map(\.code) == expected.warningCodes, "\(id): warnings \(chart.warnings)")
        #expect(
            angularDistance(chart.ascendant, expected.ascendant) <= arcsecond,
            "\(id): ascendant \(chart.ascendant), expected \(expected.ascendant)"
        )
        #expect(
            angularDistance(chart.midheaven, expected.midheaven) <= arcsecond,
            "\(id): midheaven \(chart.midheaven), expected \(expected.midheaven)"
        )
        #expect(chart.houses.map(\.number) == expected.houses.map(\.number), "\(id): house numbers")
        for (house, want) in zip(chart.houses, expected.houses) {
            #expect(
                angularDistance(house.cusp, want.cusp) <= arcsecond,
                "\(id): cusp \(want.number) \(house.cusp), expected \(want.cusp)"
            )
            #expect(house.sign == want.sign, "\(id): cusp \(want.number) sign \(house.sign), expected \(want.sign)")
        }

        // Planets.
        #expect(chart.planets.map(\.name) == expected.planets.map(\.name), "\(id): planet order")
        for want in expected.planets {
            guard let planet = chart.planet(want.name) else {
                Issue.record("\(id): no \(want.name.rawValue) in the chart")
                continue
            }
            let name = "\(id): \(want.name.rawValue)"
            #expect(
                angularDistance(planet.longitude, want.longitude) <= arcsecond,
                "\(name) longitude \(planet.longitude), expected \(want.longitude)"
            )
            #expect(
                abs(planet.latitude - want.latitude) <= arcsecond,
                "\(name) latitude \(planet.latitude), expected \(want.latitude)"
            )
            #expect(
                abs(planet.speed - want.speed) <= speedTolerance,
                "\(name) speed \(planet.speed), expected \(want.speed)"
            )
            #expect(planet.sign == want.sign, "\(name) sign \(planet.sign), expected \(want.sign)")
            #expect(planet.house == want.house, "\(name) house \(planet.house), expected \(want.house)")
            #expect(
                planet.isRetrograde == want.isRetrograde,
                "\(name) isRetrograde \(planet.isRetrograde), expected \(want.isRetrograde)"
            )
        }

        // Aspects: the same pairs, types and applying flags; orbs within 1e-6°.
        var found: [PlanetPair: NatalChart.Aspect] = [:]
        for aspect in chart.aspects {
            let pair = PlanetPair(aspect.planet1, aspect.planet2)
            #expect(
                aspect.planet1 < aspect.planet2,
                "\(id): aspect \(aspect.planet1.rawValue)-\(aspect.planet2.rawValue) names the later planet first"
            )
            #expect(found[pair] == nil, "\(id): two aspects for \(pair)")
            found[pair] = aspect
        }
        let wanted = Dictionary(
            expected.aspects.map { (PlanetPair($0.planet1, $0.planet2), $0) },
            uniquingKeysWith: { first, _ in first }
        )
        let extra = Set(found.keys).subtracting(wanted.keys).map(\.description).sorted()
        let missing = Set(wanted.keys).subtracting(found.keys).map(\.description).sorted()
        #expect(extra.isEmpty, "\(id): aspects the reference does not have: \(extra)")
        #expect(missing.isEmpty, "\(id): aspects the engine does not find: \(missing)")
        for (pair, want) in wanted {
            guard let aspect = found[pair] else { continue }
            #expect(want.planet1 < want.planet2, "\(id): fixture aspect \(pair) order")
            #expect(aspect.type == want.type, "\(id): \(pair) type \(aspect.type), expected \(want.type)")
            #expect(
                abs(aspect.orb - want.orb) <= orbTolerance,
                "\(id): \(pair) orb \(aspect.orb), expected \(want.orb)"
            )
            #expect(
                aspect.isApplying == want.isApplying,
                "\(id): \(pair) \(want.type) isApplying \(aspect.isApplying), expected \(want.isApplying)"
            )
        }
    }
}
