import CivilCalendar
import Foundation

// The chart-worker's jobs beyond the natal chart (`chart.synastry`, `chart.transits`,
// `chart.return`, `chart.render`): their bodies, validated here once so the gateway, astroctl
// and the worker refuse the same input with the same code, and the names of their stored
// results (`chart_results`, CONTRACT.md "Chart results").

extension JobType {
    /// Synastry, compatibility score, composite and Davison of two of a user's profiles
    /// (chart-worker).
    public static let chartSynastry: JobType = "chart.synastry"
    /// Every transit to a profile's chart in a UTC range of at most 366 days (chart-worker).
    public static let chartTransits: JobType = "chart.transits"
    /// A profile's solar return for a year or its secondary progression for a date (chart-worker).
    public static let chartReturn: JobType = "chart.return"
    /// An SVG wheel: the natal chart, or a bi-wheel of a synastry or of transits (chart-worker).
    public static let chartRender: JobType = "chart.render"

    /// The chart-worker's result jobs, in the order of CONTRACT.md.
    public static let chartResultJobs: [JobType] = [.chartSynastry, .chartTransits, .chartReturn, .chartRender]
}

extension EventType {
    /// A chart result is stored, or already was (`resultId`, `kind`, `cached`).
    public static let chartComputed: EventType = "chart.computed"
}

/// What a stored chart result is: `chart_results.kind` and the `kind` of `chart.computed`.
public enum ChartResultKind: String, Sendable, Hashable, Codable, CaseIterable {
    case synastry
    case transits
    case solarReturn = "solar-return"
    case progressed
    /// An SVG wheel (`chart_results.svg`).
    case wheel
}

/// Which wheel `chart.render` draws.
public enum ChartWheelKind: String, Sendable, Hashable, Codable, CaseIterable {
    case natal
    /// The profile inside, the partner profile outside.
    case synastry
    /// The profile inside, the planets at `at` outside.
    case transits
}

/// The colours of a rendered wheel.
public enum ChartWheelTheme: String, Sendable, Hashable, Codable, CaseIterable {
    case light
    case dark
}

/// What `chart.return` computes.
public enum ChartReturnKind: String, Sendable, Hashable, Codable, CaseIterable {
    case solarReturn = "solar-return"
    case progressed

    /// The kind of its stored result.
    public var resultKind: ChartResultKind { self == .solarReturn ? .solarReturn : .progressed }
}

/// Bounds of the chart result jobs, defined once for the gateway, astroctl and the worker.
public enum ChartResultLimits {
    /// The longest transit range, in days (a leap year).
    public static let maxTransitRangeDays = 366
    /// The earliest instant any range, date or instant may name: 1900-01-01T00:00:00Z.
    public static let earliest = ChartJobInstant.date(year: 1900, month: 1, day: 1)
    /// The first instant no range, date or instant may reach: 2101-01-01T00:00:00Z.
    public static let latest = ChartJobInstant.date(year: 2101, month: 1, day: 1)
    /// The years a solar return may be asked for.
    public static let solarReturnYears = 1900...2100
    /// The largest SVG a `chart.render` job stores, in bytes (a wheel is usually 30–80 kB).
    public static let maxSVGBytes = 1 << 20
    /// The longest text accepted for an instant or date field.
    public static let maxInstantLength = 40
}

/// Why a chart result job was refused: a stable `code`, the `field` at fault (a path in the job's
/// body, empty when the body as a whole is), and a message naming the field and the rule.
/// Every one of these is permanent: the job is dead-lettered with the code and `chart.failed`
/// names it.
public struct ChartJobError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The codes of a refused chart result job: catalogue members (`ErrorCode.chartJobCodes`).
    public typealias Code = ErrorCode

    public var code: Code
    /// The offending field as a path in the job's body, e.g. `place.latitude`.
    public var field: String
    /// What is wrong, naming the field and the rule.
    public var message: String

    public init(_ code: Code, field: String, message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    /// The error as a job error, for `chart.failed` events and dead letters.
    public var jobError: JobError { JobError(code: code, message: message) }

    public var description: String { "\(code.rawValue): \(message)" }
}

