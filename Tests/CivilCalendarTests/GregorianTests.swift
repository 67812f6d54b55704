import CivilCalendar
import Foundation
import Testing

@Suite("Gregorian calendar")
struct GregorianTests {
    @Test func knownDays() {
        #expect(Gregorian.daysSince1970(year: 1970, month: 1, day: 1) == 0)
        #expect(Gregorian.daysSince1970(year: 1969, month: 12, day: 31) == -1)
        #expect(Gregorian.daysSince1970(year: 2000, month: 3, day: 1) == 11_017)
        #expect(Gregorian.daysSince1970(year: 1, month: 1, day: 1) == -719_162)
        #expect(Gregorian.date(daysSince1970: 0) == (1970, 1, 1))
        #expect(Gregorian.date(daysSince1970: 11_016) == (2000, 2, 29))
        #expect(Gregorian.date(daysSince1970: -719_162) == (1, 1, 1))
    }

    @Test func leapYearsAndMonthLengths() {
        #expect(Gregorian.isLeapYear(2000))
        #expect(!Gregorian.isLeapYear(1900))
        #expect(Gregorian.isLeapYear(2024))
        #expect(!Gregorian.isLeapYear(2023))
        #expect(
            (1...12).map { Gregorian.daysIn(month: $0, year: 2024) } == [
                31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31,
            ]
        )
        #expect(Gregorian.daysIn(month: 2, year: 2100) == 28)
    }

    /// Every day of years -400 to 2800 round-trips, one after another, against Foundation's
    /// Gregorian calendar in UTC for the years it agrees on.
    @Test func daysRoundTripAndFollowOneAnother() {
        var previous: (year: Int, month: Int, day: Int)?
        for days in Gregorian.daysSince1970(
            year: -400,
            month: 1,
            day: 1
        )...Gregorian.daysSince1970(
            year: 2800,
            month: 12,
            day: 31
        ) {
            let date = Gregorian.date(daysSince1970: days)
            guard Gregorian.daysSince1970(year: date.year, month: date.month, day: date.day) == days else {
                Issue.record("day \(days) is \(date), which counts as another day")
                return
            }
            if let previous {
                let next =
                    previous.day < Gregorian.daysIn(month: previous.month, year: previous.year)
                    ? (previous.year, previous.month, previous.day + 1)
                    : previous.month < 12 ? (previous.year, previous.month + 1, 1) : (previous.year + 1, 1, 1)
                guard date == next else {
                    Issue.record("day \(days) is \(date), expected \(next)")
                    return
                }
            }
            previous = date
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        for days in stride(from: -100_000, through: 300_000, by: 997) {
            let parts = calendar.dateComponents(
                [.year, .month, .day],
                from: Date(timeIntervalSince1970: Double(days) * 86_400)
            )
            #expect(Gregorian.date(daysSince1970: days) == (parts.year!, parts.month!, parts.day!))
        }
    }
}
