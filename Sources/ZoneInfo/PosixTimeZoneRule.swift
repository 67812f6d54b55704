import AstroDomain
import CivilCalendar

/// A POSIX TZ string as found in the footer of a TZif file (RFC 8536 section 3.3), such as
/// `EST5EDT,M3.2.0,M11.1.0` or `<+0545>-5:45`: the rule for instants after the last transition.
///
/// Offsets in the string count hours west of Greenwich (`EST5` is UTC−5); this type stores them
/// as seconds east of UTC, like `ZoneInfoRules`. Transition times may be negative or exceed 24
/// hours (RFC 8536 version 3, up to ±167 hours), and daylight saving time may span the new year
/// (southern hemisphere) or, with a negative saving such as Dublin's `IST-1GMT0,M10.5.0,M3.5.0/1`,
/// be the "standard" part of the string.
public struct PosixTimeZoneRule: Sendable, Hashable {
    /// The day of the year a change happens on.
    public enum Day: Sendable, Hashable {
        /// `Jn`: day 1…365, February 29 never counted (so `J60` is always March 1).
        case julian(Int)
        /// `n`: day 0…365 counting from January 1, February 29 counted in leap years.
        case zeroBased(Int)
        /// `Mm.w.d`: weekday `d` (0 is Sunday) of week `w` (1…5, 5 the last) of month `m` (1…12).
        case monthWeekDay(month: Int, week: Int, weekday: Int)
    }

    /// When a change happens: a day and a local time on it (seconds, possibly negative or over 24 h).
    public struct Change: Sendable, Hashable {
        /// The day.
        public var day: Day
        /// Seconds after local midnight of `day`, read in the local time in effect before the change.
        public var time: Int
    }

    /// The daylight-saving part of a rule.
    public struct Daylight: Sendable, Hashable {
        /// The abbreviation, such as `EDT` or `+02` (without the quoting angle brackets).
        public var name: String
        /// Seconds east of UTC while it is in effect.
        public var offset: Int
        /// When it starts, in standard local time.
        public var start: Change
        /// When it ends, in daylight local time.
        public var end: Change
    }

    /// The standard-time abbreviation (without angle brackets).
    public var standardName: String
    /// Seconds east of UTC in standard time.
    public var standardOffset: Int
    /// The daylight-saving rule; `nil` for a zone without one.
    public var daylight: Daylight?

    /// Parses a POSIX TZ string.
    /// - Parameter text: the string, such as `CET-1CEST,M3.5.0,M10.5.0/3`.
    /// - Throws: `ZoneInfoError` with code `malformed` when it is not a valid TZ string.
    public init(parsing text: String) throws(ZoneInfoError) {
        var parser = Parser(bytes: Array(text.utf8), text: text)
        standardName = try parser.name()
        standardOffset = -(try parser.time(maximumHours: 24))
        guard !parser.atEnd else {
            daylight = nil
            return
        }
        let daylightName = try parser.name()
        var daylightOffset = standardOffset + 3600
        if let byte = parser.peek, byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || isDigit(byte) {
            daylightOffset = -(try parser.time(maximumHours: 24))
        }
        var start = Change(day: .monthWeekDay(month: 3, week: 2, weekday: 0), time: 7200)
        var end = Change(day: .monthWeekDay(month: 11, week: 1, weekday: 0), time: 7200)
        if !parser.atEnd {
            try parser.expect(UInt8(ascii: ","))
            start = try parser.change()
            try parser.expect(UInt8(ascii: ","))
            end = try parser.change()
        }
        guard parser.atEnd else { throw parser.failure("trailing characters") }
        daylight = Daylight(name: daylightName, offset: daylightOffset, start: start, end: end)
    }

    /// The offset from UTC, in seconds east, at an instant.
    /// - Parameter seconds: seconds since 1970-01-01T00:00:00Z.
    /// - Returns: the daylight offset while daylight saving time is in effect, the standard one otherwise.
    public func offset(atSecond seconds: Int) -> Int {
        guard let daylight else { return standardOffset }
        // The latest change at or before `seconds`, among those of the neighbouring years (a
        // change time is at most a week away from its day, so one year each side suffices).
        // On a tie the start wins, so a rule with daylight time all year stays in it.
        let year = Gregorian.date(daysSince1970: floorDivide(seconds + standardOffset, 86_400)).year
        var latest = Int.min
        var isDaylight = false
        for candidate in (year - 1)...(year + 1) {
            let (start, end) = changes(in: candidate, daylight: daylight)
            if end <= seconds, end > latest {
                latest = end
                isDaylight = false
            }
            if start <= seconds, start >= latest {
                latest = start
                isDaylight = true
            }
        }
        return isDaylight ? daylight.offset : standardOffset
    }

    /// The first instant after `seconds` at which the offset changes.
    /// - Parameter seconds: seconds since 1970-01-01T00:00:00Z.
    /// - Returns: seconds since 1970 of the change, or `nil` for a rule that never changes offset.
    public func nextTransition(afterSecond seconds: Int) -> Int? {
        guard let daylight, daylight.offset != standardOffset else { return nil }
        let year = Gregorian.date(daysSince1970: floorDivide(seconds + standardOffset, 86_400)).year
        var cursor = seconds
        // At most four changes (two years) are skipped before one that changes the offset.
        for _ in 0..<4 {
            var next = Int.max
            for candidate in (year - 1)...(year + 3) {
                let (start, end) = changes(in: candidate, daylight: daylight)
                if start > cursor, start < next { next = start }
                if end > cursor, end < next { next = end }
            }
            guard next != Int.max else { return nil }
            if offset(atSecond: next) != offset(atSecond: next - 1) { return next }
            cursor = next
        }
        return nil
    }

