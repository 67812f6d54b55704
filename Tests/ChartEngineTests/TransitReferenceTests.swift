import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import Testing

// Transit instants, solar returns and progressions against Fixtures/transits_reference.json, written by
// scripts/reference/generate_transits.py: a plain fine scan + bisection in Python with pyswisseph 2.10.3.2 (no
// station handling, unlike the engine), swe.solcross_ut for the solar returns. See the file's "source".

struct TransitReferenceFile: Decodable {
    var source: String
    var pyswissephVersion: String
    var triplePasses: Int
    var cases: [TransitReferenceCase]

    static let loaded: Result<TransitReferenceFile, any Error> = Result {
        guard
            let url = Bundle.module.url(
                forResource: "transits_reference",
                withExtension: "json",
                subdirectory: "Fixtures"
            )
        else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "Fixtures/transits_reference.json"])
        }
        return try JSONDecoder().decode(TransitReferenceFile.self, from: Data(contentsOf: url))
    }
}

struct TransitReferenceCase: Decodable, CustomTestStringConvertible {
    /// One exact hit: transiting, natal, angle, exact JD, transiting speed.
    struct Hit: Decodable {
        var transiting: String
        var natal: String
        var angle: Double
        var jd: Double
        var speed: Double

        init(from decoder: any Decoder) throws {
            var row = try decoder.unkeyedContainer()
            transiting = try row.decode(String.self)
            natal = try row.decode(String.self)
            angle = try row.decode(Double.self)
            jd = try row.decode(Double.self)
            speed = try row.decode(Double.self)
        }
    }

    var name: String
    var birthDate: String
    var birthTime: String
    var latitude: Double
    var longitude: Double
    var fromJD: Double
    var toJD: Double
    var hits: [Hit]
    var solarReturnYear: Int
    var solarReturnJD: Double
    var progressedJD: Double
    var progressedPlanets: [Double]
    var progressedAscendant: Double
    var progressedMidheaven: Double

    var testDescription: String { name }

    var birth: BirthData {
        BirthData(
            name: name,
            birthDate: birthDate,
            birthTime: birthTime,
            timezone: "UTC",
            latitude: latitude,
            longitude: longitude,
            locationName: name
        )
    }
}

func dateOfJD(_ jd: Double) -> Date { Date(timeIntervalSince1970: (jd - 2_440_587.5) * 86_400) }
func jdOfDate(_ date: Date) -> Double { date.timeIntervalSince1970 / 86_400 + 2_440_587.5 }

let transitEngine: ChartEngine = {
    // The fixture was generated with this path; a missing directory fails the tests loudly.
    // swiftlint:disable:next force_try
    ChartEngine(ephemeris: try! Ephemeris(configuration: EphemerisConfiguration(threads: 2)))
}()

@Suite struct TransitReferenceTests {
    static var cases: [TransitReferenceCase] { (try? TransitReferenceFile.loaded.get().cases) ?? [] }

    @Test func fixtureHasTwentyChartsAndTriplePasses() throws {
        let file = try TransitReferenceFile.loaded.get()
        #expect(file.cases.count >= 20)
        #expect(file.triplePasses > 0)
        // A range before the birth, a range across a year boundary, polar charts (beyond 66.56°).
        #expect(
            file.cases.contains { reference in
                let parts = reference.birthDate.split(separator: "-").compactMap { Int($0) }
                return reference.toJD < Ephemeris.julianDayUT(year: parts[0], month: parts[1], day: parts[2], hour: 0)
            }
        )
        #expect(
            file.cases.contains {
                Calendar.current.component(.year, from: dateOfJD($0.fromJD))
                    != Calendar.current.component(.year, from: dateOfJD($0.toJD - 1))
            }
        )
        #expect(file.cases.filter { abs($0.latitude) > 66.56 }.count >= 2)
    }

    @Test(arguments: cases)
    func sameHitsWithin60Seconds(_ reference: TransitReferenceCase) async throws {
        let natal = try await transitEngine.chart(for: reference.birth)
        let report = try await transitEngine.transits(
            for: natal,
            from: dateOfJD(reference.fromJD),
            to: dateOfJD(reference.toJD)
        )
        struct Key: Hashable, Comparable {
            var transiting: String
            var natal: String
            var angle: Double
            static func < (a: Key, b: Key) -> Bool {
                (a.transiting, a.natal, a.angle) < (b.transiting, b.natal, b.angle)
            }
        }
        var ours: [Key: [(jd: Double, retrograde: Bool)]] = [:]
        for transit in report.transits {
            let key = Key(
                transiting: transit.transiting.rawValue,
                natal: transit.natal.description,
                angle: transit.angle
            )
            for hit in transit.hits { ours[key, default: []].append((jdOfDate(hit.exact), hit.isRetrograde)) }
        }
        var theirs: [Key: [TransitReferenceCase.Hit]] = [:]
        for hit in reference.hits {
            theirs[Key(transiting: hit.transiting, natal: hit.natal, angle: hit.angle), default: []].append(hit)
        }
        #expect(Set(ours.keys) == Set(theirs.keys))
        var compared = 0
        var worst = 0.0
        for (key, expected) in theirs {
            let found = (ours[key] ?? []).sorted { $0.jd < $1.jd }
            #expect(found.count == expected.count, "\(key): \(found.count) hits, reference \(expected.count)")
            guard found.count == expected.count else { continue }
            for (hit, want) in zip(found, expected.sorted(by: { $0.jd < $1.jd })) {
                let seconds = abs(hit.jd - want.jd) * 86_400
                worst = max(worst, seconds)
                #expect(seconds <= 60, "\(key) at JD \(want.jd): off by \(seconds) s")
                if abs(want.speed) > 1e-4 { #expect(hit.retrograde == (want.speed < 0), "\(key) at JD \(want.jd)") }
                compared += 1
            }
        }
        #expect(compared == reference.hits.count)
        #expect(worst < 60)
    }

    @Test(arguments: cases)
    func solarReturnWithinOneSecond(_ reference: TransitReferenceCase) async throws {
        let solarReturn = try await transitEngine.solarReturn(for: reference.birth, year: reference.solarReturnYear)
        let seconds = abs(jdOfDate(solarReturn.instant) - reference.solarReturnJD) * 86_400
        #expect(seconds <= 1, "off by \(seconds) s")
        let sun = try #require(solarReturn.chart.planets.first)
        #expect(abs(ChartMath.signedSeparation(from: solarReturn.natalSunLongitude, to: sun.longitude)) * 3600 < 1)
    }

    @Test(arguments: cases)
    func progressedPositionsWithinOneArcsecond(_ reference: TransitReferenceCase) async throws {
        let progressed = try await transitEngine.progressed(for: reference.birth, target: dateOfJD(reference.fromJD))
        #expect(abs(jdOfDate(progressed.progressedInstant) - reference.progressedJD) * 86_400 < 0.01)
        for (planet, want) in zip(progressed.chart.planets, reference.progressedPlanets) {
            let arcseconds = abs(ChartMath.signedSeparation(from: want, to: planet.longitude)) * 3600
            #expect(arcseconds < 1, "\(planet.name): \(arcseconds)″")
        }
        #expect(
            abs(ChartMath.signedSeparation(from: reference.progressedAscendant, to: progressed.chart.ascendant)) * 3600
                < 1
        )
        #expect(
            abs(ChartMath.signedSeparation(from: reference.progressedMidheaven, to: progressed.chart.midheaven)) * 3600
                < 1
        )
    }
}