extension ErrorCode {
    /// The codes a `ChartJobError` has, in the order of CONTRACT.md's chart result row.
    public static let chartJobCodes: [ErrorCode] = [
        .invalidJSON, .missingField, .invalidFieldType, .invalidID, .invalidOrb, .invalidRange, .invalidYear,
        .invalidDate, .invalidPlace, .invalidKind, .invalidWheel, .invalidTheme, .sameProfile, .profileNotFound,
        .chartNotFound, .zodiacMismatch, .unsupportedChart, .svgTooLarge, .chartQuotaExceeded,
    ]
}

/// `chart.synastry`: `{jobId, userId, profileId, partnerProfileId, angleMaxOrb?}`.
public struct ChartSynastryRequest: Sendable, Hashable {
    public var jobID: JobID
    public var userID: UserID
    /// Chart A.
    public var profileID: ProfileID
    /// Chart B: another profile of the same user.
    public var partnerProfileID: ProfileID
    /// A tighter orb for aspects with ASC or MC (0…8 degrees); `nil`: the seed's orbs.
    public var angleMaxOrb: Double?

    public init(
        jobID: JobID,
        userID: UserID,
        profileID: ProfileID,
        partnerProfileID: ProfileID,
        angleMaxOrb: Double? = nil
    ) {
        self.jobID = jobID
        self.userID = userID
        self.profileID = profileID
        self.partnerProfileID = partnerProfileID
        self.angleMaxOrb = angleMaxOrb
    }

    /// Decodes and validates a body.
    /// - Throws: `ChartJobError`: `invalid-json`, `missing-field`, `invalid-field-type`,
    ///   `invalid-id`, `same-profile`, `invalid-orb`.
    public static func decode(from data: Data) throws(ChartJobError) -> Self {
        try Self(json: ChartJobFields.parse(data))
    }

    /// Validates a decoded body; see `decode(from:)`.
    public init(json: JSONValue) throws(ChartJobError) {
        let body = try ChartJobFields(object: json)
        jobID = try body.id("jobId", JobID.self)
        userID = try body.id("userId", UserID.self)
        profileID = try body.id("profileId", ProfileID.self)
        partnerProfileID = try body.id("partnerProfileId", ProfileID.self)
        guard partnerProfileID != profileID else {
            throw ChartJobError(
                .sameProfile,
                field: "partnerProfileId",
                message: "partnerProfileId: names the profile itself; a synastry needs two profiles"
            )
        }
        angleMaxOrb = try body.optionalNumber("angleMaxOrb")
        if let orb = angleMaxOrb, !(0...8).contains(orb) {
            throw ChartJobError(
                .invalidOrb,
                field: "angleMaxOrb",
                message: "angleMaxOrb: \(orb) is outside 0…8 degrees"
            )
        }
    }

    /// The body as JSON (optional keys only when set).
    public var json: JSONValue {
        var body: [String: JSONValue] = [
            "jobId": .string(jobID.description), "userId": .string(userID.description),
            "profileId": .string(profileID.description), "partnerProfileId": .string(partnerProfileID.description),
        ]
        if let angleMaxOrb { body["angleMaxOrb"] = .number(angleMaxOrb) }
        return .object(body)
    }

    /// What the result depends on besides the charts: `chart_results.parameters` and part of the
    /// result's id.
    public var parameters: JSONValue {
        var parameters: [String: JSONValue] = ["partnerProfileId": .string(partnerProfileID.description)]
        if let angleMaxOrb { parameters["angleMaxOrb"] = .number(angleMaxOrb + 0) }
        return .object(parameters)
    }
}

/// `chart.transits`: `{jobId, userId, profileId, from, to}`; `from` inclusive, `to` exclusive,
/// each an ISO 8601 UTC instant or a date (its midnight UTC); at most 366 days, within
/// 1900-01-01 … 2101-01-01.
public struct ChartTransitsRequest: Sendable, Hashable {
    public var jobID: JobID
    public var userID: UserID
    public var profileID: ProfileID
    /// The range's start (inclusive), a whole second.
    public var from: Date
    /// The range's end (exclusive), a whole second.
    public var to: Date

