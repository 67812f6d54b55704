import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import Testing

private let engine: ChartEngine = {
    do {
        return ChartEngine(ephemeris: try Ephemeris())
    } catch {
        fatalError("the Swiss Ephemeris files are needed for these tests: \(error)")
    }
}()

private func birth(_ date: String, _ time: String, _ latitude: Double, _ longitude: Double) -> BirthData {
    BirthData(
        name: "Test",
        birthDate: date,
        birthTime: time,
        timezone: "UTC",
        latitude: latitude,
        longitude: longitude,
        locationName: "",
        houseSystem: .placidus
    )
}

@Suite struct RelationshipChartTests {
    @Test func midpointTakesTheShorterArcAndAFixedSideWhenOpposite() {
        #expect(ChartEngine.midpoint(350, 10) == 0)
        #expect(ChartEngine.midpoint(10, 350) == 0)
        #expect(ChartEngine.midpoint(100, 140) == 120)
        // Exactly opposite: 90° ahead of A, so the order of the charts decides.
        #expect(ChartEngine.midpoint(10.5, 190.5) == 100.5)
        #expect(ChartEngine.midpoint(190.5, 10.5) == 280.5)
        #expect(ChartEngine.midpoint(0, 180) == 90)
    }

    @Test func compositeOfExactlyOppositePlanetsFollowsTheRule() async throws {
        var a = try await engine.chart(for: birth("1990-10-07", "12:00", 50.45, 30.52))
        var b = try await engine.chart(for: birth("1992-03-15", "08:30", 51.5, -0.13))
        // Longitudes whose difference is exactly 180 in binary floating point.
        a.planets[0].longitude = 10.5
        b.planets[0].longitude = 190.5
        let exact = ChartMath.signedSeparation(from: a.planets[0].longitude, to: b.planets[0].longitude)
        try #require(exact == 180, "the test needs an exactly opposite pair")
        let composite = try await engine.composite(a, b)
        #expect(composite.planets[0].longitude == 100.5)
        let swapped = try await engine.composite(b, a)
        #expect(swapped.planets[0].longitude == 280.5)
    }

    @Test func greatCircleMidpointAcrossTheAntimeridianAndTheEquator() throws {
        let across = try #require(ChartEngine.greatCircleMidpoint((0, 179), (0, -179)))
        #expect(abs(abs(across.longitude) - 180) < 1e-9 && abs(across.latitude) < 1e-9)
        let equator = try #require(ChartEngine.greatCircleMidpoint((10, 20), (-10, 20)))
        #expect(abs(equator.latitude) < 1e-9 && abs(equator.longitude - 20) < 1e-9)
        let both = try #require(ChartEngine.greatCircleMidpoint((-20, 170), (20, -170)))
        #expect(abs(both.latitude) < 1e-9 && abs(abs(both.longitude) - 180) < 1e-9)
        #expect(ChartEngine.greatCircleMidpoint((10, 20), (-10, -160)) == nil, "antipodes")
        let pole = try #require(ChartEngine.greatCircleMidpoint((80, 0), (80, 180)))
        #expect(abs(pole.latitude - 90) < 1e-9)
    }

    @Test func davisonOfAntipodesIsRefused() async throws {
        let a = try await engine.chart(for: birth("1990-10-07", "12:00", 10, 20))
        let b = try await engine.chart(for: birth("1992-03-15", "08:30", -10, -160))
        await #expect(throws: RelationshipChartError.self) { try await engine.davison(a, b) }
        do {
            _ = try await engine.davison(a, b)
        } catch {
            #expect(error.code == "antipodal-places" && error.isPermanent)
        }
    }

    @Test func mismatchedZodiacsAndBadOptionsAreRefused() async throws {
        let a = try await engine.chart(for: birth("1990-10-07", "12:00", 50.45, 30.52))
        var sidereal = birth("1992-03-15", "08:30", 51.5, -0.13)
        sidereal.zodiac = .sidereal(.lahiri)
        let b = try await engine.chart(for: sidereal)
        #expect(throws: RelationshipChartError.zodiacMismatch("chart A is tropical and chart B is sidereal:lahiri")) {
            try ChartEngine.synastry(a, b)
        }
        do {
            _ = try await engine.composite(b, b)
            Issue.record("a sidereal composite was accepted")
        } catch {
            #expect(error.code == "unsupported-zodiac")
        }
        for bad in [-1.0, 8.5, .nan, .infinity] {
            #expect(throws: RelationshipChartError.self) {
                try ChartEngine.synastry(a, a, options: .init(angleMaxOrb: bad))
            }
        }
    }

    @Test func synastryWithItselfHasEveryConjunctionAndIsSymmetric() async throws {
        let a = try await engine.chart(for: birth("1990-10-07", "12:00", 50.45, 30.52))
        let synastry = try ChartEngine.synastry(a, a)
        for point in RelationshipPoint.all {
            let conjunction = synastry.aspects.first { $0.a.point == point && $0.b.point == point }
            #expect(conjunction?.type == .conjunction && conjunction?.orb == 0 && conjunction?.isApplying == false)
        }
        #expect(synastry.overlaysAInB.map(\.house) == synastry.overlaysBInA.map(\.house))
        #expect(synastry.overlaysAInB.first { $0.point.point == .ascendant }?.house == 1)
    }

    @Test func compatibilityIsBoundedDeterministicAndExplained() async throws {
        let a = try await engine.chart(for: birth("1990-10-07", "12:00", 50.45, 30.52))
        let b = try await engine.chart(for: birth("1992-03-15", "08:30", 51.5, -0.13))
        let synastry = try ChartEngine.synastry(a, b)
        let score = CompatibilityScoring.score(synastry)
        #expect((0...100).contains(score.score))
        #expect(score == CompatibilityScoring.score(synastry))
        #expect(!score.parts.isEmpty && score.parts.allSatisfy { !$0.explanation.isEmpty && $0.points != 0 })
        let harmony = score.parts.map(\.points).filter { $0 > 0 }.reduce(0, +)
        #expect(abs(harmony - score.harmony) < 1e-9)
        let expected = Int(
            (50 + 50 * (score.harmony - score.challenge) / (score.harmony + score.challenge + 10)).rounded()
        )
        #expect(score.score == expected)
        // Only trines between heavy points: the score rises above the balance; only squares: below.
        let trines = Synastry(
            options: .init(),
            aspects: RelationshipPoint.all.map { point in
                InterAspect(
                    a: .init(chart: .a, point: point, longitude: 0),
                    b: .init(chart: .b, point: point, longitude: 120),
                    type: .trine,
                    orb: 0,
                    maxOrb: 7,
                    isApplying: false
                )
            },
            overlaysAInB: [],
            overlaysBInA: [],
            houseSystemA: .placidus,
            houseSystemB: .placidus,
            engineVersion: ChartEngine.version
        )
        #expect(CompatibilityScoring.score(trines).score > 80)
        var squares = trines
        for index in squares.aspects.indices { squares.aspects[index].type = .square }
        #expect(CompatibilityScoring.score(squares).score < 20)
        // The result round-trips as JSON (it is a payload).
        let data = try JSONEncoder().encode(synastry)
        #expect(try JSONDecoder().decode(Synastry.self, from: data) == synastry)
    }
}
