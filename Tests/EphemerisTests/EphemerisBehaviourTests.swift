import Ephemeris
import Foundation
import Testing

/// A new empty directory, removed after `body`.
func withEmptyDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("ephemeris-empty-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: url) }
    return try await body(url.path)
}

@Suite("Ephemeris behaviour")
struct EphemerisBehaviourTests {
    static let j2000 = 2_451_545.0

    @Test func emptyDirectoryIsAMoshierFallback() async throws {
        try await withEmptyDirectory { path in
            do throws(EphemerisError) {
                _ = try Ephemeris(configuration: EphemerisConfiguration(path: path))
                Issue.record("init succeeded without data files")
            } catch {
                #expect(error.kind == .moshierFallback || error.kind == .filesMissing)
                #expect(error.message.contains(path), "message does not name the path: \(error.message)")
            }
        }
    }

    @Test func moshierFallbackWhenAllowed() async throws {
        try await withEmptyDirectory { path in
            let ephemeris = try Ephemeris(configuration: EphemerisConfiguration(path: path, allowMoshierFallback: true))
            defer { ephemeris.shutdown() }
            let moshier = try await ephemeris.positions(julianDayUT: Self.j2000, latitude: 0, longitude: 0)
            let files = try await SharedEphemeris.instance.positions(julianDayUT: Self.j2000, latitude: 0, longitude: 0)
            // Moshier is within about an arcsecond of the files for the Sun in 2000.
            let sun = try #require(moshier[.sun])
            #expect(angularDifference(sun.longitude, try #require(files[.sun]).longitude) < 0.001)

            // Chiron has no Moshier fallback: its asteroid file is required.
            do throws(EphemerisError) {
                _ = try await ephemeris.positions(
                    julianDayUT: Self.j2000,
                    latitude: 0,
                    longitude: 0,
                    bodies: [.chiron]
                )
                Issue.record("Chiron computed without seas_18.se1")
            } catch {
                #expect(error.kind == .filesMissing)
                #expect(error.message.contains("seas_18.se1"), "\(error.message)")
                #expect(error.message.contains("Chiron"))
            }
        }
    }

    @Test func missingDirectoryIsFilesMissing() {
        let path = "/nonexistent/ephe-\(UUID().uuidString)"
        do {
            _ = try Ephemeris(configuration: EphemerisConfiguration(path: path))
            Issue.record("init succeeded with a missing directory")
        } catch {
            #expect(error.kind == .filesMissing)
            #expect(error.message.contains(path))
        }
    }

    @Test func invalidConfiguration() {
        #expect(throws: EphemerisError.self) { try Ephemeris(configuration: EphemerisConfiguration(threads: 0)) }
        let longPath = "/" + String(repeating: "x", count: 300)
        do {
            _ = try Ephemeris(configuration: EphemerisConfiguration(path: longPath))
            Issue.record("init accepted a path libswe would ignore")
        } catch {
            #expect(error.kind == .invalidInput)
        }
    }

    @Test(arguments: [(91.0, 0.0), (-90.5, 0.0), (.nan, 0.0), (0.0, 180.5), (0.0, -181.0), (0.0, .infinity)])
    func invalidPlaceIsRejected(latitude: Double, longitude: Double) async {
        do {
            _ = try await SharedEphemeris.instance.positions(
                julianDayUT: Self.j2000,
                latitude: latitude,
                longitude: longitude
            )
            Issue.record("accepted latitude \(latitude), longitude \(longitude)")
        } catch {
            #expect(error.kind == .invalidInput)
        }
        do {
            _ = try SharedEphemeris.instance.positionsOnCurrentThread(
                julianDayUT: Self.j2000,
                latitude: latitude,
                longitude: longitude
            )
            Issue.record("accepted latitude \(latitude), longitude \(longitude) on the current thread")
        } catch {
            #expect(error.kind == .invalidInput)
        }
    }

