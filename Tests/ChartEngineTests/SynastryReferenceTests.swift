import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import Testing

// Synastry, composite and Davison charts against Fixtures/synastry_reference.json, written by
// scripts/reference/generate_synastry.py: the rules of CONTRACT.md "Charts for two" implemented
// independently in Python on pyswisseph 2.10.3.2 (a different midpoint formula for the Davison place,
// swe.cotrans for the composite ARMC). See the file's "source".

struct SynastryReferenceFile: Decodable {
    var source: String
    var pyswissephVersion: String
    var swissEphemerisVersion: String
    var caseCount: Int
    var cases: [SynastryReferenceCase]

    static let loaded: Result<SynastryReferenceFile, any Error> = Result {
        guard
            let url = Bundle.module.url(
                forResource: "synastry_reference",
                withExtension: "json",
                subdirectory: "Fixtures"
            )
        else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "Fixtures/synastry_reference.json"])
        }
        return try JSONDecoder().decode(SynastryReferenceFile.self, from: Data(contentsOf: url))
    }

    static var cases: [SynastryReferenceCase] { (try? loaded.get().cases) ?? [] }
}

struct SynastryReferenceCase: Decodable, Sendable, CustomTestStringConvertible {
    struct Input: Decodable, Sendable {
        var birthDate: String
        var birthTime: String
        var timezone: String
        var latitude: Double
        var longitude: Double
        var locationName: String
        var houseSystem: ChartHouseSystem

        var birthData: BirthData {
            BirthData(
                name: "Reference",
                birthDate: birthDate,
                birthTime: birthTime,
                timezone: timezone,
                latitude: latitude,
                longitude: longitude,
                locationName: locationName,
                houseSystem: houseSystem
            )
        }
    }

    struct Planet: Decodable, Sendable {
        var name: PlanetName
        var longitude: Double
        var latitude: Double
        var speed: Double
        var house: Int
    }

    struct Aspect: Decodable, Sendable {
        var planet1: PlanetName
        var planet2: PlanetName
        var type: AspectType
        var orb: Double
        var isApplying: Bool
    }

    struct Chart: Decodable, Sendable {
        var julianDayUT: Double
        var latitude: Double
        var longitude: Double?
        var houseSystem: ChartHouseSystem
        var houseSystemRequested: ChartHouseSystem?
        var planets: [Planet]
        var cusps: [Double]
        var ascendant: Double
        var midheaven: Double
        var aspects: [Aspect]?
    }

    struct InterAspectRow: Decodable, Sendable {
        var a: String
        var b: String
        var type: AspectType
        var orb: Double
        var maxOrb: Double
        var isApplying: Bool
    }

    struct Overlay: Decodable, Sendable {
        var point: String
        var house: Int
    }

    struct SynastryRows: Decodable, Sendable {
        var aspects: [InterAspectRow]
        var overlaysAInB: [Overlay]
        var overlaysBInA: [Overlay]
    }

    var id: String
    var tags: [String]
    var a: Input
    var b: Input
    var angleMaxOrb: Double?
    var synastry: SynastryRows
    var composite: Chart
    var davison: Chart

    var testDescription: String { id }
}

private let engine: ChartEngine = {
    do {
        return ChartEngine(ephemeris: try Ephemeris())
    } catch {
        fatalError("the Swiss Ephemeris files are needed for these tests: \(error)")
    }
}()

private let arcsecond = 1.0 / 3600

private func distance(_ first: Double, _ second: Double) -> Double {
    let difference = abs(first - second).truncatingRemainder(dividingBy: 360)
    return min(difference, 360 - difference)
}

private func charts(_ reference: SynastryReferenceCase) async throws -> (NatalChart, NatalChart) {
    (try await engine.chart(for: reference.a.birthData), try await engine.chart(for: reference.b.birthData))
}