    public init(jobID: JobID, userID: UserID, profileID: ProfileID, from: Date, to: Date) {
        self.jobID = jobID
        self.userID = userID
        self.profileID = profileID
        self.from = from
        self.to = to
    }

    /// Decodes and validates a body.
    /// - Throws: `ChartJobError`: `invalid-json`, `missing-field`, `invalid-field-type`,
    ///   `invalid-id`, `invalid-date`, `invalid-range`.
    public static func decode(from data: Data) throws(ChartJobError) -> Self {
        try Self(json: ChartJobFields.parse(data))
    }

    /// Validates a decoded body; see `decode(from:)`.
    public init(json: JSONValue) throws(ChartJobError) {
        let body = try ChartJobFields(object: json)
        jobID = try body.id("jobId", JobID.self)
        userID = try body.id("userId", UserID.self)
        profileID = try body.id("profileId", ProfileID.self)
        from = try body.instant("from")
        to = try body.instant("to")
        try Self.validateRange(from: from, to: to)
    }

    /// Checks a transit range: `from` < `to`, at most 366 days, inside 1900-01-01 … 2101-01-01.
    /// - Throws: `ChartJobError` `invalid-range` naming `to` (or `from` when it is too early).
    public static func validateRange(from: Date, to: Date) throws(ChartJobError) {
        guard from >= ChartResultLimits.earliest else {
            throw ChartJobError(.invalidRange, field: "from", message: "from: must be 1900-01-01T00:00:00Z or later")
        }
        guard to <= ChartResultLimits.latest else {
            throw ChartJobError(.invalidRange, field: "to", message: "to: must be 2101-01-01T00:00:00Z or earlier")
        }
        guard to > from else {
            throw ChartJobError(.invalidRange, field: "to", message: "to: must be after from (to is exclusive)")
        }
        let limit = Double(ChartResultLimits.maxTransitRangeDays) * 86_400
        guard to.timeIntervalSince(from) <= limit else {
            throw ChartJobError(
                .invalidRange,
                field: "to",
                message: "to: the range is longer than \(ChartResultLimits.maxTransitRangeDays) days"
            )
        }
    }

    /// The body as JSON.
    public var json: JSONValue {
        .object([
            "jobId": .string(jobID.description), "userId": .string(userID.description),
            "profileId": .string(profileID.description), "from": .string(ChartJobInstant.text(from)),
            "to": .string(ChartJobInstant.text(to)),
        ])
    }

    /// `chart_results.parameters`: the range in canonical form.
    public var parameters: JSONValue {
        .object(["from": .string(ChartJobInstant.text(from)), "to": .string(ChartJobInstant.text(to))])
    }
}

/// Where a solar return is cast: `{latitude, longitude, timezone?, locationName?}`, validated like
/// a profile's place. The chart itself is in UTC; `timezone` is kept for showing local times.
public struct ChartReturnPlace: Sendable, Hashable {
    public var latitude: Double
    public var longitude: Double
    /// An IANA zone id, when given.
    public var timezone: String?
    /// Trimmed, at most 200 characters, no control characters; may be empty.
    public var locationName: String

    public init(latitude: Double, longitude: Double, timezone: String? = nil, locationName: String = "") {
        self.latitude = latitude
        self.longitude = longitude
        self.timezone = timezone
        self.locationName = locationName
    }

    /// The place as JSON (`timezone` only when set); coordinates normalised (−0 is 0).
    public var json: JSONValue {
        var place: [String: JSONValue] = [
            "latitude": .number(latitude + 0), "longitude": .number(longitude + 0),
            "locationName": .string(locationName),
        ]
        if let timezone { place["timezone"] = .string(timezone) }
        return .object(place)
    }
}

