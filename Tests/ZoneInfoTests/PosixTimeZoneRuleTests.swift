import Testing
import ZoneInfo

/// Expected instants checked with `zdump -v -c 2024,2025` on the zones whose footer the string is
/// (or was: `<-03>3<-02>…` is America/Nuuk's rule before 2023), and by hand from the rules.
@Suite struct PosixTimeZoneRuleTests {
    private func rule(_ text: String) throws -> PosixTimeZoneRule { try PosixTimeZoneRule(parsing: text) }

    @Test func quotedNameWithoutDaylightSaving() throws {
        let kathmandu = try rule("<+0545>-5:45")
        #expect(kathmandu.standardName == "+0545")
        #expect(kathmandu.standardOffset == 20700)
        #expect(kathmandu.daylight == nil)
        #expect(kathmandu.offset(atSecond: 1_720_000_000) == 20700)
        #expect(kathmandu.nextTransition(afterSecond: 0) == nil)
    }

    @Test func offsetWithSeconds() throws {
        #expect(try rule("LMT-0:19:32").standardOffset == 1172)
        #expect(try rule("<-0330>3:30").standardOffset == -12600)
        #expect(try rule("UTC0").standardOffset == 0)
    }

    @Test func northernHemisphereRule() throws {
        let newYork = try rule("EST5EDT,M3.2.0,M11.1.0")
        #expect(newYork.daylight?.name == "EDT")
        #expect(newYork.daylight?.offset == -14400)
        // 2024-03-10T07:00Z and 2024-11-03T06:00Z.
        #expect(newYork.offset(atSecond: 1_710_053_999) == -18000)
        #expect(newYork.offset(atSecond: 1_710_054_000) == -14400)
        #expect(newYork.offset(atSecond: 1_730_613_599) == -14400)
        #expect(newYork.offset(atSecond: 1_730_613_600) == -18000)
        #expect(newYork.nextTransition(afterSecond: 1_700_000_000) == 1_710_054_000)
        #expect(newYork.nextTransition(afterSecond: 1_710_054_000) == 1_730_613_600)
    }

    @Test func negativeTransitionTimes() throws {
        let nuuk = try rule("<-03>3<-02>,M3.5.0/-2,M10.5.0/-1")
        #expect(nuuk.standardName == "-03")
        #expect(nuuk.daylight?.name == "-02")
        // 2024-03-31T01:00Z (Saturday 22:00 local) and 2024-10-27T01:00Z (Saturday 23:00 local).
        #expect(nuuk.offset(atSecond: 1_711_846_799) == -10800)
        #expect(nuuk.offset(atSecond: 1_711_846_800) == -7200)
        #expect(nuuk.offset(atSecond: 1_729_990_799) == -7200)
        #expect(nuuk.offset(atSecond: 1_729_990_800) == -10800)
    }

    @Test func negativeDaylightSavingInDublin() throws {
        let dublin = try rule("IST-1GMT0,M10.5.0,M3.5.0/1")
        #expect(dublin.standardOffset == 3600)
        #expect(dublin.daylight?.offset == 0)
        // Winter is the "daylight" part: +00:00 from 2024-10-27T01:00Z to 2025-03-30T01:00Z.
        #expect(dublin.offset(atSecond: 1_711_846_799) == 0)
        #expect(dublin.offset(atSecond: 1_711_846_800) == 3600)
        #expect(dublin.offset(atSecond: 1_729_990_799) == 3600)
        #expect(dublin.offset(atSecond: 1_729_990_800) == 0)
        #expect(dublin.offset(atSecond: 1_735_689_600) == 0)
    }

    @Test func southernHemisphereSpansTheNewYear() throws {
        let sydney = try rule("AEST-10AEDT,M10.1.0,M4.1.0/3")
        // 2024-04-06T16:00Z (03:00 AEDT) and 2024-10-05T16:00Z (02:00 AEST).
        #expect(sydney.offset(atSecond: 1_704_067_200) == 39600)
        #expect(sydney.offset(atSecond: 1_712_419_199) == 39600)
        #expect(sydney.offset(atSecond: 1_712_419_200) == 36000)
        #expect(sydney.offset(atSecond: 1_728_143_999) == 36000)
        #expect(sydney.offset(atSecond: 1_728_144_000) == 39600)
        #expect(sydney.nextTransition(afterSecond: 1_704_067_200) == 1_712_419_200)
        let lordHowe = try rule("<+1030>-10:30<+11>-11,M10.1.0,M4.1.0")
        #expect(lordHowe.offset(atSecond: 1_704_067_200) == 39600)
        #expect(lordHowe.offset(atSecond: 1_720_000_000) == 37800)
    }

    @Test func transitionTimesPastMidnight() throws {
        // Asia/Jerusalem: the Friday before the last Sunday of March, as Thursday 26:00.
        let jerusalem = try rule("IST-2IDT,M3.4.4/26,M10.5.0")
        #expect(jerusalem.offset(atSecond: 1_711_670_399) == 7200)
        #expect(jerusalem.offset(atSecond: 1_711_670_400) == 10800)
    }

    @Test func julianAndZeroBasedDays() throws {
        // J60 is March 1 even in a leap year; zero-based 59 is February 29 in 2024.
        let julian = try rule("XXX0YYY,J60/0,J300/0")
        #expect(julian.offset(atSecond: 1_709_251_199) == 0)
        #expect(julian.offset(atSecond: 1_709_251_200) == 3600)
        let zeroBased = try rule("XXX0YYY,59/0,300/0")
        #expect(zeroBased.offset(atSecond: 1_709_164_799) == 0)
        #expect(zeroBased.offset(atSecond: 1_709_164_800) == 3600)
        // Daylight saving time all year (RFC 8536's example): EDT throughout.
        let allYear = try rule("EST5EDT4,0/0,J365/25")
        for seconds in [1_704_067_200, 1_704_085_200, 1_720_000_000, 1_735_689_599, 1_735_707_600] {
            #expect(allYear.offset(atSecond: seconds) == -14400, "\(seconds)")
        }
        #expect(allYear.nextTransition(afterSecond: 1_704_067_200) == nil)
    }

    @Test func daylightSavingWithoutRuleUsesTheUSRule() throws {
        let rule = try rule("EST5EDT")
        #expect(rule.offset(atSecond: 1_710_054_000) == -14400)
    }

    @Test(arguments: [
        "", "EST", "E5", "<+05", "<+5>-5", "EST5EDT,M13.1.0,M11.1.0", "EST5EDT,M3.2.0", "EST5EDT,M3.6.0,M11.1.0",
        "EST5EDT,J0,J365", "EST5EDT,M3.2.0/168,M11.1.0", "EST5 ", "EST25",
    ])
    func malformedStringsAreRefused(text: String) {
        #expect(throws: ZoneInfoError.self) { try PosixTimeZoneRule(parsing: text) }
    }
}