    /// The UTC instants (seconds since 1970) at which daylight time starts and ends in a year.
    private func changes(in year: Int, daylight: Daylight) -> (start: Int, end: Int) {
        let start = dayNumber(daylight.start.day, year: year) * 86_400 + daylight.start.time - standardOffset
        let end = dayNumber(daylight.end.day, year: year) * 86_400 + daylight.end.time - daylight.offset
        return (start, end)
    }

    /// Days since 1970-01-01 of a rule day in a year.
    private func dayNumber(_ day: Day, year: Int) -> Int {
        let newYear = Gregorian.daysSince1970(year: year, month: 1, day: 1)
        switch day {
        case .julian(let number):
            let leapShift = Gregorian.isLeapYear(year) && number >= 60 ? 1 : 0
            return newYear + number - 1 + leapShift
        case .zeroBased(let number):
            return newYear + number
        case .monthWeekDay(let month, let week, let weekday):
            let first = Gregorian.daysSince1970(year: year, month: month, day: 1)
            // 1970-01-01 was a Thursday (weekday 4).
            let firstWeekday = floorModulo(first + 4, 7)
            var day = first + floorModulo(weekday - firstWeekday, 7) + (week - 1) * 7
            let length = Gregorian.daysIn(month: month, year: year)
            while day >= first + length { day -= 7 }
            return day
        }
    }
}

/// Reads a TZ string byte by byte.
private struct Parser {
    let bytes: [UInt8]
    let text: String
    var index = 0

    var atEnd: Bool { index == bytes.count }
    var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    func failure(_ what: String) -> ZoneInfoError {
        ZoneInfoError(.malformed, reason: "TZ string \(InputQuote.short(text)): \(what) at position \(index)")
    }

    mutating func expect(_ byte: UInt8) throws(ZoneInfoError) {
        guard peek == byte else { throw failure("expected \"\(Character(Unicode.Scalar(byte)))\"") }
        index += 1
    }

    /// `EST` (three or more letters) or `<+0545>` (three or more of `[A-Za-z0-9+-]`, brackets dropped).
    mutating func name() throws(ZoneInfoError) -> String {
        let start: Int
        let end: Int
        if peek == UInt8(ascii: "<") {
            index += 1
            start = index
            while let byte = peek, isAlphanumeric(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") {
                index += 1
            }
            end = index
            try expect(UInt8(ascii: ">"))
        } else {
            start = index
            while let byte = peek, isLetter(byte) { index += 1 }
            end = index
        }
        guard end - start >= 3 else { throw failure("a zone abbreviation needs three or more characters") }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    /// `[+-]hh[:mm[:ss]]` in seconds (the sign as written: positive is west for offsets).
    mutating func time(maximumHours: Int) throws(ZoneInfoError) -> Int {
        var sign = 1
        if peek == UInt8(ascii: "+") {
            index += 1
        } else if peek == UInt8(ascii: "-") {
            sign = -1
            index += 1
        }
        let hours = try number(maximum: maximumHours, digits: 3)
        var minutes = 0
        var seconds = 0
        if peek == UInt8(ascii: ":") {
            index += 1
            minutes = try number(maximum: 59, digits: 2)
            if peek == UInt8(ascii: ":") {
                index += 1
                seconds = try number(maximum: 59, digits: 2)
            }
        }
        return sign * (hours * 3600 + minutes * 60 + seconds)
    }

    /// A rule change: `Jn`, `n` or `Mm.w.d`, then optionally `/time` (−167…167 hours).
    mutating func change() throws(ZoneInfoError) -> PosixTimeZoneRule.Change {
        let day: PosixTimeZoneRule.Day
        if peek == UInt8(ascii: "J") {
            index += 1
            let number = try number(maximum: 365, digits: 3)
            guard number >= 1 else { throw failure("Jn needs 1 ≤ n ≤ 365") }
            day = .julian(number)
        } else if peek == UInt8(ascii: "M") {
            index += 1
            let month = try number(maximum: 12, digits: 2)
            try expect(UInt8(ascii: "."))
            let week = try number(maximum: 5, digits: 1)
            try expect(UInt8(ascii: "."))
            let weekday = try number(maximum: 6, digits: 1)
            guard month >= 1, week >= 1 else { throw failure("Mm.w.d needs 1 ≤ m ≤ 12 and 1 ≤ w ≤ 5") }
            day = .monthWeekDay(month: month, week: week, weekday: weekday)
        } else {
            day = .zeroBased(try number(maximum: 365, digits: 3))
        }
        var time = 7200
        if peek == UInt8(ascii: "/") {
            index += 1
            time = try self.time(maximumHours: 167)
        }
        return PosixTimeZoneRule.Change(day: day, time: time)
    }

    /// One to `digits` decimal digits, at most `maximum`.
    mutating func number(maximum: Int, digits: Int) throws(ZoneInfoError) -> Int {
        let start = index
        var value = 0
        while let byte = peek, isDigit(byte), index - start < digits {
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            index += 1
        }
        guard index > start else { throw failure("expected a number") }
        guard value <= maximum else { throw failure("\(value) is over \(maximum)") }
        return value
    }
}

private func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

private func isLetter(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
}

private func isAlphanumeric(_ byte: UInt8) -> Bool { isDigit(byte) || isLetter(byte) }

/// `value / divisor` rounded towards negative infinity (`divisor` > 0).
func floorDivide(_ value: Int, _ divisor: Int) -> Int {
    value >= 0 ? value / divisor : -((-value + divisor - 1) / divisor)
}

/// `value mod divisor` in 0..<divisor (`divisor` > 0).
func floorModulo(_ value: Int, _ divisor: Int) -> Int {
    let remainder = value % divisor
    return remainder < 0 ? remainder + divisor : remainder
}