/// `chart.return`: `{jobId, userId, profileId, kind, year?, date?, place?}`: `kind`
/// `solar-return` needs `year` (1900…2100) and takes `place` (default: the birth place);
/// `progressed` needs `date` (the target, an ISO 8601 date or UTC instant within 1900-01-01 …
/// 2101-01-01) and takes no place (progressions are cast at the birth place).
public struct ChartReturnRequest: Sendable, Hashable {
    public var jobID: JobID
    public var userID: UserID
    public var profileID: ProfileID
    public var kind: ChartReturnKind
    /// The solar return's year (`solar-return` only).
    public var year: Int?
    /// The progression's target (`progressed` only).
    public var date: Date?
    /// Where the solar return is cast (`solar-return` only); `nil`: the birth place.
    public var place: ChartReturnPlace?

    public init(
        jobID: JobID,
        userID: UserID,
        profileID: ProfileID,
        kind: ChartReturnKind,
        year: Int? = nil,
        date: Date? = nil,
        place: ChartReturnPlace? = nil
    ) {
        self.jobID = jobID
        self.userID = userID
        self.profileID = profileID
        self.kind = kind
        self.year = year
        self.date = date
        self.place = place
    }

    /// Decodes and validates a body.
    /// - Throws: `ChartJobError`: `invalid-json`, `missing-field`, `invalid-field-type`,
    ///   `invalid-id`, `invalid-kind`, `invalid-year`, `invalid-date`, `invalid-range`,
    ///   `invalid-place`.
    public static func decode(from data: Data) throws(ChartJobError) -> Self {
        try Self(json: ChartJobFields.parse(data))
    }

    /// Validates a decoded body; see `decode(from:)`.
    public init(json: JSONValue) throws(ChartJobError) {
        let body = try ChartJobFields(object: json)
        jobID = try body.id("jobId", JobID.self)
        userID = try body.id("userId", UserID.self)
        profileID = try body.id("profileId", ProfileID.self)
        let kindText = try body.string("kind")
        guard let kind = ChartReturnKind(rawValue: kindText) else {
            throw ChartJobError(
                .invalidKind,
                field: "kind",
                message: "kind: \(InputQuote.short(kindText)) is not one of solar-return, progressed"
            )
        }
        self.kind = kind
        switch kind {
        case .solarReturn:
            guard let yearValue = body.value("year") else {
                throw ChartJobError(.invalidYear, field: "year", message: "year: missing (a solar return needs a year)")
            }
            guard case .number(let number) = yearValue, number == number.rounded(),
                ChartResultLimits.solarReturnYears.contains(Int(exactly: number) ?? 0)
            else {
                throw ChartJobError(.invalidYear, field: "year", message: "year: must be a whole year within 1900…2100")
            }
            year = Int(number)
            if body.value("date") != nil {
                throw ChartJobError(.invalidDate, field: "date", message: "date: only a progression takes a date")
            }
            date = nil
            place = try body.place("place")
        case .progressed:
            if body.value("year") != nil {
                throw ChartJobError(.invalidYear, field: "year", message: "year: only a solar return takes a year")
            }
            year = nil
            let target = try body.instant("date")
            guard target >= ChartResultLimits.earliest, target < ChartResultLimits.latest else {
                throw ChartJobError(
                    .invalidRange,
                    field: "date",
                    message: "date: must lie within 1900-01-01 … 2101-01-01 (UTC)"
                )
            }
            date = target
            if body.value("place") != nil {
                throw ChartJobError(
                    .invalidPlace,
                    field: "place",
                    message: "place: a progression is cast at the birth place"
                )
            }
            place = nil
        }
    }

    /// The body as JSON (optional keys only when set).
    public var json: JSONValue {
        var body: [String: JSONValue] = [
            "jobId": .string(jobID.description), "userId": .string(userID.description),
            "profileId": .string(profileID.description),
        ]
        for (key, value) in parametersFields { body[key] = value }
        return .object(body)
    }

    /// `chart_results.parameters`: the kind, year or date, and place.
    public var parameters: JSONValue { .object(parametersFields) }

    private var parametersFields: [String: JSONValue] {
        var fields: [String: JSONValue] = ["kind": .string(kind.rawValue)]
        if let year { fields["year"] = .number(Double(year)) }
        if let date { fields["date"] = .string(ChartJobInstant.text(date)) }
        if let place { fields["place"] = place.json }
        return fields
    }
}

