import Ephemeris
import Foundation
import Testing

@testable import AstroDomain
@testable import ChartEngine

/// The hand-written NatalChart JSON writer against Foundation's JSONEncoder, on computed charts.
@Suite struct ChartJSONWriterTests {
    /// One ephemeris for the suite; charts are computed on its own thread.
    static let engine: ChartEngine = {
        do {
            return ChartEngine(ephemeris: try Ephemeris())
        } catch {
            fatalError("the Swiss Ephemeris files are needed for these tests: \(error)")
        }
    }()

    static func birth(
        date: String = "1990-10-07",
        time: String = "15:00",
        timezone: String = "Europe/Kyiv",
        latitude: Double = 50.4501,
        longitude: Double = 30.5234,
        locationName: String = "Kyiv, Ukraine",
        houseSystem: ChartHouseSystem = .placidus,
        dstPolicy: DSTPolicy? = nil,
        points: [ChartPoint] = [],
        zodiac: ZodiacSystem = .tropical
    ) -> BirthData {
        BirthData(
            name: "Me",
            birthDate: date,
            birthTime: time,
            timezone: timezone,
            latitude: latitude,
            longitude: longitude,
            locationName: locationName,
            houseSystem: houseSystem,
            dstPolicy: dstPolicy,
            points: points,
            zodiac: zodiac
        )
    }

    /// Every kind of chart the engine makes: each house system, each zodiac, each point set,
    /// polar fallbacks, DST gaps and overlaps with each policy, the range ends, historical
    /// offsets, and many dates and places.
    static func fixtures() -> [BirthData] {
        var births: [BirthData] = [birth()]
        births += ChartHouseSystem.allCases.map { birth(houseSystem: $0) }
        births += ChartHouseSystem.allCases.map { birth(latitude: 78.2232, longitude: 15.6267, houseSystem: $0) }
        births += ChartHouseSystem.allCases.map { birth(latitude: -89.99, longitude: -179.5, houseSystem: $0) }
        births += [ZodiacSystem.tropical, .sidereal(.lahiri), .sidereal(.faganBradley), .sidereal(.raman)].map {
            birth(points: ChartPoint.allCases, zodiac: $0)
        }
        births += ChartPoint.allCases.map { birth(points: [$0]) }
        for policy in DSTPolicy.allCases {
            births.append(birth(date: "2021-03-28", time: "03:30", dstPolicy: policy))
            births.append(birth(date: "2021-10-31", time: "03:30", dstPolicy: policy))
            births.append(birth(date: "2021-03-14", time: "02:30", timezone: "America/New_York", dstPolicy: policy))
        }
        births.append(birth(date: "1900-01-01", time: "00:00"))
        births.append(birth(date: "2100-12-31", time: "23:59"))
        births.append(birth(date: "1919-06-15", time: "12:00", timezone: "Europe/Moscow", latitude: 55.7558))
        births.append(birth(latitude: 0, longitude: 0, locationName: ""))
        births.append(birth(latitude: -0.0, longitude: -0.0, locationName: "Null Island"))
        births.append(birth(latitude: 90, longitude: 180, houseSystem: .equal))
        births.append(birth(latitude: -90, longitude: -180, houseSystem: .wholeSign))
        births.append(birth(latitude: 1e-05, longitude: -1e-07))
        // The bench's places over a century of dates and times.
        let places: [(String, Double, Double)] = [
            ("Europe/Kyiv", 50.4501, 30.5234), ("America/New_York", 40.7128, -74.006),
            ("Asia/Kathmandu", 27.7172, 85.324), ("Australia/Sydney", -33.8688, 151.2093),
            ("America/Sao_Paulo", -23.5505, -46.6333), ("Africa/Nairobi", -1.2921, 36.8219),
            ("Asia/Kolkata", 28.6139, 77.209), ("America/St_Johns", 47.5615, -52.7126),
        ]
        let start = BirthDate(year: 1901, month: 1, day: 1).daysSince1970
        for index in 0..<400 {
            let place = places[index % places.count]
            let date = BirthDate(daysSince1970: start + index * 181 + index % 7)
            let time = BirthTime(hour: index * 7 % 24, minute: index * 13 % 60)
            births.append(
                birth(
                    date: date.description,
                    time: time.description,
                    timezone: place.0,
                    latitude: place.1,
                    longitude: place.2,
                    dstPolicy: .later,
                    points: index % 3 == 0 ? ChartPoint.allCases : []
                )
            )
        }
        return births
    }

