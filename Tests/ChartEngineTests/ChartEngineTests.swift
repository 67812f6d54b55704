import AstroDomain
import Ephemeris
import Foundation
import Testing

@testable import ChartEngine

/// One ephemeris for the whole test process (it starts a thread and opens the data files).
private let engine: ChartEngine = {
    do {
        return ChartEngine(ephemeris: try Ephemeris())
    } catch {
        fatalError("the Swiss Ephemeris files are needed for these tests: \(error)")
    }
}()

/// A whole-second instant, so charts survive a JSON round trip unchanged.
private let fixedDate = Date(timeIntervalSince1970: 1_795_341_600)  // 2026-11-22T10:00:00Z

/// The contract's example birth.
private func kyiv(
    date: String = "1990-10-07",
    time: String = "15:00",
    latitude: Double = 50.4501,
    longitude: Double = 30.5234,
    timezone: String = "Europe/Kyiv",
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
        locationName: "Kyiv, Ukraine",
        houseSystem: houseSystem,
        dstPolicy: dstPolicy,
        points: points,
        zodiac: zodiac
    )
}

/// Runs `body` on a new thread and returns its result.
private func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.start()
    }
}

private func chartError(_ birth: BirthData) async -> ChartError? {
    do {
        _ = try await engine.chart(for: birth)
        return nil
    } catch {
        return error
    }
}

@Suite struct ChartEngineTests {
    @Test func contractExample() async throws {
        let chart = try await engine.chart(for: kyiv(), calculatedAt: fixedDate)
        #expect(ISO8601.string(from: chart.utc) == "1990-10-07T12:00:00Z")
        #expect(chart.julianDayUT == 2_448_172.0)
        #expect(chart.houseSystem == .placidus && chart.houseSystemRequested == nil)
        #expect(chart.warnings.isEmpty)
        #expect(chart.planets.map(\.name) == PlanetName.allCases)
        #expect(chart.houses.map(\.number) == Array(1...12))
        #expect(chart.points == nil)
        #expect(chart.zodiac == .tropical)
        #expect(chart.engineVersion == "chart-engine/1")
        #expect(chart.ephemerisVersion == "swisseph/" + Ephemeris.libraryVersion)
        // Golden values from pyswisseph 2.10.3.2 (bit-identical to Debian's libswe), computed with
        //   swe.set_ephe_path('/usr/share/libswe/ephe'); jd = swe.julday(1990, 10, 7, 12.0)
        //   swe.calc_ut(jd, swe.SUN, swe.FLG_SWIEPH | swe.FLG_SPEED); swe.houses_ex(jd, 50.4501, 30.5234, b'P')
        // (the contract's 194.1 / 300.2 / 231.7 are illustrative, not computed).
        let sun = try #require(chart.planet(.sun))
        #expect(abs(sun.longitude - 193.962_714_660_503_74) < 1e-9)
        #expect(abs(sun.speed - 0.986_382_190_752_375_1) < 1e-9)
        #expect(sun.sign == .libra)
        #expect(sun.house == 8)  // cusp 8 at 157.56°, cusp 9 at 201.44°
        #expect(!sun.isRetrograde)
        let moon = try #require(chart.planet(.moon))
        #expect(abs(moon.longitude - 55.222_111_023_818_925) < 1e-9)
        #expect(moon.sign == .taurus)
        #expect(abs(chart.ascendant - 284.834_035_862_102_9) < 1e-9)
        #expect(abs(chart.midheaven - 228.855_487_721_431_25) < 1e-9)
        #expect(abs(chart.houses[2].cusp - 21.443_415_415_300_33) < 1e-9)
        #expect(chart.houses[0].sign == .capricorn)
        #expect(chart.houses[0].cusp == chart.ascendant)
    }