@Suite struct TransitSearchRuleTests {
    static func natal() async throws -> NatalChart {
        try await transitEngine.chart(
            for: BirthData(
                name: "T",
                birthDate: "1990-10-07",
                birthTime: "12:00",
                timezone: "UTC",
                latitude: 50.45,
                longitude: 30.52,
                locationName: "Kyiv"
            )
        )
    }

    @Test func aRangeLongerThanALeapYearIsRefusedWithItsCode() async throws {
        let natal = try await Self.natal()
        let from = dateOfJD(2_460_000.5)
        await #expect(throws: TransitError.rangeTooLong(days: 367)) {
            _ = try await transitEngine.transits(for: natal, from: from, to: from.addingTimeInterval(367 * 86_400))
        }
        do {
            _ = try await transitEngine.transits(for: natal, from: from, to: from)
            Issue.record("an empty range was accepted")
        } catch {
            #expect(error.code == "transit-range-invalid")
        }
        do {
            _ = try await transitEngine.transits(
                for: natal,
                from: from,
                to: from.addingTimeInterval(86_400),
                orb: .fixed(0)
            )
            Issue.record("orb 0 was accepted")
        } catch {
            #expect(error.code == "transit-orb-invalid")
        }
    }

    @Test func orbWindowsEncloseTheirHitsAndSitAtTheOrb() async throws {
        let natal = try await Self.natal()
        let from = dateOfJD(2_460_676.5)  // 2025-01-01
        let report = try await transitEngine.transits(for: natal, from: from, to: from.addingTimeInterval(365 * 86_400))
        #expect(report.transits.count > 1000)
        let ephemeris = transitEngine.ephemeris
        var checked = 0
        for transit in report.transits where transit.transiting != .moon {
            let target: Double =
                switch transit.natal {
                case .planet(let name): natal.planets.first { $0.name == name }!.longitude + transit.angle
                case .ascendant: natal.ascendant + transit.angle
                case .midheaven: natal.midheaven + transit.angle
                }
            for hit in transit.hits {
                if let enters = transit.entersOrb { #expect(enters < hit.exact) }
                if let leaves = transit.leavesOrb { #expect(leaves > hit.exact) }
            }
            for boundary in [transit.entersOrb, transit.leavesOrb].compactMap({ $0 }) {
                let position = try await ephemeris.positions(
                    julianDayUT: jdOfDate(boundary),
                    latitude: 0,
                    longitude: 0,
                    bodies: [CelestialBody(rawValue: transit.transiting.rawValue)!]
                )
                let separation = abs(ChartMath.signedSeparation(from: target, to: position.bodies[0].longitude))
                #expect(abs(separation - transit.orb) < 1e-5, "\(transit.transiting) \(transit.natal) \(transit.angle)")
                checked += 1
            }
        }
        #expect(checked > 100)
        // Ingresses: every sign ingress names the sign the planet is in just after it.
        #expect(report.ingresses.contains { $0.kind == .sign && $0.planet == .sun })
        #expect(report.ingresses.filter { $0.kind == .sign && $0.planet == .sun }.count == 12)
        #expect(report.ingresses.filter { $0.kind == .house && $0.planet == .sun }.count == 12)
    }

    @Test func theReportRoundTripsAsJSON() async throws {
        let natal = try await Self.natal()
        let from = dateOfJD(2_460_676.5)
        let report = try await transitEngine.transits(for: natal, from: from, to: from.addingTimeInterval(30 * 86_400))
        let data = try JSONCoding.encoder.encode(report)
        let back = try JSONCoding.decoder.decode(TransitReport.self, from: data)
        #expect(back.transits.count == report.transits.count)
        #expect(back.transits.first?.natal == report.transits.first?.natal)
    }
}
