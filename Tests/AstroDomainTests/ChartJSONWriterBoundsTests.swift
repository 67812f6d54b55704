import Foundation
import Testing

@testable import AstroDomain

/// The chart JSON writer never writes past its buffer: generated charts of adversarial text and
/// extreme numbers, written into buffers of the computed size and of every size short of it,
/// give `JSONEncoder`'s bytes (or its error), never a trap. Built by hand rather than computed,
/// so that strings, counts and numbers go where no ephemeris would put them.
@Suite struct ChartJSONWriterBoundsTests {
    /// SplitMix64: the seed in a failure's message makes its chart again.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var mixed = state
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            return mixed ^ (mixed >> 31)
        }
    }

    /// Every byte the writer escapes (the 32 control characters, `"` and `\`), and text of every
    /// UTF-8 length that it must copy as is: `/`, DEL, 2-, 3- and 4-byte characters, a combining
    /// mark, a family emoji, the line and paragraph separators, a byte order mark.
    static let pieces: [String] =
        (0..<0x20).map { String(UnicodeScalar(UInt8($0))) } + [
            "\"", "\\", "/", "</script>", "\u{7F}", "é", "e\u{301}", "Київ", "日本語", "🪐", "👩‍👩‍👧",
            "\u{2028}", "\u{2029}", "\u{FEFF}", "a", " ", "\\u0000", "\"\\\"",
        ]

    static let edgeNumbers: [Double] = [
        0, -0.0, 1e-05, 2_448_172, 2_448_172.5, 1.5e+20, 9_007_199_254_740_992, .leastNonzeroMagnitude,
        -.leastNonzeroMagnitude, .leastNormalMagnitude, -2.2250738585072014e-308, .greatestFiniteMagnitude,
        -.greatestFiniteMagnitude, 0.1 + 0.2, 359.99999999999994, -1e-300, 123_456_789_012_345_680,
    ]

    static func text(_ generator: inout Generator) -> String {
        switch generator.next() % 8 {
        case 0: return ""
        // The costliest text per byte: a control character is six bytes of JSON.
        case 1: return String(repeating: "\u{1}", count: Int.random(in: 1...600, using: &generator))
        case 2:
            return (0..<Int.random(in: 200...1200, using: &generator)).map { _ in
                pieces.randomElement(using: &generator)!
            }
            .joined()
        default:
            return (0..<Int.random(in: 1...24, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }
                .joined()
        }
    }

    static func number(_ generator: inout Generator) -> Double {
        switch generator.next() % 4 {
        case 0: return edgeNumbers.randomElement(using: &generator)!
        case 1:
            // Any finite double, from its bits.
            while true {
                let value = Double(bitPattern: generator.next())
                if value.isFinite { return value }
            }
        default: return Double.random(in: -400...400, using: &generator)
        }
    }

    static func integer(_ generator: inout Generator) -> Int {
        switch generator.next() % 4 {
        case 0: [Int.min, Int.max, -1, 0, 10, -10, 1_000_000_007].randomElement(using: &generator)!
        case 1: Int(bitPattern: UInt(generator.next()))
        default: Int.random(in: 1...12, using: &generator)
        }
    }

    /// Instants in whole milliseconds, years 1 to 10000, both sides of the writer's own range
    /// (1583…9999) and of 1970, and instants that round to a millisecond across a boundary.
    static func date(_ generator: inout Generator) -> Date {
        if generator.next() % 8 == 0 {
            // Both sides of the Gregorian reform, of the writer's range, and of a rounding up to a new year.
            let seconds: [Double] = [
                -12_219_292_800, -12_219_292_800.001, -12_220_156_800, -12_212_553_600, -12_212_553_600.0004,
                -12_212_553_599.9996, 253_402_300_799.9994, 253_402_300_799.9996, 253_402_300_800, -62_135_596_800,
                -0.0004, 946_684_799.9996,
            ]
            return Date(timeIntervalSince1970: seconds.randomElement(using: &generator)!)
        }
        let milliseconds = Int64.random(in: -62_135_596_800_000...253_402_300_800_999, using: &generator)
        return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    static func id(_ generator: inout Generator) -> ChartElementID {
        let high = generator.next()
        let low = generator.next()
        let uuid = withUnsafeBytes(of: (high, low)) { raw in
            raw.load(as: uuid_t.self)
        }
        return ChartElementID(UUID(uuid: uuid))
    }

    static func placement<Name>(_ name: Name, _ generator: inout Generator) -> NatalChart.Placement<Name> {
        NatalChart.Placement(
            id: id(&generator),
            name: name,
            longitude: number(&generator),
            latitude: number(&generator),
            sign: ZodiacSign.allCases.randomElement(using: &generator)!,
            house: integer(&generator),
            isRetrograde: Bool.random(using: &generator),
            speed: number(&generator)
        )
    }

    /// Counts from none to many more than a computed chart has, text in every field that holds text.
    static func chart(_ generator: inout Generator) -> NatalChart {
        func count(_ usual: Int) -> Int {
            generator.next() % 8 == 0 ? Int.random(in: 0...120, using: &generator) : usual
        }
        let planets = (0..<count(10)).map { _ in
            placement(PlanetName.allCases.randomElement(using: &generator)!, &generator)
        }
        let points: [NatalChart.Point]? =
            Bool.random(using: &generator)
            ? nil
            : (0..<count(ChartPoint.allCases.count)).map { _ in
                placement(ChartPoint.allCases.randomElement(using: &generator)!, &generator)
            }
        let houses = (0..<count(12)).map { _ in
            NatalChart.House(
                id: id(&generator),
                number: integer(&generator),
                cusp: number(&generator),
                sign: ZodiacSign.allCases.randomElement(using: &generator)!
            )
        }
        let aspects = (0..<count(20)).map { _ in
            NatalChart.Aspect(
                id: id(&generator),
                planet1: PlanetName.allCases.randomElement(using: &generator)!,
                planet2: PlanetName.allCases.randomElement(using: &generator)!,
                type: AspectType.allCases.randomElement(using: &generator)!,
                orb: number(&generator),
                isApplying: Bool.random(using: &generator)
            )
        }
        let warnings = (0..<count(Int.random(in: 0...3, using: &generator))).map { _ in
            NatalChart.Warning(code: text(&generator), message: text(&generator))
        }
        let zodiacs: [ZodiacSystem] = [.tropical] + ZodiacSystem.Ayanamsa.allCases.map { .sidereal($0) }
        return NatalChart(
            birthDate: text(&generator),
            birthTime: text(&generator),
            timezone: text(&generator),
            utc: date(&generator),
            julianDayUT: number(&generator),
            latitude: number(&generator),
            longitude: number(&generator),
            locationName: text(&generator),
            houseSystem: ChartHouseSystem.allCases.randomElement(using: &generator)!,
            houseSystemRequested: Bool.random(using: &generator)
                ? nil : ChartHouseSystem.allCases.randomElement(using: &generator)!,
            warnings: warnings,
            planets: planets,
            points: points,
            houses: houses,
            aspects: aspects,
            ascendant: number(&generator),
            midheaven: number(&generator),
            zodiac: zodiacs.randomElement(using: &generator)!,
            dstPolicyApplied: Bool.random(using: &generator)
                ? nil : DSTPolicy.allCases.randomElement(using: &generator)!,
            engineVersion: text(&generator),
            ephemerisVersion: text(&generator),
            calculatedAt: date(&generator)
        )
    }

    /// Where the writer's bytes first differ from `JSONEncoder`'s, with some text either side; nil when equal.
    static func difference(_ written: [UInt8], _ expected: [UInt8]) -> String? {
        guard written != expected else { return nil }
        let at = zip(written, expected).prefix { $0 == $1 }.count
        func around(_ bytes: [UInt8]) -> String {
            String(decoding: bytes[max(0, at - 60)..<min(bytes.count, at + 60)], as: UTF8.self)
        }
        return
            "byte \(at) of \(expected.count) (written \(written.count)): writer …\(around(written))… encoder …\(around(expected))…"
    }

    @Test func generatedChartsMatchJSONEncoderInOneBufferOrInTooSmallOnes() throws {
        for seed in UInt64(1)...400 {
            var generator = Generator(state: seed)
            let chart = Self.chart(&generator)
            let expected = Array(try JSONCoding.encoder.encode(chart))
            let written = try NatalChartJSONWriter.encode(chart, capacity: NatalChartJSONWriter.capacity(for: chart))
            if let difference = Self.difference(written.bytes, expected) { Issue.record("seed \(seed): \(difference)") }
            // The computed size is a bound: charts take one buffer, so the fast path stays one pass.
            #expect(written.buffers == 1, "seed \(seed): capacity(for:) fell short of \(expected.count) bytes")
            for capacity in [0, 1, expected.count / 2, expected.count - 1, expected.count] {
                let retried = try NatalChartJSONWriter.encode(chart, capacity: capacity)
                if let difference = Self.difference(retried.bytes, expected) {
                    Issue.record("seed \(seed), a buffer of \(capacity) bytes: \(difference)")
                }
                #expect((retried.buffers == 1) == (capacity >= expected.count), "seed \(seed), \(capacity) bytes")
            }
        }
    }

    /// Each size from none to the whole JSON ends the buffer inside a different write (a byte,
    /// a copied run, an escape, a number, an id, a date), so each kind of write meets the end.
    @Test func everyBufferSizeShortOfTheJSONGivesTheSameBytes() throws {
        var generator = Generator(state: 0xC0FFEE)
        var chart = Self.chart(&generator)
        chart.planets = Array(chart.planets.prefix(3))
        chart.points = [Self.placement(.trueNode, &generator)]
        chart.houses = [NatalChart.House(id: Self.id(&generator), number: Int.min, cusp: -0.0, sign: .aries)]
        chart.aspects = Array(chart.aspects.prefix(2))
        chart.locationName = Self.pieces.joined()
        chart.timezone = "Europe/Kyiv"
        chart.warnings = [NatalChart.Warning(code: "c\u{1F}\"", message: "m\\\u{8}\u{C}\n\r\t")]
        chart.utc = Date(timeIntervalSince1970: 1_795_341_600.123)
        chart.calculatedAt = Date(timeIntervalSince1970: -62_135_596_801)
        chart.ascendant = -2.2250738585072014e-308
        chart.midheaven = 2_448_172
        let expected = Array(try JSONCoding.encoder.encode(chart))
        #expect(expected.count > 1500)
        for capacity in 0...expected.count {
            let written = try NatalChartJSONWriter.encode(chart, capacity: capacity)
            if let difference = Self.difference(written.bytes, expected) {
                Issue.record("a buffer of \(capacity) bytes: \(difference)")
                return
            }
        }
    }

    /// NaN and the infinities throw `JSONEncoder`'s error wherever they are and whatever the buffer,
    /// including when the buffer was already full before the number came.
    @Test func nonFiniteNumbersThrowAtEveryBufferSize() throws {
        var generator = Generator(state: 7)
        let base = Self.chart(&generator)
        var charts: [NatalChart] = []
        for value in [Double.nan, .infinity, -.infinity, -Double.nan] {
            var chart = base
            chart.midheaven = value
            charts.append(chart)
            chart = base
            chart.planets.append(Self.placement(.pluto, &generator))
            chart.planets[chart.planets.count - 1].speed = value
            charts.append(chart)
        }
        for chart in charts {
            #expect(throws: EncodingError.self) { try JSONCoding.encoder.encode(chart) }
            for capacity in [0, 1, 64, 1024, NatalChartJSONWriter.capacity(for: chart)] {
                #expect(throws: EncodingError.self) { try NatalChartJSONWriter.encode(chart, capacity: capacity) }
            }
            #expect(throws: EncodingError.self) { try chart.jsonBytes() }
        }
    }
}
