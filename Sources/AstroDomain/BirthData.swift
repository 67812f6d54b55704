import CivilCalendar
import Foundation
import Synchronization

/// Everything a natal chart is computed from: the `profile` block of a `chart.calculate` job
/// (without its id) plus the chart options (house system, DST policy, optional points, zodiac).
///
/// The memberwise initializer does not validate; `validated()` checks every rule of CONTRACT.md
/// and returns the normalized value (name trimmed, points de-duplicated in canonical order).
/// The chart engine validates again before computing, so an unvalidated value is never charted.
public struct BirthData: Sendable, Hashable, Codable {
    /// The person's name; 1–50 characters after trimming.
    public var name: String
    /// Local calendar date of birth, `yyyy-MM-dd`, 1900-01-01 … 2100-12-31.
    public var birthDate: String
    /// Local wall-clock time of birth, `HH:mm`, 24-hour.
    public var birthTime: String
    /// IANA time zone identifier of the birthplace, e.g. `Europe/Kyiv`.
    public var timezone: String
    /// Geographic latitude in degrees, north positive, −90…90.
    public var latitude: Double
    /// Geographic longitude in degrees, east positive, −180…180.
    public var longitude: Double
    /// The birthplace as people name it; free text, echoed in the chart.
    public var locationName: String
    /// The house system asked for (default Placidus).
    public var houseSystem: ChartHouseSystem
    /// How to read a local time in a DST gap or overlap; `nil` rejects such times.
    public var dstPolicy: DSTPolicy?
    /// Optional calculated points to add to the chart (empty: none, and no `points` key).
    public var points: [ChartPoint]
    /// Tropical (the contract's default) or sidereal longitudes.
    public var zodiac: ZodiacSystem

    public init(
        name: String,
        birthDate: String,
        birthTime: String,
        timezone: String,
        latitude: Double,
        longitude: Double,
        locationName: String,
        houseSystem: ChartHouseSystem = .placidus,
        dstPolicy: DSTPolicy? = nil,
        points: [ChartPoint] = [],
        zodiac: ZodiacSystem = .tropical
    ) {
        self.name = name
        self.birthDate = birthDate
        self.birthTime = birthTime
        self.timezone = timezone
        self.latitude = latitude
        self.longitude = longitude
        self.locationName = locationName
        self.houseSystem = houseSystem
        self.dstPolicy = dstPolicy
        self.points = points
        self.zodiac = zodiac
    }

    /// The earliest accepted birth date.
    public static let earliestDate = BirthDate(year: 1900, month: 1, day: 1)
    /// The latest accepted birth date.
    public static let latestDate = BirthDate(year: 2100, month: 12, day: 31)
    /// The most characters (Unicode scalars, as the database counts) a name may have after trimming.
    public static let maximumNameLength = 50
    /// The most characters (Unicode scalars) of a location name after trimming.
    public static let maximumLocationNameLength = 200

    /// Checks every rule and returns the normalized birth data.
    ///
    /// Rules, checked in this order (the first failure is reported): name 1–50 characters after
    /// trimming whitespace; birth date a real `yyyy-MM-dd` date within 1900-01-01 … 2100-12-31;
    /// birth time `HH:mm` 00:00 … 23:59; time zone an IANA identifier; latitude −90…90;
    /// longitude −180…180. Whether the local time exists is a separate step, `resolveInstant()`.
    /// - Returns: a copy with the name and location name trimmed and `points` de-duplicated in
    ///   the order of `ChartPoint.allCases`.
    /// - Throws: `ChartInputError` with the code and field of the first broken rule.
    public func validated() throws(ChartInputError) -> BirthData {
        try validated(timeZones: .foundation)
    }

    /// Checks every rule, as `validated()`, looking the time zone up in `timeZones`.
    /// - Parameter timeZones: where zones come from (such as the system time zone database).
    /// - Returns: the normalized birth data, as `validated()`.
    /// - Throws: `ChartInputError` with the code and field of the first broken rule.
    public func validated(timeZones: some TimeZoneRulesProvider) throws(ChartInputError) -> BirthData {
        var normalized = self
        normalized.name = try Self.validateName(name)
        _ = try Self.parseDate(birthDate)
        _ = try Self.parseTime(birthTime)
        _ = try Self.timeZoneRules(named: timezone, in: timeZones)
        try Self.validateLatitude(latitude)
        try Self.validateLongitude(longitude)
        normalized.locationName = try Self.validateLocationName(locationName)
        if !points.isEmpty { normalized.points = ChartPoint.allCases.filter(points.contains) }
        return normalized
    }