/// `chart.render`: `{jobId, userId, profileId, wheel, partnerProfileId?, at?, theme?}`:
/// `partnerProfileId` is required for the synastry wheel (and ignored by the others); `at` is
/// the instant of the transits wheel's outer ring (default: when the job is run, which then
/// becomes part of its parameters); `theme` defaults to `light`.
public struct ChartRenderRequest: Sendable, Hashable {
    public var jobID: JobID
    public var userID: UserID
    public var profileID: ProfileID
    public var wheel: ChartWheelKind
    /// The outer chart of the synastry wheel.
    public var partnerProfileID: ProfileID?
    /// The transits wheel's outer instant; `nil` until the worker resolves it.
    public var at: Date?
    public var theme: ChartWheelTheme

    public init(
        jobID: JobID,
        userID: UserID,
        profileID: ProfileID,
        wheel: ChartWheelKind,
        partnerProfileID: ProfileID? = nil,
        at: Date? = nil,
        theme: ChartWheelTheme = .light
    ) {
        self.jobID = jobID
        self.userID = userID
        self.profileID = profileID
        self.wheel = wheel
        self.partnerProfileID = partnerProfileID
        self.at = at
        self.theme = theme
    }

    /// Decodes and validates a body.
    /// - Throws: `ChartJobError`: `invalid-json`, `missing-field`, `invalid-field-type`,
    ///   `invalid-id`, `invalid-wheel`, `same-profile`, `invalid-date`, `invalid-range`,
    ///   `invalid-theme`.
    public static func decode(from data: Data) throws(ChartJobError) -> Self {
        try Self(json: ChartJobFields.parse(data))
    }

    /// Validates a decoded body; see `decode(from:)`.
    public init(json: JSONValue) throws(ChartJobError) {
        let body = try ChartJobFields(object: json)
        jobID = try body.id("jobId", JobID.self)
        userID = try body.id("userId", UserID.self)
        profileID = try body.id("profileId", ProfileID.self)
        let wheelText = try body.string("wheel")
        guard let wheel = ChartWheelKind(rawValue: wheelText) else {
            throw ChartJobError(
                .invalidWheel,
                field: "wheel",
                message: "wheel: \(InputQuote.short(wheelText)) is not one of natal, synastry, transits"
            )
        }
        self.wheel = wheel
        partnerProfileID = nil
        at = nil
        switch wheel {
        case .natal: break
        case .synastry:
            let partner = try body.id("partnerProfileId", ProfileID.self)
            guard partner != profileID else {
                throw ChartJobError(
                    .sameProfile,
                    field: "partnerProfileId",
                    message: "partnerProfileId: names the profile itself; a synastry wheel needs two profiles"
                )
            }
            partnerProfileID = partner
        case .transits:
            if body.value("at") != nil {
                let instant = try body.instant("at")
                try Self.validateAt(instant)
                at = instant
            }
        }
        if let themeValue = body.value("theme") {
            guard case .string(let text) = themeValue, let theme = ChartWheelTheme(rawValue: text) else {
                throw ChartJobError(.invalidTheme, field: "theme", message: "theme: must be light or dark")
            }
            self.theme = theme
        } else {
            theme = .light
        }
    }

    /// Checks the transits wheel's instant.
    /// - Throws: `ChartJobError` `invalid-range` outside 1900-01-01 … 2101-01-01.
    public static func validateAt(_ at: Date) throws(ChartJobError) {
        guard at >= ChartResultLimits.earliest, at < ChartResultLimits.latest else {
            throw ChartJobError(
                .invalidRange,
                field: "at",
                message: "at: must lie within 1900-01-01 … 2101-01-01 (UTC)"
            )
        }
    }

    /// The body as JSON (optional keys only when set).
    public var json: JSONValue {
        var body: [String: JSONValue] = [
            "jobId": .string(jobID.description), "userId": .string(userID.description),
            "profileId": .string(profileID.description),
        ]
        for (key, value) in parametersFields { body[key] = value }
        return .object(body)
    }

    /// `chart_results.parameters`: the wheel, partner, instant and theme (`at` as resolved).
    public var parameters: JSONValue { .object(parametersFields) }

