import Foundation
import Testing

@testable import AstroDomain

/// Expected instants come from the tz database as `zdump -v <zone>` prints it on the build
/// machine (tzdata of Debian 12), quoted beside each test; Foundation reads the same rules.
@Suite struct LocalTimeTests {
    static func birth(_ date: String, _ time: String, _ zone: String, policy: DSTPolicy? = nil) -> BirthData {
        BirthData(
            name: "Test",
            birthDate: date,
            birthTime: time,
            timezone: zone,
            latitude: 50,
            longitude: 30,
            locationName: "",
            dstPolicy: policy
        )
    }

    /// The UTC instant of a local time, as an ISO 8601 string.
    static func utc(_ date: String, _ time: String, _ zone: String, policy: DSTPolicy? = nil) throws -> String {
        ISO8601.string(from: try birth(date, time, zone, policy: policy).resolveInstant().utc)
    }

    static func failure(_ date: String, _ time: String, _ zone: String) -> ChartInputError? {
        do {
            _ = try birth(date, time, zone).resolveInstant()
            return nil
        } catch {
            return error
        }
    }

    @Test func contractExample() throws {
        // zdump: Sat Jun 30 22:00:00 1990 UT = Sun Jul  1 01:00:00 1990 EEST gmtoff=10800
        let instant = try Self.birth("1990-10-07", "15:00", "Europe/Kyiv").resolveInstant()
        #expect(ISO8601.string(from: instant.utc) == "1990-10-07T12:00:00Z")
        #expect(instant.utcOffset == 10_800)
        #expect(instant.dstPolicyApplied == nil && instant.note == nil)
    }

    // MARK: Europe/Kyiv 2021: clocks forward 28 March 03:00 → 04:00, back 31 October 04:00 → 03:00.
    // zdump: Sun Mar 28 01:00:00 2021 UT = Sun Mar 28 04:00:00 2021 EEST gmtoff=10800
    //        Sun Oct 31 01:00:00 2021 UT = Sun Oct 31 03:00:00 2021 EET gmtoff=7200

    @Test func kyivGap() throws {
        let error = Self.failure("2021-03-28", "03:30", "Europe/Kyiv")
        #expect(error?.code == .nonexistentLocalTime)
        #expect(error?.field == "profile.birthTime")
        #expect(error?.message.contains("2021-03-28 03:30 does not exist in Europe/Kyiv") == true)
        // earlier: the offset before the change (+02:00); later: the offset after it (+03:00).
        #expect(try Self.utc("2021-03-28", "03:30", "Europe/Kyiv", policy: .earlier) == "2021-03-28T01:30:00Z")
        #expect(try Self.utc("2021-03-28", "03:30", "Europe/Kyiv", policy: .later) == "2021-03-28T00:30:00Z")
        // Either side of the gap is an ordinary time.
        #expect(try Self.utc("2021-03-28", "02:59", "Europe/Kyiv") == "2021-03-28T00:59:00Z")
        #expect(try Self.utc("2021-03-28", "04:00", "Europe/Kyiv") == "2021-03-28T01:00:00Z")
        #expect(Self.failure("2021-03-28", "03:00", "Europe/Kyiv")?.code == .nonexistentLocalTime)
    }

    @Test func kyivOverlap() throws {
        let error = Self.failure("2021-10-31", "03:30", "Europe/Kyiv")
        #expect(error?.code == .ambiguousLocalTime)
        #expect(error?.field == "profile.birthTime")
        #expect(try Self.utc("2021-10-31", "03:30", "Europe/Kyiv", policy: .earlier) == "2021-10-31T00:30:00Z")
        #expect(try Self.utc("2021-10-31", "03:30", "Europe/Kyiv", policy: .later) == "2021-10-31T01:30:00Z")
        #expect(try Self.utc("2021-10-31", "02:59", "Europe/Kyiv") == "2021-10-30T23:59:00Z")
        #expect(try Self.utc("2021-10-31", "04:00", "Europe/Kyiv") == "2021-10-31T02:00:00Z")
    }

    @Test func policyIsRecordedOnlyWhenItDecided() throws {
        let resolved = try Self.birth("2021-10-31", "03:30", "Europe/Kyiv", policy: .later).resolveInstant()
        #expect(resolved.dstPolicyApplied == .later)
        #expect(resolved.utcOffset == 7200)
        #expect(resolved.note?.contains("chose the second, 2021-10-31T01:30:00Z") == true)
        let ordinary = try Self.birth("2021-07-01", "12:00", "Europe/Kyiv", policy: .later).resolveInstant()
        #expect(ordinary.dstPolicyApplied == nil && ordinary.note == nil)
        #expect(ISO8601.string(from: ordinary.utc) == "2021-07-01T09:00:00Z")
    }