    @Test func placementsFollowTheRules() async throws {
        let chart = try await engine.chart(for: kyiv(points: ChartPoint.allCases))
        let cusps = chart.houses.map(\.cusp)
        let bodies: [(Double, Double, ZodiacSign, Int, Bool)] =
            chart.planets.map { ($0.longitude, $0.speed, $0.sign, $0.house, $0.isRetrograde) }
            + (chart.points ?? []).map { ($0.longitude, $0.speed, $0.sign, $0.house, $0.isRetrograde) }
        for (longitude, speed, sign, house, isRetrograde) in bodies {
            #expect((0..<360).contains(longitude))
            #expect(sign == ZodiacSign(longitude: longitude))
            #expect(house == ChartMath.house(ofLongitude: longitude, cusps: cusps))
            #expect(isRetrograde == (speed < 0))
        }
        #expect(chart.points?.map(\.name) == ChartPoint.allCases)
        // The mean node always moves backwards.
        #expect(chart.points?.first?.isRetrograde == true)
        for house in chart.houses { #expect(house.sign == ZodiacSign(longitude: house.cusp)) }
    }

    @Test func aspectsCoverThePlanetPairsWithTheSeedOrbs() async throws {
        let chart = try await engine.chart(for: kyiv())
        #expect(chart.aspects.count <= 45)
        var seen: Set<String> = []
        for aspect in chart.aspects {
            #expect(aspect.planet1 < aspect.planet2)
            #expect(seen.insert("\(aspect.planet1)-\(aspect.planet2)").inserted)
            let first = try #require(chart.planet(aspect.planet1))
            let second = try #require(chart.planet(aspect.planet2))
            let separation = abs(ChartMath.signedSeparation(from: first.longitude, to: second.longitude))
            #expect(abs(separation - aspect.type.angle) == aspect.orb)
            #expect(aspect.orb <= aspect.type.maxOrb)
        }
        // Every pair without an aspect really has none.
        for (index, first) in chart.planets.enumerated() {
            for second in chart.planets[(index + 1)...] where !seen.contains("\(first.name)-\(second.name)") {
                #expect(ChartMath.aspect(between: (first.longitude, 0), and: (second.longitude, 0)) == nil)
            }
        }
    }

    @Test func deterministicApartFromCalculatedAt() async throws {
        let first = try await engine.chart(for: kyiv(points: [.meanNode]), calculatedAt: fixedDate)
        // The synchronous path, on a thread of its own (never on the concurrency pool).
        let secondChart = try await onOwnThread {
            try engine.chartOnCurrentThread(
                for: kyiv(points: [.meanNode]),
                calculatedAt: fixedDate.addingTimeInterval(3600)
            )
        }
        #expect(first != secondChart)
        #expect(first.ignoringCalculatedAt == secondChart.ignoringCalculatedAt)
        var aligned = secondChart
        aligned.calculatedAt = first.calculatedAt
        #expect(try first.jsonData() == aligned.jsonData())

        // Ids: name-based (version 8, RFC 9562 variant), all different within a chart.
        let ids =
            first.planets.map(\.id) + (first.points ?? []).map(\.id) + first.houses.map(\.id) + first.aspects.map(\.id)
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(id.description.count == 36)
            #expect(Array(id.description)[14] == "8")
            #expect("89ab".contains(Array(id.description)[19]))
        }
        // Another input, other ids.
        let other = try await engine.chart(for: kyiv(time: "15:01"))
        #expect(other.planets[0].id != first.planets[0].id)
        #expect(other.houses[0].id != first.houses[0].id)
    }

    @Test func polarChartFallsBackToPorphyry() async throws {
        let tromso = BirthData(
            name: "Polar",
            birthDate: "1990-10-07",
            birthTime: "15:00",
            timezone: "Europe/Oslo",
            latitude: 69.65,
            longitude: 18.96,
            locationName: "Tromsø, Norway"
        )
        let chart = try await engine.chart(for: tromso)
        #expect(chart.houseSystem == .porphyry)
        #expect(chart.houseSystemRequested == .placidus)
        let warning = try #require(chart.warnings.first)
        #expect(chart.warnings.count == 1)
        #expect(warning.code == "house-system-fallback")
        #expect(warning.message.contains("Placidus is undefined at latitude 69.65"))
        #expect(warning.message.contains("Porphyry cusps are used instead"))
        let object = try #require(try JSONSerialization.jsonObject(with: chart.jsonData()) as? [String: Any])
        #expect(object["houseSystem"] as? String == "porphyry")
        #expect(object["houseSystemRequested"] as? String == "placidus")

        var koch = tromso
        koch.houseSystem = .koch
        #expect(try await engine.chart(for: koch).houseSystemRequested == .koch)
        var porphyry = tromso
        porphyry.houseSystem = .porphyry
        let asked = try await engine.chart(for: porphyry)
        #expect(asked.houseSystem == .porphyry && asked.houseSystemRequested == nil && asked.warnings.isEmpty)
    }

