import CivilCalendar
import Foundation

/// Converts between `Date` and PostgreSQL's ISO timestamp text, by hand (no formatter, no locale).
enum PostgresTimestamp {
    static let unixToReferenceSeconds: Int64 = 978_307_200

    /// The microseconds since the reference date (2001) PostgreSQL can store: 4714-11-24 BC
    /// (Julian day 0) to the end of 294276 AD. Counted from 1970 the upper end would not fit in
    /// Int64, so microseconds are never summed in that epoch.
    static let referenceMicrosecondRange: Range<Double> = -211_845_110_400e6..<9_223_339_708_800e6

    /// `yyyy-MM-dd HH:mm:ss.ffffff+00` in UTC, rounded to microseconds (PostgreSQL's precision);
    /// nil for a date PostgreSQL cannot store (dates decoded from outside input can be anything).
    static func format(_ date: Date) -> String? {
        let scaled = (date.timeIntervalSinceReferenceDate * 1_000_000).rounded()
        guard referenceMicrosecondRange.contains(scaled), let whole = Int64(exactly: scaled) else { return nil }
        let (referenceSeconds, fraction) = floorDivide(whole, 1_000_000)
        let seconds = referenceSeconds + unixToReferenceSeconds
        let (days, secondOfDay) = floorDivide(seconds, 86_400)
        let date = Gregorian.date(daysSince1970: Int(days))
        let (year, month, day) = (Int64(date.year), Int64(date.month), Int64(date.day))
        let yearText = year > 0 ? pad(year, 4) : pad(1 - year, 4)
        var text = "\(yearText)-\(pad(month, 2))-\(pad(day, 2)) "
        text += "\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))"
        text += ".\(pad(fraction, 6))+00"
        if year <= 0 { text += " BC" }
        return text
    }

    /// Parses `yyyy-MM-dd[( |T)HH:mm:ss[.f…]][Z|±HH[:MM[:SS]]][ BC]`; a missing offset means UTC.
    static func parse(_ text: String) -> Date? {
        var bytes = Array(text.utf8)
        var bc = false
        if bytes.count > 3, bytes.suffix(3) == Array(" BC".utf8) {
            bc = true
            bytes.removeLast(3)
        }
        var index = 0
        func number(minDigits: Int, maxDigits: Int) -> Int64? {
            var value: Int64 = 0
            var count = 0
            while index < bytes.count, count < maxDigits, (48...57).contains(bytes[index]) {
                value = value * 10 + Int64(bytes[index] - 48)
                index += 1
                count += 1
            }
            return count >= minDigits ? value : nil
        }
        func expect(_ ascii: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == ascii else { return false }
            index += 1
            return true
        }
        guard var year = number(minDigits: 4, maxDigits: 9), expect(45), let month = number(minDigits: 2, maxDigits: 2),
            expect(45), let day = number(minDigits: 2, maxDigits: 2), (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        if bc { year = 1 - year }
        var secondOfDay: Int64 = 0
        var micros: Int64 = 0
        var offset: Int64 = 0
        if index < bytes.count {
            guard expect(32) || expect(84) else { return nil }
            guard let hour = number(minDigits: 2, maxDigits: 2), expect(58),
                let minute = number(minDigits: 2, maxDigits: 2),
                expect(58), let second = number(minDigits: 2, maxDigits: 2), hour <= 24, minute < 60, second < 61
            else { return nil }
            secondOfDay = hour * 3600 + minute * 60 + second
            if expect(46) {
                var scale: Int64 = 100_000
                var digits = 0
                while index < bytes.count, (48...57).contains(bytes[index]) {
                    micros += Int64(bytes[index] - 48) * scale
                    scale /= 10
                    index += 1
                    digits += 1
                }
                guard digits > 0 else { return nil }
            }
            if expect(90) {
                offset = 0
            } else if index < bytes.count {
                let sign: Int64
                if expect(43) {
                    sign = 1
                } else if expect(45) {
                    sign = -1
                } else {
                    return nil
                }
                guard let hours = number(minDigits: 2, maxDigits: 2) else { return nil }
                var minutes: Int64 = 0
                var seconds: Int64 = 0
                if expect(58) {
                    guard let value = number(minDigits: 2, maxDigits: 2) else { return nil }
                    minutes = value
                    if expect(58) {
                        guard let value = number(minDigits: 2, maxDigits: 2) else { return nil }
                        seconds = value
                    }
                }
                offset = sign * (hours * 3600 + minutes * 60 + seconds)
            }
            guard index == bytes.count else { return nil }
        }
        let days = Int64(Gregorian.daysSince1970(year: Int(year), month: Int(month), day: Int(day)))
        let unixSeconds = days * 86_400 + secondOfDay - offset
        let referenceSeconds = unixSeconds - unixToReferenceSeconds
        return Date(timeIntervalSinceReferenceDate: Double(referenceSeconds) + Double(micros) / 1_000_000)
    }

    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let quotient = value >= 0 ? value / divisor : -((-value + divisor - 1) / divisor)
        return (quotient, value - quotient * divisor)
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