    // MARK: America/New_York 2021: forward 14 March 02:00 → 03:00, back 7 November 02:00 → 01:00.
    // zdump: Sun Mar 14 07:00:00 2021 UT = Sun Mar 14 03:00:00 2021 EDT gmtoff=-14400
    //        Sun Nov  7 06:00:00 2021 UT = Sun Nov  7 01:00:00 2021 EST gmtoff=-18000

    @Test func newYorkGapAndOverlap() throws {
        #expect(Self.failure("2021-03-14", "02:30", "America/New_York")?.code == .nonexistentLocalTime)
        #expect(try Self.utc("2021-03-14", "02:30", "America/New_York", policy: .earlier) == "2021-03-14T07:30:00Z")
        #expect(try Self.utc("2021-03-14", "02:30", "America/New_York", policy: .later) == "2021-03-14T06:30:00Z")
        #expect(Self.failure("2021-11-07", "01:30", "America/New_York")?.code == .ambiguousLocalTime)
        #expect(try Self.utc("2021-11-07", "01:30", "America/New_York", policy: .earlier) == "2021-11-07T05:30:00Z")
        #expect(try Self.utc("2021-11-07", "01:30", "America/New_York", policy: .later) == "2021-11-07T06:30:00Z")
    }

    // MARK: America/New_York war time.
    // zdump: Mon Feb  9 07:00:00 1942 UT = Mon Feb  9 03:00:00 1942 EWT isdst=1 gmtoff=-14400
    //        Tue Aug 14 23:00:00 1945 UT = Tue Aug 14 19:00:00 1945 EPT isdst=1 gmtoff=-14400
    //        Sun Sep 30 06:00:00 1945 UT = Sun Sep 30 01:00:00 1945 EST isdst=0 gmtoff=-18000

    @Test func newYorkWarTime() throws {
        // War time all year round: summer and winter alike at −04:00.
        #expect(try Self.utc("1943-07-04", "12:00", "America/New_York") == "1943-07-04T16:00:00Z")
        #expect(try Self.utc("1943-12-25", "12:00", "America/New_York") == "1943-12-25T16:00:00Z")
        #expect(try Self.utc("1942-02-08", "12:00", "America/New_York") == "1942-02-08T17:00:00Z")
        #expect(Self.failure("1942-02-09", "02:30", "America/New_York")?.code == .nonexistentLocalTime)
        #expect(Self.failure("1945-09-30", "01:30", "America/New_York")?.code == .ambiguousLocalTime)
        #expect(try Self.utc("1945-09-30", "01:30", "America/New_York", policy: .earlier) == "1945-09-30T05:30:00Z")
        #expect(try Self.utc("1945-09-30", "01:30", "America/New_York", policy: .later) == "1945-09-30T06:30:00Z")
    }

    // MARK: Europe/Kyiv 1941–43: Moscow time, then German occupation time.
    // zdump: Fri Jun 20 22:00:00 1930 UT = Sat Jun 21 01:00:00 1930 MSK isdst=0 gmtoff=10800
    //        Fri Sep 19 20:59:59 1941 UT = Fri Sep 19 23:59:59 1941 MSK isdst=0 gmtoff=10800
    //        Fri Sep 19 21:00:00 1941 UT = Fri Sep 19 23:00:00 1941 CEST isdst=1 gmtoff=7200
    //        Mon Nov  2 01:00:00 1942 UT = Mon Nov  2 02:00:00 1942 CET isdst=0 gmtoff=3600
    //        Fri Nov  5 23:00:00 1943 UT = Sat Nov  6 02:00:00 1943 MSK isdst=0 gmtoff=10800

    @Test func kyiv1941() throws {
        // Moscow time (+03:00) until 19 September 1941.
        #expect(try Self.utc("1941-06-22", "04:00", "Europe/Kyiv") == "1941-06-22T01:00:00Z")
        // The switch to CEST (+02:00) at midnight repeated 23:00–23:59.
        #expect(Self.failure("1941-09-19", "23:30", "Europe/Kyiv")?.code == .ambiguousLocalTime)
        #expect(try Self.utc("1941-09-19", "23:30", "Europe/Kyiv", policy: .earlier) == "1941-09-19T20:30:00Z")
        #expect(try Self.utc("1941-09-19", "23:30", "Europe/Kyiv", policy: .later) == "1941-09-19T21:30:00Z")
        // Occupation: CEST in autumn 1941, CET (+01:00) in the winter of 1942/43.
        #expect(try Self.utc("1941-10-15", "12:00", "Europe/Kyiv") == "1941-10-15T10:00:00Z")
        #expect(try Self.utc("1942-12-01", "12:00", "Europe/Kyiv") == "1942-12-01T11:00:00Z")
        // Back to Moscow time on 6 November 1943: 00:00–01:59 never showed.
        #expect(Self.failure("1943-11-06", "01:00", "Europe/Kyiv")?.code == .nonexistentLocalTime)
        #expect(try Self.utc("1943-11-06", "01:00", "Europe/Kyiv", policy: .earlier) == "1943-11-06T00:00:00Z")
        #expect(try Self.utc("1943-11-06", "01:00", "Europe/Kyiv", policy: .later) == "1943-11-05T22:00:00Z")
    }

