import AstroDomain
import Foundation
import Testing
import ZoneInfo

/// The zones and samples of `pythonZoneInfoReference`.
private let referenceSamples: [(zone: String, samples: [(seconds: Int, offset: Int)])] = {
    var zones: [(zone: String, samples: [(seconds: Int, offset: Int)])] = []
    for line in pythonZoneInfoReference.split(separator: "\n") {
        let text = line.trimmingCharacters(in: .whitespaces)
        guard let first = text.unicodeScalars.first else { continue }
        if CharacterSet.letters.contains(first) {
            zones.append((zone: text, samples: []))
            continue
        }
        for pair in text.split(separator: " ") {
            let parts = pair.split(separator: ":")
            zones[zones.count - 1].samples.append((seconds: Int(parts[0])!, offset: Int(parts[1])!))
        }
    }
    return zones
}()

private func load(_ identifier: String) throws -> ZoneInfoRules {
    try ZoneInfoRules.load(identifier: identifier)
}

private func date(_ seconds: Int) -> Date { Date(timeIntervalSince1970: TimeInterval(seconds)) }

@Suite struct ZoneInfoRulesTests {
    @Test func referenceCoversTheZonesAsked() {
        #expect(referenceSamples.count >= 30)
        let zones = Set(referenceSamples.map(\.zone))
        for zone in [
            "Europe/Amsterdam", "Europe/Kyiv", "Europe/Moscow", "America/New_York", "Australia/Sydney",
            "America/Santiago", "Pacific/Auckland", "Australia/Lord_Howe", "Asia/Kathmandu", "Europe/Dublin",
        ] {
            #expect(zones.contains(zone), "\(zone)")
        }
        #expect(referenceSamples.allSatisfy { $0.samples.count >= 18 })
    }

    @Test(arguments: referenceSamples.map(\.zone))
    func offsetsMatchPythonZoneInfo(zone: String) throws {
        let rules = try load(zone)
        let samples = try #require(referenceSamples.first { $0.zone == zone }).samples
        for sample in samples {
            #expect(
                rules.offset(at: date(sample.seconds)) == sample.offset,
                "\(zone) at \(ISO8601.string(from: date(sample.seconds)))"
            )
        }
    }

    @Test func historicalOffsetsFoundationLacks() throws {
        // 1935-06-01T12:00Z: Amsterdam summer time, +01:19:32 (Foundation: Brussels' +01:00).
        #expect(try load("Europe/Amsterdam").offset(at: date(-1_091_448_000)) == 4772)
        // 1935-12-01T12:00Z: Amsterdam Mean Time, +00:19:32.
        #expect(try load("Europe/Amsterdam").offset(at: date(-1_075_636_800)) == 1172)
        // 1919-06-15T12:00Z: Moscow, +04:31:19 (Moscow Double Summer Time); 1919-07-01, +04:00.
        #expect(try load("Europe/Moscow").offset(at: date(-1_595_160_000)) == 16279)
        #expect(try load("Europe/Moscow").offset(at: date(-1_593_777_600)) == 14400)
        // 1941-09-20T12:00Z: Kyiv under German occupation, +02:00.
        #expect(try load("Europe/Kyiv").offset(at: date(-892_468_800)) == 7200)
        // 1943-07-01T12:00Z: New York war time, −04:00.
        #expect(try load("America/New_York").offset(at: date(-836_395_200)) == -14400)
        // 1900-01-01T12:00Z: before the first transition, local mean time (type 0).
        #expect(try load("Asia/Kathmandu").offset(at: date(-2_208_945_600)) == 20476)
    }

    @Test func footerRuleDecidesAfterTheLastTransition() throws {
        let newYork = try load("America/New_York")
        #expect(newYork.footer == "EST5EDT,M3.2.0,M11.1.0")
        // 2099-03-08T07:00Z: second Sunday of March, 02:00 EST.
        #expect(newYork.offset(at: date(4_076_636_399)) == -18000)
        #expect(newYork.offset(at: date(4_076_636_400)) == -14400)
        #expect(newYork.nextTransition(after: date(4_076_600_000)) == date(4_076_636_400))
        let lordHowe = try load("Australia/Lord_Howe")
        // Thirty-minute daylight saving time.
        #expect(Set(lordHowe.localTimeTypes.suffix(2).map(\.utcOffset)) == [37800, 39600])
    }

    @Test func transitionsInARange() throws {
        let sydney = try load("Australia/Sydney")
        // 2099: DST ends on the first Sunday of April and starts on the first Sunday of October.
        let year = date(4_070_908_800)...date(4_102_444_799)
        let transitions = sydney.transitions(in: year)
        #expect(transitions.count == 2)
        for transition in transitions {
            let before = sydney.offset(at: transition.addingTimeInterval(-1))
            #expect(before != sydney.offset(at: transition))
        }
        #expect(sydney.offset(at: year.lowerBound) == 39600)
    }

    @Test func version1DataIsRead() throws {
        // A version 1 file: header, one transition at 0 from type 0 (+01:00) to type 1 (+02:00, DST).
        var bytes: [UInt8] = Array("TZif".utf8) + [0] + Array(repeating: 0, count: 15)
        for count: UInt32 in [0, 0, 0, 1, 2, 8] {
            bytes += [UInt8(count >> 24), UInt8(count >> 16 & 0xff), UInt8(count >> 8 & 0xff), UInt8(count & 0xff)]
        }
        bytes += [0, 0, 0, 100]  // transition at 100 s
        bytes += [1]
        bytes += [0, 0, 0x0e, 0x10, 0, 0]  // +3600, std, "ONE"
        bytes += [0, 0, 0x1c, 0x20, 1, 4]  // +7200, dst, "TWO"
        bytes += Array("ONE\0TWO\0".utf8)
        let rules = try ZoneInfoRules(data: Data(bytes), identifier: "Test/V1")
        #expect(rules.version == 1)
        #expect(rules.footer.isEmpty)
        #expect(rules.offset(at: date(99)) == 3600)
        #expect(rules.offset(at: date(100)) == 7200)
        #expect(rules.offset(at: date(1_000_000_000)) == 7200)
        #expect(rules.localTimeTypes.map(\.abbreviation) == ["ONE", "TWO"])
        #expect(rules.nextTransition(after: date(0)) == date(100))
        #expect(rules.nextTransition(after: date(100)) == nil)
        #expect(throws: ZoneInfoError.self) { try ZoneInfoRules(data: Data(bytes.dropLast(3)), identifier: "Cut") }
    }
}