    /// `text` without surrounding whitespace and newlines. Most text has none, and checking the
    /// first and last scalar is much cheaper than Foundation's trimming, which runs otherwise.
    static func trimmed(_ text: String) -> String {
        let scalars = text.unicodeScalars
        guard let first = scalars.first, let last = scalars.last else { return text }
        let blank = CharacterSet.whitespacesAndNewlines
        guard blank.contains(first) || blank.contains(last) else { return text }
        return text.trimmingCharacters(in: blank)
    }

    /// The name trimmed of surrounding whitespace, when it then has 1–50 characters (Unicode
    /// scalars) and no control characters.
    /// - Throws: `invalid-name` or `invalid-characters` on `profile.name`.
    public static func validateName(_ name: String) throws(ChartInputError) -> String {
        let trimmed = Self.trimmed(name)
        switch TextRules.problem(in: trimmed, maximum: maximumNameLength) {
        case nil:
            return trimmed
        case .controlCharacter(let position, let scalar):
            throw ChartInputError(
                .invalidCharacters,
                field: ChartField.name,
                message: "\(ChartField.name): "
                    + TextRules.Problem.controlCharacter(position: position, scalar: scalar).phrase
            )
        case .tooShort, .tooLong:
            throw ChartInputError(
                .invalidName,
                field: ChartField.name,
                message: "\(ChartField.name): must be 1–\(maximumNameLength) characters after trimming, "
                    + "got \(trimmed.unicodeScalars.count)"
            )
        }
    }

    /// The location name trimmed of surrounding whitespace, when it then has at most 200
    /// characters (Unicode scalars) and no control characters; it may be empty.
    /// - Throws: `invalid-location-name` or `invalid-characters` on `profile.locationName`.
    public static func validateLocationName(_ text: String) throws(ChartInputError) -> String {
        let trimmed = Self.trimmed(text)
        guard let problem = TextRules.problem(in: trimmed, minimum: 0, maximum: maximumLocationNameLength) else {
            return trimmed
        }
        let code: ChartInputError.Code
        if case .controlCharacter = problem { code = .invalidCharacters } else { code = .invalidLocationName }
        throw ChartInputError(
            code,
            field: ChartField.locationName,
            message: "\(ChartField.locationName): \(problem.phrase)"
        )
    }

    /// Parses a `yyyy-MM-dd` birth date and checks its range.
    /// - Throws: `invalid-birth-date` when it is not a real date in that exact form (2001-02-29,
    ///   1990-1-7), `birth-date-out-of-range` when outside 1900-01-01 … 2100-12-31; both on
    ///   `profile.birthDate`.
    public static func parseDate(_ text: String) throws(ChartInputError) -> BirthDate {
        guard let date = BirthDate(parsing: text) else {
            throw ChartInputError(
                .invalidBirthDate,
                field: ChartField.birthDate,
                message: "\(ChartField.birthDate): \(InputQuote.short(text)) is not a calendar date "
                    + "in the form yyyy-MM-dd"
            )
        }
        guard (earliestDate...latestDate).contains(date) else {
            throw ChartInputError(
                .birthDateOutOfRange,
                field: ChartField.birthDate,
                message: "\(ChartField.birthDate): \(date) is outside \(earliestDate)…\(latestDate)"
            )
        }
        return date
    }

    /// Parses an `HH:mm` 24-hour birth time (00:00 … 23:59).
    /// - Throws: `invalid-birth-time` on `profile.birthTime`.
    public static func parseTime(_ text: String) throws(ChartInputError) -> BirthTime {
        guard let time = BirthTime(parsing: text) else {
            throw ChartInputError(
                .invalidBirthTime,
                field: ChartField.birthTime,
                message: "\(ChartField.birthTime): \(InputQuote.short(text)) is not a 24-hour time "
                    + "in the form HH:mm (00:00…23:59)"
            )
        }
        return time
    }

