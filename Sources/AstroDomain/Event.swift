import Foundation

/// A machine-readable error of a failed job: a stable `code` and a human `message`.
public struct JobError: Error, Sendable, Hashable, Codable, CustomStringConvertible {
    /// Stable code clients switch on, e.g. `invalid-json`, `nonexistent-local-time`.
    public var code: String
    /// What went wrong and, where possible, what to do about it.
    public var message: String

    /// - Parameters:
    ///   - code: the stable code.
    ///   - message: what went wrong. Messages often quote input: control characters in it
    ///     (which PostgreSQL's jsonb refuses as `\u0000`, and which a terminal would obey) are
    ///     written as escapes, and it is cut after `maximumMessageLength` characters.
    public init(code: String, message: String) {
        self.code = code
        self.message = Self.sanitized(message)
    }

    /// The longest message kept, in characters.
    public static let maximumMessageLength = 4000

    static func sanitized(_ message: String) -> String {
        let clean = message.unicodeScalars.allSatisfy { TextRules.isAllowed($0, allowTab: true, allowNewline: true) }
        var text = message
        if !clean {
            text = ""
            for scalar in message.unicodeScalars {
                if TextRules.isAllowed(scalar, allowTab: true, allowNewline: true) {
                    text.unicodeScalars.append(scalar)
                } else {
                    text += InputQuote.escaped(scalar)
                }
            }
        }
        guard text.count > maximumMessageLength else { return text }
        return String(text.prefix(maximumMessageLength)) + "…"
    }

    public var description: String { "\(code): \(message)" }

    /// `{"code", "message"}`, as stored and published.
    public var jsonValue: JSONValue { ["code": .string(code), "message": .string(message)] }
}

/// An outcome published on `astro.events`: `{"jobId", "userId", "type", "occurredAt", ...fields}`
/// or with `"error": {"code", "message"}` (CONTRACT.md).
public struct JobEvent: Sendable, Hashable {
    public var jobID: JobID
    /// The user the event is about (the job's `userId`): the gateway delivers an event only to
    /// this user's live streams, so every event a user should see carries it. Nil only where no
    /// user is known (a body too broken to name one, a notification for no recorded purchase).
    public var userID: UserID?
    public var type: EventType
    public var occurredAt: Date
    /// The ids and values of what was written (`profileId`, `chartId`, ...).
    public var fields: [String: JSONValue]
    public var error: JobError?

    public init(
        jobID: JobID,
        userID: UserID? = nil,
        type: EventType,
        occurredAt: Date = Date(),
        fields: [String: JSONValue] = [:],
        error: JobError? = nil
    ) {
        self.jobID = jobID
        self.userID = userID
        self.type = type
        self.occurredAt = occurredAt
        self.fields = fields
        self.error = error
    }

    /// The field naming the event's user: `userId`.
    public static let userIDKey = "userId"

    /// The user an event body names (its `userId`), nil when it names none or not as a UUID.
    public static func userID(in object: [String: JSONValue]) -> UserID? {
        guard case .string(let text)? = object[userIDKey] else { return nil }
        return UserID(text)
    }

    /// The event's JSON body.
    public func jsonData() throws -> Data {
        var object = fields
        object["jobId"] = .string(jobID.description)
        if let userID { object[JobEvent.userIDKey] = .string(userID.description) }
        object["type"] = .string(type.rawValue)
        object["occurredAt"] = .string(ISO8601.string(from: occurredAt))
        if let error {
            object["error"] = error.jsonValue
        }
        return JSONValue.object(object).jsonData()
    }
}

/// The JSON conventions every component shares: ISO 8601 dates, sorted keys (stable output).
public enum JSONCoding {
    /// Encoder with ISO 8601 dates (fractional seconds when present) and sorted keys.
    public static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ISO8601.string(from: date))
        }
        return encoder
    }

    /// Decoder accepting ISO 8601 dates with or without fractional seconds.
    public static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = ISO8601.date(from: text) else {
                throw DecodingError.dataCorruptedError(
                    in: container,
                    debugDescription: "expected an ISO 8601 date, got \(InputQuote.short(text))"
                )
            }
            return date
        }
        return decoder
    }
}

/// ISO 8601 formatting in UTC, with milliseconds only when the instant has them.
public enum ISO8601 {
    /// Formats `date` as `2026-11-22T10:00:00Z` or `2026-11-22T10:00:00.123Z`, rounded to the
    /// nearest millisecond: decoding what this wrote and writing it again gives the same text
    /// (Foundation's fractional style truncates, and .002 is stored as .00199…, so a date lost a
    /// millisecond on every round trip).
    public static func string(from date: Date) -> String {
        let style = Date.ISO8601FormatStyle(timeZone: .gmt)
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
        // Beyond 2^53 ms (about 285,000 years) a Double has no whole milliseconds to round to.
        guard milliseconds.isFinite, abs(milliseconds) < 9_007_199_254_740_992 else { return style.format(date) }
        let whole = Int64(milliseconds)
        let (seconds, fraction) = (whole.quotientAndRemainder(dividingBy: 1000))
        let (second, millisecond) = fraction < 0 ? (seconds - 1, fraction + 1000) : (seconds, fraction)
        let text = style.format(Date(timeIntervalSince1970: Double(second)))
        guard millisecond != 0, text.hasSuffix("Z") else { return text }
        let digits = String(millisecond)
        return text.dropLast() + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
    }

    /// Parses an ISO 8601 timestamp with a zone, with or without fractional seconds.
    public static func date(from text: String) -> Date? {
        let plain = Date.ISO8601FormatStyle()
        if let date = try? plain.parse(text) { return date }
        return try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)
    }
}