    private var parametersFields: [String: JSONValue] {
        var fields: [String: JSONValue] = ["wheel": .string(wheel.rawValue), "theme": .string(theme.rawValue)]
        if let partnerProfileID { fields["partnerProfileId"] = .string(partnerProfileID.description) }
        if let at { fields["at"] = .string(ChartJobInstant.text(at)) }
        return fields
    }
}

/// ISO 8601 instants of the chart jobs: a date `YYYY-MM-DD` (its midnight UTC) or
/// `YYYY-MM-DDTHH:MM[:SS[.fraction]]` with `Z` or an offset `±HH:MM`; fractions of a second are
/// dropped. Written back as `YYYY-MM-DDTHH:MM:SSZ`. Proleptic Gregorian arithmetic, no Calendar.
public enum ChartJobInstant {
    /// Parses an instant or date; `nil` when it is not one of the accepted forms.
    public static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 10, bytes.count <= ChartResultLimits.maxInstantLength else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for index in range {
                let byte = bytes[index]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), bytes[4] == UInt8(ascii: "-"), let month = number(5..<7),
            bytes[7] == UInt8(ascii: "-"), let day = number(8..<10), (1...12).contains(month),
            (1...Gregorian.daysIn(month: month, year: year)).contains(day)
        else { return nil }
        var seconds = 0
        if bytes.count > 10 {
            guard bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: "t"), let hour = number(11..<13),
                bytes.count > 15, bytes[13] == UInt8(ascii: ":"), let minute = number(14..<16), hour < 24, minute < 60
            else { return nil }
            var index = 16
            var second = 0
            if index < bytes.count, bytes[index] == UInt8(ascii: ":") {
                guard let value = number(17..<19), value < 60 else { return nil }
                second = value
                index = 19
                if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                    index += 1
                    let start = index
                    while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                        index += 1
                    }
                    guard index > start else { return nil }
                }
            }
            guard index < bytes.count else { return nil }
            var offset = 0
            if bytes[index] == UInt8(ascii: "Z") || bytes[index] == UInt8(ascii: "z") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
                guard let offsetHour = number(index + 1..<index + 3), index + 3 < bytes.count,
                    bytes[index + 3] == UInt8(ascii: ":"), let offsetMinute = number(index + 4..<index + 6),
                    offsetHour <= 18, offsetMinute < 60
                else { return nil }
                offset = sign * (offsetHour * 3600 + offsetMinute * 60)
                index += 6
            } else {
                return nil
            }
            guard index == bytes.count else { return nil }
            seconds = hour * 3600 + minute * 60 + second - offset
        }
        return Date(
            timeIntervalSince1970: Double(
                Gregorian.daysSince1970(year: year, month: month, day: day) * 86_400 + seconds
            )
        )
    }

    /// The canonical text of an instant, `YYYY-MM-DDTHH:MM:SSZ` (fractions of a second dropped).
    public static func text(_ date: Date) -> String {
        let total = Int(date.timeIntervalSince1970.rounded(.down))
        let days = total >= 0 ? total / 86_400 : (total - 86_399) / 86_400
        let second = total - days * 86_400
        let (year, month, day) = Gregorian.date(daysSince1970: days)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ",
            year,
            month,
            day,
            second / 3600,
            second / 60 % 60,
            second % 60
        )
    }

    /// Midnight UTC of a calendar date.
    public static func date(year: Int, month: Int, day: Int) -> Date {
        Date(timeIntervalSince1970: Double(Gregorian.daysSince1970(year: year, month: month, day: day) * 86_400))
    }
}

/// Typed reads of a chart job body's members, with errors naming the member's path.
struct ChartJobFields {
    let json: JSONValue
    let path: String

    static func parse(_ data: Data) throws(ChartJobError) -> JSONValue {
        do {
            return try JSONValue.parse(data)
        } catch {
            throw ChartJobError(.invalidJSON, field: "", message: "the body is not valid JSON (\(error))")
        }
    }