    /// Identifiers of the time zone database without a `/` that are accepted; every other
    /// accepted identifier has the `Area/Location` form. Abbreviations (`PST`, `IST`) and custom
    /// offsets (`GMT+5`), which Foundation would also accept, are not IANA identifiers.
    static let slashlessZoneIdentifiers: Set<String> = [
        "UTC", "GMT", "UCT", "Universal", "Zulu", "Greenwich", "GMT0", "EST", "MST", "HST",
        "EST5EDT", "CST6CDT", "MST7MDT", "PST8PDT", "CET", "EET", "MET", "WET",
    ]

    /// The longest zone identifier accepted, in bytes. The database's longest name has 32
    /// (`America/Argentina/ComodRivadavia`).
    public static let maximumZoneIdentifierBytes = 64

    /// Whether `identifier` has the form of an IANA time zone name: the one rule the gateway,
    /// `astroctl` and the workers apply before any zone database is asked (and before anything
    /// is cached), so all of them accept and refuse the same names.
    ///
    /// Accepted: 1–64 bytes; one of `slashlessZoneIdentifiers`, or `/`-separated components
    /// (`Area/Location`, `America/Argentina/Buenos_Aires`, `Etc/GMT+5`) each starting with an
    /// ASCII letter and made of ASCII letters, digits, `_`, `-` and `+`; not below `right/` or
    /// `posix/` (the database's copies on other time scales, not zone names). So no NUL or other
    /// control character, no space, no `.`/`..`, no empty component: nothing that a C string,
    /// a file path or ICU could read as another name.
    /// - Parameter identifier: the text to check, case-sensitive.
    /// - Returns: whether a zone database may be asked for it.
    public static func isIANAZoneName(_ identifier: String) -> Bool {
        let bytes = identifier.utf8
        guard (1...maximumZoneIdentifierBytes).contains(bytes.count) else { return false }
        guard bytes.contains(UInt8(ascii: "/")) else { return slashlessZoneIdentifiers.contains(identifier) }
        var componentLength = 0
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "/"):
                guard componentLength > 0 else { return false }
                componentLength = 0
                continue
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"):
                break
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "+"):
                guard componentLength > 0 else { return false }
            default:
                return false
            }
            componentLength += 1
        }
        guard componentLength > 0 else { return false }
        return !identifier.hasPrefix("right/") && !identifier.hasPrefix("posix/")
    }

    /// Foundation's zones already looked up, by identifier (found and unknown), bounded.
    private static let zoneCache = ZoneLookupCache<TimeZone>()

    /// Foundation's zone for an identifier, cached; `nil` for an identifier that is not an IANA
    /// name (`isIANAZoneName`) or that Foundation does not know.
    /// - Parameter cache: where look-ups are kept; the process's own unless a test gives one.
    package static func foundationTimeZone(
        _ identifier: String,
        cache: ZoneLookupCache<TimeZone> = zoneCache
    ) -> TimeZone? {
        guard isIANAZoneName(identifier) else { return nil }
        return cache.value(for: identifier) { TimeZone(identifier: $0) }
    }

    private static func unknownTimeZone(_ identifier: String) -> ChartInputError {
        ChartInputError(
            .unknownTimezone,
            field: ChartField.timezone,
            message: "\(ChartField.timezone): \(InputQuote.short(identifier)) is not an IANA time zone "
                + "identifier (such as Europe/Kyiv)"
        )
    }

    /// Foundation's time zone for an IANA identifier (case-sensitive, as in the database).
    /// - Throws: `unknown-timezone` on `profile.timezone`.
    public static func timeZone(named identifier: String) throws(ChartInputError) -> TimeZone {
        guard let zone = foundationTimeZone(identifier) else {
            throw unknownTimeZone(identifier)
        }
        return zone
    }

    /// The rules of the time zone an IANA identifier names, from a provider.
    /// - Parameters:
    ///   - identifier: the identifier (case-sensitive; anything `isIANAZoneName` refuses, such
    ///     as abbreviations (`PST`), custom offsets (`GMT+5`) or a NUL byte, is refused before the
    ///     provider is asked).
    ///   - timeZones: where zones come from.
    /// - Returns: the zone's rules.
    /// - Throws: `unknown-timezone` on `profile.timezone`.
    public static func timeZoneRules(
        named identifier: String,
        in timeZones: some TimeZoneRulesProvider
    ) throws(ChartInputError) -> any TimeZoneRules {
        guard isIANAZoneName(identifier), let rules = timeZones.rules(forIdentifier: identifier) else {
            throw unknownTimeZone(identifier)
        }
        return rules
    }

    /// - Throws: `latitude-out-of-range` on `profile.latitude` unless −90 ≤ latitude ≤ 90.
    public static func validateLatitude(_ latitude: Double) throws(ChartInputError) {
        guard latitude.isFinite, (-90.0...90.0).contains(latitude) else {
            throw ChartInputError(
                .latitudeOutOfRange,
                field: ChartField.latitude,
                message: "\(ChartField.latitude): \(latitude) is outside −90…90"
            )
        }
    }

    /// - Throws: `longitude-out-of-range` on `profile.longitude` unless −180 ≤ longitude ≤ 180.
    public static func validateLongitude(_ longitude: Double) throws(ChartInputError) {
        guard longitude.isFinite, (-180.0...180.0).contains(longitude) else {
            throw ChartInputError(
                .longitudeOutOfRange,
                field: ChartField.longitude,
                message: "\(ChartField.longitude): \(longitude) is outside −180…180"
            )
        }
    }
}