    @Test func dstGapNeedsAPolicy() async throws {
        let error = await chartError(kyiv(date: "2021-03-28", time: "03:30"))
        #expect(error?.inputCode == .nonexistentLocalTime)
        #expect(error?.field == "profile.birthTime")
        #expect(error?.isPermanent == true)
        #expect(error?.jobError.code == "nonexistent-local-time")

        let chart = try await engine.chart(for: kyiv(date: "2021-03-28", time: "03:30", dstPolicy: .earlier))
        #expect(ISO8601.string(from: chart.utc) == "2021-03-28T01:30:00Z")
        #expect(chart.dstPolicyApplied == .earlier)
        #expect(chart.warnings.map(\.code) == ["dst-policy-applied"])
        #expect(chart.birthTime == "03:30")
    }

    @Test func dstOverlapNeedsAPolicy() async throws {
        let error = await chartError(kyiv(date: "2021-10-31", time: "03:30"))
        #expect(error?.inputCode == .ambiguousLocalTime)
        let later = try await engine.chart(for: kyiv(date: "2021-10-31", time: "03:30", dstPolicy: .later))
        #expect(ISO8601.string(from: later.utc) == "2021-10-31T01:30:00Z")
        #expect(later.dstPolicyApplied == .later)
        let earlier = try await engine.chart(for: kyiv(date: "2021-10-31", time: "03:30", dstPolicy: .earlier))
        #expect(ISO8601.string(from: earlier.utc) == "2021-10-31T00:30:00Z")
        #expect(earlier.julianDayUT < later.julianDayUT)
        // A policy that decided nothing is not recorded.
        let plain = try await engine.chart(for: kyiv(dstPolicy: .later))
        #expect(plain.dstPolicyApplied == nil && plain.warnings.isEmpty)
    }

    @Test func validationErrorsKeepTheirCodes() async {
        let latitude = await chartError(kyiv(latitude: 95))
        #expect(latitude?.inputCode == .latitudeOutOfRange)
        #expect(latitude?.field == "profile.latitude")
        #expect(latitude?.message == "profile.latitude: 95.0 is outside −90…90")
        #expect(await chartError(kyiv(longitude: 181))?.inputCode == .longitudeOutOfRange)
        #expect(await chartError(kyiv(date: "1899-12-31"))?.inputCode == .birthDateOutOfRange)
        #expect(await chartError(kyiv(date: "2001-02-29"))?.inputCode == .invalidBirthDate)
        #expect(await chartError(kyiv(time: "24:00"))?.inputCode == .invalidBirthTime)
        #expect(await chartError(kyiv(timezone: "Mars/Olympus"))?.inputCode == .unknownTimezone)
        for code in ErrorCode.chartInputCodes {
            let error = ChartError.invalidInput(ChartInputError(code, field: "f", message: "m"))
            #expect(error.code == code.rawValue && error.isPermanent)
        }
    }

    @Test func rangeEndsCompute() async throws {
        let first = try await engine.chart(for: kyiv(date: "1900-01-01", time: "00:00"))
        #expect(ISO8601.string(from: first.utc) == "1899-12-31T21:57:56Z")  // Kyiv mean time, +02:02:04
        let last = try await engine.chart(for: kyiv(date: "2100-12-31", time: "23:59"))
        #expect(ISO8601.string(from: last.utc) == "2100-12-31T21:59:00Z")
        #expect(try await engine.chart(for: kyiv(date: "2000-02-29")).birthDate == "2000-02-29")
    }

    @Test func historicalOffsetReachesTheJulianDay() async throws {
        // Moscow 1919-06-15 12:00 MDST (+04:31:19) is 07:28:41Z (zdump -v Europe/Moscow).
        let chart = try await engine.chart(
            for: BirthData(
                name: "M",
                birthDate: "1919-06-15",
                birthTime: "12:00",
                timezone: "Europe/Moscow",
                latitude: 55.7558,
                longitude: 37.6173,
                locationName: "Moscow"
            )
        )
        #expect(ISO8601.string(from: chart.utc) == "1919-06-15T07:28:41Z")
        let expected = Ephemeris.julianDayUT(year: 1919, month: 6, day: 15, hour: 7 + 28.0 / 60 + 41.0 / 3600)
        #expect(chart.julianDayUT == expected)
    }

