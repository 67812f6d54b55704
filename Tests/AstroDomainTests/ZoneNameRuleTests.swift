import Foundation
import Testing

@testable import AstroDomain

/// Issue 29, F12: the one rule of what a zone name may be, and the bounded zone cache.
@Suite struct ZoneNameRuleTests {
    @Test(arguments: [
        "Europe/Kyiv", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "Etc/GMT-14", "America/Port-au-Prince",
        "UTC", "EST5EDT", "America/Argentina/ComodRivadavia",
    ])
    func ianaNamesAreAccepted(identifier: String) {
        #expect(BirthData.isIANAZoneName(identifier))
    }

    @Test(arguments: [
        "Europe/Kyiv\u{0}", "Europe/Kyiv\u{0}junk", "\u{0}Europe/Kyiv", "Europe/Ky\u{0}iv", "Europe/Kyiv\n",
        "Europe/Kyiv ", "Europe//Kyiv", "Europe/", "/Europe/Kyiv", "Europe/../Europe/Kyiv", "Europe/.Kyiv",
        "Europe/-Kyiv", "Etc/+5", "right/UTC", "posix/Europe/Kyiv", "Europe/Kyïv", "", "PST", "GMT+5",
        String(repeating: "A", count: 40) + "/" + String(repeating: "B", count: 30),
    ])
    func otherTextIsRefused(identifier: String) {
        #expect(!BirthData.isIANAZoneName(identifier), "\(identifier.debugDescription)")
    }

    /// The finding: `"Europe/Kyiv\u0000…"` passed the gateway's validation (Foundation reads the
    /// name up to the NUL) and dead-lettered in the worker. Now every entry point refuses it.
    @Test func aNulByteInTheZoneIsUnknownEverywhere() throws {
        let zone = "Europe/Kyiv\u{0}" + String(repeating: "x", count: 20)
        let birth = BirthData(
            name: "Me",
            birthDate: "1990-10-07",
            birthTime: "15:00",
            timezone: zone,
            latitude: 50.45,
            longitude: 30.52,
            locationName: ""
        )
        #expect(throws: ChartInputError.self) { try birth.validated() }
        #expect((try? birth.validated())?.timezone == nil)
        do {
            _ = try birth.validated()
        } catch {
            #expect(error.code == .unknownTimezone)
            #expect(error.field == "profile.timezone")
            // The message quotes the value escaped: no NUL reaches a log line or a problem document.
            #expect(!error.message.unicodeScalars.contains("\u{0}"))
        }
        #expect(throws: ChartInputError.self) { try BirthData.timeZone(named: zone) }
        #expect(FoundationTimeZones().rules(forIdentifier: zone) == nil)
        let request = """
            {"jobId":"\(UUID())","userId":"\(UUID())","profile":{"name":"Me","birthDate":"1990-10-07",
            "birthTime":"15:00","timezone":"Europe/Kyiv\\u0000x","latitude":50.45,"longitude":30.52}}
            """
        #expect(throws: ChartInputError.self) { try ChartCalculateRequest.decode(from: Data(request.utf8)) }
    }

    /// Many distinct refused names never reach the cache, and many distinct well-formed unknown
    /// names do not grow it past its bound. The look-ups use a cache of the test's own: the
    /// process's one is shared with tests running alongside.
    @Test func distinctBadNamesDoNotGrowTheFoundationZoneCache() {
        let cache = ZoneLookupCache<TimeZone>(capacity: 16, unknownCapacity: 8)
        #expect(BirthData.foundationTimeZone("Europe/Kyiv", cache: cache)?.identifier == "Europe/Kyiv")
        #expect(cache.count == 1)
        for index in 0..<3000 {
            #expect(throws: ChartInputError.self) { try BirthData.timeZone(named: "Europe/Kyiv\u{0}\(index)") }
            #expect(BirthData.foundationTimeZone("Europe/Kyiv\u{0}\(index)", cache: cache) == nil)
        }
        // Before the rule, each of the 3000 names was kept.
        #expect(cache.count == 1)
        for index in 0..<3000 {
            #expect(BirthData.foundationTimeZone("Mars/Crater\(index)", cache: cache) == nil)
        }
        #expect(cache.count == 1 + cache.unknownCapacity)
        #expect(BirthData.foundationTimeZone("Europe/Kyiv", cache: cache)?.identifier == "Europe/Kyiv")
        #expect((try? BirthData.timeZone(named: "Europe/Kyiv"))?.identifier == "Europe/Kyiv")
    }

    @Test func theCacheKeepsFoundZonesAndAtMostItsBoundOfUnknownOnes() {
        let cache = ZoneLookupCache<Int>(capacity: 3, unknownCapacity: 5)
        var loads = 0
        func look(_ name: String) -> Int? {
            cache.value(for: name) { name in
                loads += 1
                return name.hasPrefix("Known/") ? name.count : nil
            }
        }
        #expect(look("Known/A") == 7)
        #expect(look("Known/A") == 7)
        #expect(loads == 1)
        for index in 0..<100 { #expect(look("Unknown/X\(index)") == nil) }
        #expect(cache.count == 1 + 5)
        // Past its capacity a found zone is still returned, only not kept.
        for name in ["Known/BB", "Known/CCC", "Known/DDDD"] { #expect(look(name) == name.count) }
        #expect(cache.count == 3 + 5)
        #expect(look("Known/A") == 7)
        #expect(loads == 1 + 100 + 3)
    }
}