    @Test func kyivMeanTime() throws {
        // zdump: Thu Jan  1 00:00:00 1880 KMT gmtoff=7324 … Thu May  1 21:57:56 1924 UT = 23:57:56 EET
        #expect(try Self.utc("1900-01-01", "00:00", "Europe/Kyiv") == "1899-12-31T21:57:56Z")
        // The 1924 change repeated 23:57:56–23:59:59 of 1 May.
        #expect(Self.failure("1924-05-01", "23:58", "Europe/Kyiv")?.code == .ambiguousLocalTime)
    }

    // MARK: Europe/Moscow 1916–1919: Moscow mean time with seconds, then MSK.
    // zdump: Wed Dec 31 21:29:43 1879 UT = Thu Jan  1 00:00:00 1880 MMT gmtoff=9017
    //        Sun Jul  2 21:29:43 1916 UT = Mon Jul  3 00:01:02 1916 MMT gmtoff=9079
    //        Sat May 31 19:28:41 1919 UT = Sun Jun  1 00:00:00 1919 MDST gmtoff=16279
    //        Tue Jul  1 00:00:00 1919 UT = Tue Jul  1 04:00:00 1919 MSD gmtoff=14400
    //        Fri Aug 15 20:00:00 1919 UT = Fri Aug 15 23:00:00 1919 MSK gmtoff=10800

    @Test func moscow1919() throws {
        // MST (+03:31:19) in May, MDST (+04:31:19) in June, MSD (+04:00) in July, MSK (+03:00) from mid-August.
        #expect(try Self.utc("1919-05-15", "12:00", "Europe/Moscow") == "1919-05-15T08:28:41Z")
        #expect(try Self.utc("1919-06-15", "12:00", "Europe/Moscow") == "1919-06-15T07:28:41Z")
        #expect(try Self.utc("1919-07-15", "12:00", "Europe/Moscow") == "1919-07-15T08:00:00Z")
        #expect(try Self.utc("1919-09-01", "12:00", "Europe/Moscow") == "1919-09-01T09:00:00Z")
        // 31 May 23:00–23:59 never showed (MST → MDST at midnight jumped to 00:00).
        let gap = try Self.birth("1919-05-31", "23:30", "Europe/Moscow", policy: .earlier).resolveInstant()
        #expect(ISO8601.string(from: gap.utc) == "1919-05-31T19:58:41Z")
        #expect(gap.note?.contains("from +03:31:19 to +04:31:19") == true)
        // 1 July 04:00:00–04:31:18 happened twice (MDST → MSD).
        #expect(Self.failure("1919-07-01", "04:15", "Europe/Moscow")?.code == .ambiguousLocalTime)
        #expect(try Self.utc("1919-07-01", "04:15", "Europe/Moscow", policy: .earlier) == "1919-06-30T23:43:41Z")
        #expect(try Self.utc("1919-07-01", "04:15", "Europe/Moscow", policy: .later) == "1919-07-01T00:15:00Z")
        #expect(try Self.utc("1919-07-01", "04:32", "Europe/Moscow") == "1919-07-01T00:32:00Z")
    }

    @Test func moscowMeanTimeSeconds() throws {
        #expect(try Self.utc("1900-01-01", "00:00", "Europe/Moscow") == "1899-12-31T21:29:43Z")
        // 3 July 1916 00:00:00–00:01:01 never showed: a gap of 62 seconds.
        #expect(Self.failure("1916-07-03", "00:00", "Europe/Moscow")?.code == .nonexistentLocalTime)
        #expect(try Self.utc("1916-07-03", "00:00", "Europe/Moscow", policy: .earlier) == "1916-07-02T21:29:43Z")
        #expect(try Self.utc("1916-07-03", "00:00", "Europe/Moscow", policy: .later) == "1916-07-02T21:28:41Z")
        #expect(try Self.utc("1916-07-03", "00:02", "Europe/Moscow") == "1916-07-02T21:30:41Z")
    }

    @Test func rangeEnds() throws {
        #expect(try Self.utc("2100-12-31", "23:59", "America/New_York") == "2101-01-01T04:59:00Z")
        #expect(try Self.utc("2100-12-31", "23:59", "Pacific/Kiritimati") == "2100-12-31T09:59:00Z")
        #expect(try Self.utc("1900-01-01", "00:00", "UTC") == "1900-01-01T00:00:00Z")
    }

    @Test func offsetsFormatWithSecondsOnlyWhenPresent() {
        #expect(LocalTimeConverter.formatOffset(7200) == "+02:00")
        #expect(LocalTimeConverter.formatOffset(-14_400) == "-04:00")
        #expect(LocalTimeConverter.formatOffset(9079) == "+02:31:19")
        #expect(LocalTimeConverter.formatOffset(0) == "+00:00")
    }
}
