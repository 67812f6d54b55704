/// Rules for free text that arrives in jobs (names, places, reasons) and ends up in the
/// database, in events and on screens: bounded length and no control characters.
///
/// Lengths count Unicode scalars, as PostgreSQL's `char_length` does, so a text that passes here
/// also passes the schema's check constraints (counting Swift `Character`s would let a name of
/// 50 flags — 100 scalars — through and fail later in the database).
public enum TextRules {
    /// The longest prefix of `text` that fits in `utf8Bytes` bytes of UTF-8, cut between
    /// Unicode scalars (so it is still valid UTF-8; a combining mark may lose its base).
    public static func prefix(_ text: String, utf8Bytes limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var kept = String.UnicodeScalarView()
        var bytes = 0
        for scalar in text.unicodeScalars {
            let size = UTF8.width(scalar)
            if bytes + size > limit { break }
            bytes += size
            kept.append(scalar)
        }
        return String(kept)
    }

    /// What is wrong with a text.
    public enum Problem: Sendable, Hashable {
        /// Shorter than the minimum (after trimming, where the caller trims).
        case tooShort(minimum: Int)
        /// Longer than the maximum; `length` is the text's length in scalars.
        case tooLong(maximum: Int, length: Int)
        /// A control character (NUL, escape, DEL, C1), a line or paragraph separator, or a
        /// bidirectional override at `position` (counted in scalars from 1).
        case controlCharacter(position: Int, scalar: UInt32)

        /// The problem as a phrase after the field's name, e.g. `must be 1–50 characters, got 51`.
        public var phrase: String {
            switch self {
            case .tooShort(let minimum):
                return minimum == 1 ? "must not be empty" : "must be at least \(minimum) characters"
            case .tooLong(let maximum, let length):
                return "must be at most \(maximum) characters, got \(length)"
            case .controlCharacter(let position, let scalar):
                let hex = String(scalar, radix: 16, uppercase: true)
                return "contains a control character (U+\(String(repeating: "0", count: max(0, 4 - hex.count)))\(hex)) "
                    + "at character \(position)"
            }
        }
    }

    /// Whether a scalar may appear in stored text: not a C0 or C1 control (tab excepted where
    /// `allowTab`), not DEL, not U+2028/U+2029, not a bidirectional embedding, override or
    /// isolate (U+202A–U+202E, U+2066–U+2069), which can make text display as something else.
    public static func isAllowed(_ scalar: Unicode.Scalar, allowTab: Bool = false, allowNewline: Bool = false) -> Bool {
        switch scalar.value {
        case 0x09: return allowTab
        case 0x0A: return allowNewline
        case 0x00...0x1F, 0x7F...0x9F: return false
        case 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: return false
        default: return true
        }
    }

    /// The first problem of a text, or nil when it is acceptable.
    /// - Parameters:
    ///   - text: the text, already trimmed if the field is trimmed.
    ///   - minimum: fewest scalars (0 allows empty).
    ///   - maximum: most scalars.
    ///   - allowNewline: whether line feeds may appear (free prose; never in names).
    public static func problem(
        in text: String,
        minimum: Int = 1,
        maximum: Int,
        allowNewline: Bool = false
    ) -> Problem? {
        var length = 0
        for scalar in text.unicodeScalars {
            length += 1
            if !isAllowed(scalar, allowTab: allowNewline, allowNewline: allowNewline) {
                return .controlCharacter(position: length, scalar: scalar.value)
            }
        }
        if length < minimum { return .tooShort(minimum: minimum) }
        if length > maximum { return .tooLong(maximum: maximum, length: length) }
        return nil
    }
}