/// Compares a NatalChart-shaped result with a reference chart: positions and cusps within 1″.
private func expectChart(_ chart: NatalChart, _ expected: SynastryReferenceCase.Chart, _ label: String) {
    #expect(abs(chart.julianDayUT - expected.julianDayUT) <= 1e-9, "\(label): julianDayUT")
    #expect(abs(chart.latitude - expected.latitude) <= 1e-9, "\(label): latitude \(chart.latitude)")
    if let longitude = expected.longitude {
        #expect(distance(chart.longitude, longitude) <= 1e-9, "\(label): longitude \(chart.longitude) vs \(longitude)")
    }
    #expect(chart.houseSystem == expected.houseSystem, "\(label): houseSystem")
    #expect(chart.houseSystemRequested == expected.houseSystemRequested, "\(label): houseSystemRequested")
    #expect(chart.planets.map(\.name) == expected.planets.map(\.name), "\(label): planets")
    for (planet, reference) in zip(chart.planets, expected.planets) {
        #expect(
            distance(planet.longitude, reference.longitude) <= arcsecond,
            "\(label): \(planet.name) \(planet.longitude) vs \(reference.longitude)"
        )
        #expect(abs(planet.latitude - reference.latitude) <= arcsecond, "\(label): \(planet.name) latitude")
        #expect(abs(planet.speed - reference.speed) <= 1e-6, "\(label): \(planet.name) speed")
        #expect(planet.house == reference.house, "\(label): \(planet.name) house \(planet.house)")
    }
    #expect(chart.houses.count == 12)
    for (house, cusp) in zip(chart.houses, expected.cusps) {
        #expect(distance(house.cusp, cusp) <= arcsecond, "\(label): cusp \(house.number) \(house.cusp) vs \(cusp)")
    }
    #expect(distance(chart.ascendant, expected.ascendant) <= arcsecond, "\(label): ascendant")
    #expect(distance(chart.midheaven, expected.midheaven) <= arcsecond, "\(label): midheaven")
    if let aspects = expected.aspects {
        let got = chart.aspects.map {
            "\($0.planet1.rawValue)-\($0.planet2.rawValue) \($0.type.rawValue) \($0.isApplying)"
        }
        let want = aspects.map { "\($0.planet1.rawValue)-\($0.planet2.rawValue) \($0.type.rawValue) \($0.isApplying)" }
        #expect(got == want, "\(label): aspects")
        for (aspect, reference) in zip(chart.aspects, aspects) {
            #expect(abs(aspect.orb - reference.orb) <= arcsecond, "\(label): orb \(aspect.planet1)-\(aspect.planet2)")
        }
    }
}

@Suite struct SynastryReferenceTests {
    @Test func fixtureLoads() throws {
        let file = try SynastryReferenceFile.loaded.get()
        #expect(file.caseCount == file.cases.count)
        #expect(file.cases.count >= 8)
        #expect(file.swissEphemerisVersion == Ephemeris.libraryVersion)
        let tags = Set(file.cases.flatMap(\.tags))
        #expect(tags.isSuperset(of: ["antimeridian", "equator", "polar", "angle-orbs"]))
    }

    /// Same pairs, types and applying flags in the same order; orbs within 1″; overlays exact.
    @Test(arguments: SynastryReferenceFile.cases)
    func synastryMatchesReference(_ reference: SynastryReferenceCase) async throws {
        let (a, b) = try await charts(reference)
        let synastry = try ChartEngine.synastry(a, b, options: SynastryOptions(angleMaxOrb: reference.angleMaxOrb))
        let got = synastry.aspects.map { "\($0.a.point)-\($0.b.point) \($0.type.rawValue) \($0.isApplying)" }
        let want = reference.synastry.aspects.map { "\($0.a)-\($0.b) \($0.type.rawValue) \($0.isApplying)" }
        #expect(got == want, "\(reference.id): inter-aspects")
        for (aspect, row) in zip(synastry.aspects, reference.synastry.aspects) {
            #expect(abs(aspect.orb - row.orb) <= arcsecond, "\(reference.id): orb \(row.a)-\(row.b)")
            #expect(aspect.maxOrb == row.maxOrb, "\(reference.id): maxOrb \(row.a)-\(row.b)")
            #expect(aspect.a.chart == .a && aspect.b.chart == .b)
        }
        #expect(
            synastry.overlaysAInB.map { "\($0.point.point) \($0.house)" }
                == reference.synastry.overlaysAInB.map { "\($0.point) \($0.house)" },
            "\(reference.id): A in B"
        )
        #expect(
            synastry.overlaysBInA.map { "\($0.point.point) \($0.house)" }
                == reference.synastry.overlaysBInA.map { "\($0.point) \($0.house)" },
            "\(reference.id): B in A"
        )
        #expect(synastry.overlaysAInB.allSatisfy { $0.point.chart == .a && $0.houseChart == .b })
    }

    @Test(arguments: SynastryReferenceFile.cases)
    func compositeMatchesReference(_ reference: SynastryReferenceCase) async throws {
        let (a, b) = try await charts(reference)
        let composite = try await engine.composite(a, b)
        expectChart(composite, reference.composite, "\(reference.id) composite")
        #expect(composite.warnings.first?.code == NatalChart.Warning.compositeChart)
        let fellBack = composite.warnings.contains { $0.code == NatalChart.Warning.houseSystemFallback }
        #expect(fellBack == reference.tags.contains("polar"), "\(reference.id): polar fallback warning")
        // On the caller's thread too, with the same result.
        let direct = try engine.compositeOnCurrentThread(a, b, calculatedAt: composite.calculatedAt)
        #expect(direct == composite)
    }

    @Test(arguments: SynastryReferenceFile.cases)
    func davisonMatchesReference(_ reference: SynastryReferenceCase) async throws {
        let (a, b) = try await charts(reference)
        let davison = try await engine.davison(a, b)
        expectChart(davison, reference.davison, "\(reference.id) davison")
        #expect(davison.warnings.first?.code == NatalChart.Warning.davisonChart)
        #expect(davison.timezone == "UTC")
        #expect(
            abs(davison.utc.timeIntervalSince1970 - (a.utc.timeIntervalSince1970 + b.utc.timeIntervalSince1970) / 2)
                < 1e-3
        )
    }
}
