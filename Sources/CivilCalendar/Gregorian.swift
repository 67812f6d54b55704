/// The proleptic Gregorian calendar on days counted from 1970-01-01 (negative before it), with
/// H. Hinnant's era arithmetic (`days_from_civil`, `civil_from_days`): exact for every `Int` year
/// the callers use, no Foundation `Calendar`, no time zone.
///
/// The package's one copy of this arithmetic: birth dates, chart job instants, the TZif rules'
/// transition days and the ephemeris' calendar dates all use it.
public enum Gregorian {
    /// Whether `year` is a leap year.
    public static func isLeapYear(_ year: Int) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    /// The number of days in `month` (1–12) of `year`.
    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a date (negative before it). The date is not checked: day 0 or
    /// 32 count on from the month's start, as the arithmetic goes.
    public static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        // Years start in March in this arithmetic, so the leap day is the last day of a year.
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date `days` days after 1970-01-01 (before it when negative).
    public static func date(daysSince1970 days: Int) -> (year: Int, month: Int, day: Int) {
        // Eras of 400 years start on 0000-03-01.
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