    /// Strings that need escaping or are not ASCII, for names, locations and messages.
    static let edgeStrings: [String] = [
        "", "plain", "quote \" inside", "back\\slash", "slash / and </script>", "tab\there", "new\nline",
        "cr\rlf\r\n", "\u{0}\u{1}\u{7}\u{8}\u{B}\u{C}\u{1B}\u{1F}\u{7F}", "emoji 🪐✨👩‍👩‍👧", "Київ, Україна",
        "日本語", "\u{2028}\u{2029}\u{FEFF}", String(repeating: "\u{1}\"", count: 300), "e\u{301}", "\"\\\"\\",
        String(repeating: "long ", count: 200),
    ]

    /// Instants with and without milliseconds, before 1970 and far from now.
    static let edgeDates: [Date] = [
        Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_795_341_600),
        Date(timeIntervalSince1970: 1_795_341_600.123), Date(timeIntervalSince1970: 1_795_341_600.9996),
        Date(timeIntervalSince1970: 1_795_341_600.0004), Date(timeIntervalSince1970: -0.5),
        Date(timeIntervalSince1970: -1.0001), Date(timeIntervalSince1970: -2_208_988_800),
        Date(timeIntervalSince1970: -2_208_988_799.25), Date(timeIntervalSince1970: 4_133_980_799.999),
        Date(timeIntervalSince1970: 253_402_300_799), Date(timeIntervalSince1970: 253_402_300_800.5),
        Date(timeIntervalSince1970: -62_135_596_801), Date(timeIntervalSince1970: -30_610_224_000.75),
        Date(),
    ]

    static func expectSameJSON(_ chart: NatalChart, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let expected = Array(try JSONCoding.encoder.encode(chart))
        let written = try chart.jsonBytes()
        #expect(
            written == expected,
            "writer: \(String(decoding: written, as: UTF8.self))\nencoder: \(String(decoding: expected, as: UTF8.self))",
            sourceLocation: sourceLocation
        )
        #expect(Array(try chart.jsonData()) == expected, sourceLocation: sourceLocation)
        // The computed size holds the chart in one buffer; a buffer a third of the JSON is grown.
        let inOne = try NatalChartJSONWriter.encode(chart, capacity: NatalChartJSONWriter.capacity(for: chart))
        #expect(
            inOne.buffers == 1,
            "capacity(for:) fell short of \(expected.count) bytes",
            sourceLocation: sourceLocation
        )
        let grown = try NatalChartJSONWriter.encode(chart, capacity: expected.count / 3)
        #expect(grown.bytes == expected && grown.buffers > 1, sourceLocation: sourceLocation)
    }

    /// The writer copies enum raw values without looking for escapes; a new case with a quote,
    /// a backslash or a control character in its name must fail here first.
    @Test func enumNamesNeedNoEscapes() {
        let names: [String] =
            PlanetName.allCases.map(\.rawValue) + ChartPoint.allCases.map(\.rawValue)
            + AspectType.allCases.map(\.rawValue) + ChartHouseSystem.allCases.map(\.rawValue)
            + DSTPolicy.allCases.map(\.rawValue) + ZodiacSign.allCases.map(\.rawValue)
            + [ZodiacSystem.tropical.rawValue]
            + ZodiacSystem.Ayanamsa.allCases.map { ZodiacSystem.sidereal($0).rawValue }
        #expect(names.count > 40)
        for name in names {
            #expect(!name.isEmpty)
            #expect(
                name.utf8.allSatisfy { $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") },
                "\(name)"
            )
        }
    }

    @Test func computedChartsMatchJSONEncoder() async throws {
        var compared = 0
        for (index, birth) in Self.fixtures().enumerated() {
            let calculatedAt = Self.edgeDates[index % Self.edgeDates.count]
            let chart = try await Self.engine.chart(for: birth, calculatedAt: calculatedAt)
            try Self.expectSameJSON(chart)
            compared += 1
        }
        #expect(compared > 400)
    }

    @Test func fallbacksWarningsAndPoliciesAreCovered() async throws {
        var charts: [NatalChart] = []
        for birth in Self.fixtures() { charts.append(try await Self.engine.chart(for: birth)) }
        #expect(charts.contains { $0.houseSystemRequested != nil && !$0.warnings.isEmpty })
        #expect(charts.contains { $0.dstPolicyApplied == .earlier })
        #expect(charts.contains { $0.dstPolicyApplied == .later })
        #expect(charts.contains { $0.points?.count == ChartPoint.allCases.count })
        #expect(charts.contains { $0.zodiac == .sidereal(.faganBradley) })
        #expect(charts.contains { $0.planets.contains(where: \.isRetrograde) })
    }

    @Test func edgeStringsAndDatesMatchJSONEncoder() async throws {
        let base = try await Self.engine.chart(for: Self.birth(points: [.trueNode]))
        for text in Self.edgeStrings {
            var chart = base
            chart.locationName = text
            chart.timezone = text
            chart.birthDate = text
            chart.birthTime = text
            chart.engineVersion = text
            chart.ephemerisVersion = text
            chart.warnings = [
                NatalChart.Warning(code: text, message: text),
                NatalChart.Warning(code: NatalChart.Warning.houseSystemFallback, message: "m " + text),
            ]
            chart.houseSystemRequested = .koch
            chart.dstPolicyApplied = .earlier
            try Self.expectSameJSON(chart)
        }
        for date in Self.edgeDates {
            var chart = base
            chart.utc = date
            chart.calculatedAt = date
            try Self.expectSameJSON(chart)
        }
    }

    @Test func edgeNumbersMatchJSONEncoder() async throws {
        let numbers: [Double] = [
            0, -0.0, 1e-05, 0.0001, 0.00012, 2_448_172, 2_448_172.5, 1.5e+20, 1e16, 9_007_199_254_740_992,
            4_503_599_627_370_496, 1e15, 123_456_789_012_345_680, .leastNonzeroMagnitude, .leastNormalMagnitude,
            .greatestFiniteMagnitude, -.greatestFiniteMagnitude, 0.1 + 0.2, 100, -74.006, 359.99999999999994, 1e22,
            -1e-300,
        ]
        let base = try await Self.engine.chart(for: Self.birth())
        for value in numbers {
            var chart = base
            chart.ascendant = value
            chart.midheaven = -value
            chart.julianDayUT = value
            chart.latitude = value
            chart.longitude = value
            chart.planets[0].longitude = value
            chart.planets[0].latitude = value
            chart.planets[0].speed = value
            chart.houses[0].cusp = value
            chart.houses[0].number = Int(exactly: value.rounded(.towardZero)) ?? -7
            chart.planets[0].house = -12
            if !chart.aspects.isEmpty { chart.aspects[0].orb = value }
            try Self.expectSameJSON(chart)
        }
    }

    @Test func randomInstantsMatchISO8601() async throws {
        var generator = SystemRandomNumberGenerator()
        var chart = try await Self.engine.chart(for: Self.birth())
        chart.planets = []
        chart.houses = []
        chart.aspects = []
        for round in 0..<20_000 {
            let seconds: Double =
                switch round % 3 {
                case 0: Double.random(in: -2_208_988_800...4_133_980_800, using: &generator)
                case 1: Double(Int.random(in: -2_208_988_800_000...4_133_980_800_000, using: &generator)) / 1000
                default: Double(Int.random(in: -2_208_988_800...4_133_980_800, using: &generator))
                }
            chart.utc = Date(timeIntervalSince1970: seconds)
            chart.calculatedAt = Date(timeIntervalSinceReferenceDate: chart.utc.timeIntervalSinceReferenceDate + 0.5)
            let expected = Array(try JSONCoding.encoder.encode(chart))
            let written = try chart.jsonBytes()
            if written != expected {
                Issue.record("\(seconds): \(String(decoding: written, as: UTF8.self))")
                return
            }
        }
    }

    @Test func nonFiniteNumbersThrowLikeJSONEncoder() async throws {
        var chart = try await Self.engine.chart(for: Self.birth())
        for value in [Double.nan, .infinity, -.infinity] {
            chart.ascendant = value
            #expect(throws: EncodingError.self) { try JSONCoding.encoder.encode(chart) }
            #expect(throws: EncodingError.self) { try chart.jsonBytes() }
        }
    }

    @Test func writerOutputDecodesToTheChart() async throws {
        let chart = try await Self.engine.chart(
            for: Self.birth(points: ChartPoint.allCases),
            calculatedAt: Date(timeIntervalSince1970: 1_795_341_600)
        )
        let decoded = try JSONCoding.decoder.decode(NatalChart.self, from: Data(try chart.jsonBytes()))
        #expect(decoded == chart)
    }
}