/// A proleptic Gregorian calendar date, printed and parsed as `yyyy-MM-dd`.
public struct BirthDate: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int

    /// A date from its parts; not checked (use `init(parsing:)` for checked input).
    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// Parses exactly `yyyy-MM-dd` (four, two and two ASCII digits) naming a real date of the
    /// Gregorian calendar; `nil` otherwise.
    public init?(parsing text: String) {
        var text = text
        guard let date = text.withUTF8({ Self.parse($0) }) else { return nil }
        self = date
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> BirthDate? {
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            let year = decimal(bytes[0..<4]), let month = decimal(bytes[5..<7]), let day = decimal(bytes[8..<10]),
            (1...12).contains(month), (1...Gregorian.daysIn(month: month, year: year)).contains(day)
        else { return nil }
        return BirthDate(year: year, month: month, day: day)
    }

    /// Days from 1970-01-01 to this date (negative before it), in the proleptic Gregorian calendar.
    public var daysSince1970: Int { Gregorian.daysSince1970(year: year, month: month, day: day) }

    /// The date `days` days after 1970-01-01 (before it when negative).
    public init(daysSince1970 days: Int) {
        let (year, month, day) = Gregorian.date(daysSince1970: days)
        self.init(year: year, month: month, day: day)
    }

    /// `yyyy-MM-dd`.
    public var description: String { pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.year, lhs.month, lhs.day) < (rhs.year, rhs.month, rhs.day)
    }
}

/// A wall-clock time of day to the minute, printed and parsed as `HH:mm` (24-hour).
public struct BirthTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var hour: Int
    public var minute: Int

    public init(hour: Int, minute: Int) {
        self.hour = hour
        self.minute = minute
    }

    /// Parses exactly `HH:mm` with 00 ≤ HH ≤ 23 and 00 ≤ mm ≤ 59; `nil` otherwise (`9:05`,
    /// `24:00`, `15:00:00` are refused).
    public init?(parsing text: String) {
        var text = text
        guard let time = text.withUTF8({ Self.parse($0) }) else { return nil }
        self = time
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> BirthTime? {
        guard bytes.count == 5, bytes[2] == UInt8(ascii: ":"), let hour = decimal(bytes[0..<2]),
            let minute = decimal(bytes[3..<5]), (0...23).contains(hour), (0...59).contains(minute)
        else { return nil }
        return BirthTime(hour: hour, minute: minute)
    }

    /// Seconds since midnight.
    public var secondsSinceMidnight: Int { hour * 3600 + minute * 60 }

    /// `HH:mm`.
    public var description: String { pad(hour, 2) + ":" + pad(minute, 2) }

    public static func < (lhs: Self, rhs: Self) -> Bool { (lhs.hour, lhs.minute) < (rhs.hour, rhs.minute) }
}

/// The value of a run of ASCII digits; `nil` when any byte is not a digit.
private func decimal(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Int? {
    var value = 0
    for byte in bytes {
        guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
        value = value * 10 + Int(byte - UInt8(ascii: "0"))
    }
    return value
}

/// A non-negative number left-padded with zeros to `width` digits.
private func pad(_ value: Int, _ width: Int) -> String {
    let digits = String(value)
    return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
}