    @Test func siderealCharts() async throws {
        let tropical = try await engine.chart(for: kyiv())
        let sidereal = try await engine.chart(for: kyiv(zodiac: .sidereal(.lahiri)))
        #expect(sidereal.zodiac == .sidereal(.lahiri))
        // The Lahiri ayanamsa was about 23.7° in 1990.
        let shift = ChartMath.normalizedDegrees(tropical.planets[0].longitude - sidereal.planets[0].longitude)
        #expect(abs(shift - 23.7) < 0.1)
        #expect(sidereal.planets[0].id != tropical.planets[0].id)
        let object = try #require(try JSONSerialization.jsonObject(with: sidereal.jsonData()) as? [String: Any])
        #expect(object["zodiac"] as? String == "sidereal:lahiri")
    }
}

@Suite struct NatalChartJSONTests {
    static let contractKeys: Set<String> = [
        "birthDate", "birthTime", "timezone", "utc", "julianDayUT", "latitude", "longitude", "locationName",
        "houseSystem", "warnings", "planets", "houses", "aspects", "ascendant", "midheaven", "calculatedAt",
    ]
    static let extensionKeys: Set<String> = ["zodiac", "engineVersion", "ephemerisVersion"]
    static let placementKeys: Set<String> = [
        "id", "name", "longitude", "latitude", "sign", "house", "isRetrograde", "speed",
    ]

    @Test func shapeMatchesTheContract() async throws {
        let chart = try await engine.chart(for: kyiv(), calculatedAt: fixedDate)
        let data = try chart.jsonData()
        let object = try #require(try JSONDecoder().decode(JSONValue.self, from: data).objectValue)
        #expect(Set(object.keys) == Self.contractKeys.union(Self.extensionKeys))

        #expect(object["birthDate"] == "1990-10-07")
        #expect(object["birthTime"] == "15:00")
        #expect(object["timezone"] == "Europe/Kyiv")
        #expect(object["utc"] == "1990-10-07T12:00:00Z")
        #expect(object["calculatedAt"] == "2026-11-22T10:00:00Z")
        #expect(object["locationName"] == "Kyiv, Ukraine")
        #expect(object["houseSystem"] == "placidus")
        #expect(object["zodiac"] == "tropical")
        #expect(object["engineVersion"] == "chart-engine/1")
        #expect(object["julianDayUT"] == .number(2_448_172.0))
        for key in ["latitude", "longitude", "ascendant", "midheaven"] {
            #expect(object[key]?.isNumber == true, "\(key) is a number")
        }
        #expect(object["warnings"] == .array([]))

        let planets = try #require(object["planets"]?.arrayValue)
        #expect(planets.count == 10)
        for planet in planets {
            let fields = try #require(planet.objectValue)
            #expect(Set(fields.keys) == Self.placementKeys)
            #expect(fields["id"]?.stringValue.flatMap(UUID.init(uuidString:)) != nil)
            #expect(fields["name"]?.stringValue != nil && fields["sign"]?.stringValue != nil)
            #expect(fields["longitude"]?.isNumber == true && fields["latitude"]?.isNumber == true)
            #expect(fields["speed"]?.isNumber == true && fields["house"]?.isNumber == true)
            #expect(fields["isRetrograde"]?.isBool == true)
        }
        #expect(planets[0]["name"] == "Sun")
        #expect(planets[0]["sign"] == "Libra")

        let houses = try #require(object["houses"]?.arrayValue)
        #expect(houses.count == 12)
        for house in houses {
            #expect(house.keySet == ["id", "number", "cusp", "sign"])
            #expect(house["cusp"]?.isNumber == true && house["sign"]?.stringValue != nil)
        }
        #expect(houses[0]["number"] == 1)
        #expect(houses[11]["number"] == 12)

        let aspects = try #require(object["aspects"]?.arrayValue)
        #expect(!aspects.isEmpty)
        for aspect in aspects {
            #expect(aspect.keySet == ["id", "planet1", "planet2", "type", "orb", "isApplying"])
            let type = aspect["type"]?.stringValue ?? ""
            #expect(["Conjunction", "Opposition", "Trine", "Square", "Sextile"].contains(type))
            #expect(aspect["orb"]?.isNumber == true && aspect["isApplying"]?.isBool == true)
        }

        // Sorted keys: the text itself is stable.
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.hasPrefix("{\"ascendant\":"))
        // And it reads back to the same chart, whatever the decoder's date strategy.
        #expect(try JSONCoding.decoder.decode(NatalChart.self, from: data) == chart)
        #expect(try JSONDecoder().decode(NatalChart.self, from: data) == chart)
    }

    @Test func optionalKeysAppearOnlyWhenSet() async throws {
        let chart = try await engine.chart(
            for: kyiv(date: "2021-10-31", time: "03:30", dstPolicy: .earlier, points: [.chiron, .trueNode])
        )
        let object = try #require(try JSONDecoder().decode(JSONValue.self, from: chart.jsonData()).objectValue)
        #expect(object["dstPolicyApplied"] == "earlier")
        #expect(object["houseSystemRequested"] == nil)
        let points = try #require(object["points"]?.arrayValue)
        #expect(points.map { $0["name"] } == ["TrueNode", "Chiron"])
        for point in points { #expect(point.keySet == Self.placementKeys) }
        let warnings = try #require(object["warnings"]?.arrayValue)
        #expect(warnings.count == 1)
        #expect(warnings[0]["code"] == "dst-policy-applied")
        #expect(warnings[0]["message"]?.stringValue?.isEmpty == false)
        #expect(warnings[0].keySet == ["code", "message"])
    }
}