    @Test func invalidJulianDayIsRejected() async {
        await #expect(throws: EphemerisError.self) {
            try await SharedEphemeris.instance.positions(julianDayUT: .nan, latitude: 0, longitude: 0)
        }
    }

    @Test func extremeLatitudesAreAccepted() async throws {
        for latitude in [-90.0, 90.0] {
            let chart = try await SharedEphemeris.instance.positions(
                julianDayUT: Self.j2000,
                latitude: latitude,
                longitude: 180
            )
            #expect(chart.houses.cusps.count == 12)
            #expect(chart.houses.cusps.allSatisfy { (0..<360).contains($0) })
        }
    }

    @Test func defaultsComputeThePlanets() async throws {
        let chart = try await SharedEphemeris.instance.positions(julianDayUT: Self.j2000, latitude: 50, longitude: 30)
        #expect(chart.bodies.map(\.body) == CelestialBody.planets)
        #expect(chart.houses.requested == .placidus)
        #expect(chart.houses.system == .placidus)
        #expect(chart.houses.fallbackReason == nil)
        #expect(chart.zodiac == .tropical)
        // The Sun at J2000 is at 280.37 degrees (Capricorn).
        #expect(abs(try #require(chart[.sun]).longitude - 280.3689) < 0.001)
    }

    @Test func siderealDiffersByTheAyanamsa() async throws {
        let tropical = try await SharedEphemeris.instance.positions(julianDayUT: Self.j2000, latitude: 0, longitude: 0)
        let lahiri = try await SharedEphemeris.instance.positions(
            julianDayUT: Self.j2000,
            latitude: 0,
            longitude: 0,
            zodiac: .sidereal(.lahiri)
        )
        let offset = angularDifference(try #require(tropical[.sun]).longitude, try #require(lahiri[.sun]).longitude)
        #expect(abs(offset - 23.857) < 0.01)  // Lahiri ayanamsa at J2000: 23°51'
    }

    @Test func julianDayOfKnownInstants() throws {
        #expect(Ephemeris.julianDayUT(year: 2000, month: 1, day: 1, hour: 12) == 2_451_545.0)
        #expect(Ephemeris.julianDayUT(Date(timeIntervalSince1970: 0)) == 2_440_587.5)
        #expect(Ephemeris.julianDayUT(Date(timeIntervalSince1970: 86_400 * 366 + 43_200)) == 2_440_954.0)
        let beforeEpoch = try Date("1969-12-31T18:00:00Z", strategy: .iso8601)
        #expect(Ephemeris.julianDayUT(beforeEpoch) == 2_440_587.25)
    }

    @Test func shutdownIsIdempotentAndRejectsLaterCalls() async throws {
        let ephemeris = try Ephemeris(configuration: EphemerisConfiguration(threads: 2))
        _ = try await ephemeris.positions(julianDayUT: Self.j2000, latitude: 10, longitude: 10)
        ephemeris.shutdown()
        ephemeris.shutdown()
        do {
            _ = try await ephemeris.positions(julianDayUT: Self.j2000, latitude: 10, longitude: 10)
            Issue.record("positions succeeded after shutdown")
        } catch {
            #expect(error.kind == .calculationFailed)
        }
    }

    /// 100 concurrent calls over 4 pinned threads, tropical and sidereal mixed (the same instants in different
    /// zodiacs, so a leaked sidereal mode would show), equal to the results computed one at a time.
    @Test(.timeLimit(.minutes(1)))
    func concurrentCallsEqualSequentialResults() async throws {
        let cases = ReferenceFile.cases
        try #require(!cases.isEmpty)
        let zodiacs: [Zodiac] = [.tropical, .sidereal(.lahiri), .tropical, .sidereal(.faganBradley), .sidereal(.raman)]
        let systems = HouseSystem.allCases
        struct Request: Sendable {
            var julianDayUT: Double
            var latitude: Double
            var longitude: Double
            var houseSystem: HouseSystem
            var zodiac: Zodiac
        }
        let requests = (0..<100).map { index in
            let reference = cases[(index / zodiacs.count * 7) % cases.count]
            return Request(
                julianDayUT: reference.input.julianDayUT,
                latitude: reference.input.latitude,
                longitude: reference.input.longitude,
                houseSystem: systems[index % systems.count],
                zodiac: zodiacs[index % zodiacs.count]
            )
        }
        let bodies = CelestialBody.allCases

        let sequentialEphemeris = try Ephemeris(configuration: EphemerisConfiguration(threads: 1))
        defer { sequentialEphemeris.shutdown() }
        var sequential: [ChartPositions] = []
        for request in requests {
            sequential.append(
                try await sequentialEphemeris.positions(
                    julianDayUT: request.julianDayUT,
                    latitude: request.latitude,
                    longitude: request.longitude,
                    bodies: bodies,
                    houseSystem: request.houseSystem,
                    zodiac: request.zodiac
                )
            )
        }

        let ephemeris = try Ephemeris(configuration: EphemerisConfiguration(threads: 4))
        defer { ephemeris.shutdown() }
        let concurrent = try await withThrowingTaskGroup(of: (Int, ChartPositions).self) { group in
            for (index, request) in requests.enumerated() {
                group.addTask {
                    let chart = try await ephemeris.positions(
                        julianDayUT: request.julianDayUT,
                        latitude: request.latitude,
                        longitude: request.longitude,
                        bodies: bodies,
                        houseSystem: request.houseSystem,
                        zodiac: request.zodiac
                    )
                    return (index, chart)
                }
            }
            var results = [ChartPositions?](repeating: nil, count: requests.count)
            for try await (index, chart) in group {
                results[index] = chart
            }
            return results
        }
        for index in requests.indices {
            #expect(concurrent[index] == sequential[index], "request \(index) differs from the sequential result")
        }
        // The zodiacs really differ, so equality above is meaningful.
        #expect(sequential[0].bodies[0].longitude != sequential[1].bodies[0].longitude)
    }

    @Test func errorDescriptionNamesKindAndMessage() {
        let error = EphemerisError(kind: .invalidInput, message: "latitude 91.0 is outside -90...90 degrees")
        #expect(error.description == "EphemerisError.invalidInput: latitude 91.0 is outside -90...90 degrees")
        #expect(error.debugDescription.contains("EphemerisBehaviourTests.swift"))
    }
}