    init(object json: JSONValue, path: String = "") throws(ChartJobError) {
        guard case .object = json else {
            throw ChartJobError(
                .invalidJSON,
                field: path,
                message: path.isEmpty ? "the body is not a JSON object" : "\(path): not a JSON object"
            )
        }
        self.json = json
        self.path = path.isEmpty ? "" : path + "."
    }

    /// The member, or `nil` when absent or `null`.
    func value(_ key: String) -> JSONValue? {
        guard let value = json[key], value != .null else { return nil }
        return value
    }

    func required(_ key: String, _ expected: String) throws(ChartJobError) -> JSONValue {
        guard let value = value(key) else {
            throw ChartJobError(
                .missingField,
                field: path + key,
                message: "\(path + key): missing (\(expected) is required)"
            )
        }
        return value
    }

    func string(_ key: String) throws(ChartJobError) -> String {
        let value = try required(key, "a string")
        guard case .string(let text) = value else { throw typeError(key, expected: "a string", got: value) }
        return text
    }

    func optionalNumber(_ key: String) throws(ChartJobError) -> Double? {
        guard let value = value(key) else { return nil }
        guard case .number(let number) = value, number.isFinite else {
            throw typeError(key, expected: "a number", got: value)
        }
        return number
    }

    func id<ID: TypedID>(_ key: String, _ type: ID.Type) throws(ChartJobError) -> ID {
        let text = try string(key)
        guard let id = ID(text) else {
            throw ChartJobError(
                .invalidID,
                field: path + key,
                message: "\(path + key): \(InputQuote.short(text)) is not a UUID"
            )
        }
        return id
    }

    func instant(_ key: String) throws(ChartJobError) -> Date {
        let text = try string(key)
        guard let date = ChartJobInstant.parse(text) else {
            throw ChartJobError(
                .invalidDate,
                field: path + key,
                message: "\(path + key): \(InputQuote.short(text)) is not YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS]Z"
            )
        }
        return date
    }

    /// An optional place, validated with BirthData's rules; any problem is `invalid-place`.
    func place(_ key: String) throws(ChartJobError) -> ChartReturnPlace? {
        guard let value = value(key) else { return nil }
        let place = try ChartJobFields(object: value, path: path + key)
        func invalid(_ field: String, _ message: String) -> ChartJobError {
            ChartJobError(.invalidPlace, field: place.path + field, message: "\(place.path + field): \(message)")
        }
        guard case .number(let latitude)? = place.value("latitude") else {
            throw invalid("latitude", "a number within −90…90 is required")
        }
        guard case .number(let longitude)? = place.value("longitude") else {
            throw invalid("longitude", "a number within −180…180 is required")
        }
        do {
            try BirthData.validateLatitude(latitude)
        } catch {
            throw invalid("latitude", "\(latitude) is outside −90…90")
        }
        do {
            try BirthData.validateLongitude(longitude)
        } catch {
            throw invalid("longitude", "\(longitude) is outside −180…180")
        }
        var timezone: String?
        if let zone = place.value("timezone") {
            guard case .string(let text) = zone else { throw invalid("timezone", "must be a string") }
            do {
                _ = try BirthData.timeZone(named: text)
            } catch {
                throw invalid("timezone", "\(InputQuote.short(text)) is not a known IANA time zone")
            }
            timezone = text
        }
        var locationName = ""
        if let name = place.value("locationName") {
            guard case .string(let text) = name else { throw invalid("locationName", "must be a string") }
            do {
                locationName = try BirthData.validateLocationName(text)
            } catch {
                throw invalid("locationName", "at most 200 characters, no control characters")
            }
        }
        return ChartReturnPlace(
            latitude: latitude,
            longitude: longitude,
            timezone: timezone,
            locationName: locationName
        )
    }

    func typeError(_ key: String, expected: String, got value: JSONValue) -> ChartJobError {
        let kind: String =
            switch value {
            case .null: "null"
            case .bool: "a boolean"
            case .number: "a number"
            case .string: "a string"
            case .array: "an array"
            case .object: "an object"
            }
        return ChartJobError(
            .invalidFieldType,
            field: path + key,
            message: "\(path + key): expected \(expected), got \(kind)"
        )
    }
}