extension JSONValue {
    fileprivate var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    fileprivate var keySet: Set<String> { Set(objectValue?.keys.map { $0 } ?? []) }

    fileprivate var arrayValue: [JSONValue]? {
        if case .array(let items) = self { return items }
        return nil
    }

    fileprivate var isNumber: Bool {
        if case .number = self { return true }
        return false
    }

    fileprivate var isBool: Bool {
        if case .bool = self { return true }
        return false
    }
}

@Suite struct DigestTests {
    @Test func sha256KnownAnswers() {
        // FIPS 180-4 examples.
        #expect(SHA256.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA256.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        )
        #expect(
            SHA256.hex(String(repeating: "a", count: 1000))
                == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        )
    }

    /// The digest the engine hands back with a chart is the one `inputDigest` prints.
    @Test func chartsComeWithTheirInputDigest() async throws {
        for birth in [
            kyiv(), kyiv(latitude: 50.4502), kyiv(points: [.chiron, .meanNode]), kyiv(zodiac: .sidereal(.raman)),
        ] {
            let (chart, digest) = try await engine.chartWithInputDigest(for: birth)
            #expect(digest == ChartEngine.inputDigest(birth))
            #expect(chart.latitude == birth.latitude)
        }
    }

    @Test func inputDigestIsStableAndSensitive() {
        let digest = ChartEngine.inputDigest(kyiv())
        #expect(digest.count == 64)
        #expect(digest == ChartEngine.inputDigest(kyiv()))
        var renamed = kyiv()
        renamed.name = "Someone else"  // no chart holds the name
        #expect(ChartEngine.inputDigest(renamed) == digest)
        var spaced = kyiv()
        spaced.locationName = "  Kyiv, Ukraine "
        #expect(ChartEngine.inputDigest(spaced) == digest)
        #expect(
            ChartEngine.inputDigest(kyiv(points: [.chiron, .meanNode]))
                == ChartEngine.inputDigest(kyiv(points: [.meanNode, .chiron]))
        )
        #expect(ChartEngine.inputDigest(kyiv(latitude: 50.4502)) != digest)
        #expect(ChartEngine.inputDigest(kyiv(houseSystem: .koch)) != digest)
        #expect(ChartEngine.inputDigest(kyiv(dstPolicy: .earlier)) != digest)
        #expect(ChartEngine.inputDigest(kyiv(zodiac: .sidereal(.raman))) != digest)
        #expect(ChartEngine.inputDigest(kyiv(points: [.chiron])) != digest)
        #expect(ChartEngine.inputDigest(kyiv(latitude: -0.0)) == ChartEngine.inputDigest(kyiv(latitude: 0)))
    }

    @Test func elementIDsAreSeededByOneDigest() {
        let seed = ElementIDSeed(digest: SHA256.hash("abc".utf8))
        let same = ElementIDSeed(digest: SHA256.hash("abc".utf8))
        let other = ElementIDSeed(digest: SHA256.hash("abd".utf8))
        let one = seed.id(.planet(.sun))
        #expect(one == same.id(.planet(.sun)))
        #expect(one != seed.id(.planet(.moon)))
        #expect(one != other.id(.planet(.sun)))
        #expect(one.uuid.uuid.6 >> 4 == 8)
        #expect(one.uuid.uuid.8 >> 6 == 0b10)

        // Every element of a chart, with every optional point, gets its own id.
        var tags: [ElementIDSeed.Tag] = PlanetName.allCases.map { .planet($0) }
        tags += ChartPoint.allCases.map { .point($0) }
        tags += (1...12).map { .house($0) }
        for (index, first) in PlanetName.allCases.enumerated() {
            for second in PlanetName.allCases[(index + 1)...] { tags.append(.aspect(first, second)) }
        }
        let ids = tags.map { seed.id($0) }
        #expect(Set(ids).count == tags.count)
        #expect(Set(ids).isDisjoint(with: tags.map { other.id($0) }))
        for id in ids {
            #expect(id.uuid.uuid.6 >> 4 == 8)
            #expect(id.uuid.uuid.8 >> 6 == 0b10)
        }
    }

    /// The canonical text as first written (one interpolated line per field): the digests stored
    /// with existing charts were taken of this text, so the byte builder must reproduce it.
    private static func referenceCanonicalInput(_ birth: BirthData) -> String {
        let fields: [(String, String)] = [
            ("engine", ChartEngine.version),
            ("ephemeris", ChartEngine.ephemerisVersion),
            ("birthDate", birth.birthDate),
            ("birthTime", birth.birthTime),
            ("timezone", birth.timezone),
            ("latitude", (birth.latitude + 0).description),
            ("longitude", (birth.longitude + 0).description),
            ("locationName", birth.locationName),
            ("houseSystem", birth.houseSystem.rawValue),
            ("dstPolicy", birth.dstPolicy?.rawValue ?? ""),
            ("points", birth.points.map(\.rawValue).joined(separator: ",")),
            ("zodiac", birth.zodiac.rawValue),
        ]
        return fields.map { key, value in "\(key):\(value.utf8.count):\(value)\n" }.joined()
    }

    @Test func digestTextIsUnchanged() throws {
        var births = [
            kyiv(), kyiv(latitude: -0.0), kyiv(dstPolicy: .later), kyiv(points: ChartPoint.allCases),
            kyiv(zodiac: .sidereal(.faganBradley)), kyiv(houseSystem: .wholeSign),
        ]
        var odd = kyiv()
        // Quotes, a tab-free mix of scripts and an emoji (control characters are refused now).
        odd.locationName = "Київ \"quoted\" 🪐 ёЁ"
        births.append(odd)
        for birth in births {
            let valid = try birth.validated()
            #expect(ChartEngine.canonicalInput(valid) == Self.referenceCanonicalInput(valid))
            #expect(ChartEngine.inputDigest(birth) == SHA256.hex(Self.referenceCanonicalInput(valid)))
        }
    }

    @Test func canonicalInputBytesAreTheCanonicalText() throws {
        let birth = try kyiv(points: [.chiron, .meanNode], zodiac: .sidereal(.lahiri)).validated()
        let text = ChartEngine.canonicalInput(birth)
        #expect(Array(text.utf8) == ChartEngine.canonicalInputBytes(birth))
        #expect(text.hasPrefix("engine:14:chart-engine/1\n"))
        #expect(text.contains("\nlocationName:13:Kyiv, Ukraine\n"))
        #expect(text.contains("\npoints:15:MeanNode,Chiron\n"))
        #expect(text.hasSuffix("\nzodiac:15:sidereal:lahiri\n"))
    }
}
