/// Quotes input inside error messages: a short prefix, escaped, so a rejection of a 200 KB
/// field stays a one-line message and control characters never reach a log or a terminal raw.
public enum InputQuote {
    /// The most characters of the input a message quotes.
    public static let defaultLimit = 40

    /// `text` in double quotes with `"`, `\` and every control or format character escaped
    /// (`\n`, `\u{1B}`), cut after `limit` characters with `…` and the full length.
    /// - Parameters:
    ///   - text: the input to quote.
    ///   - limit: how many characters to keep at most.
    /// - Returns: e.g. `"2026-13-01"`, or `"aaaa…" (200000 characters)`.
    public static func short(_ text: some StringProtocol, limit: Int = defaultLimit) -> String {
        var quoted = "\""
        var kept = 0
        var truncated = false
        for character in text {
            if kept == max(limit, 1) {
                truncated = true
                break
            }
            kept += 1
            for scalar in character.unicodeScalars { quoted += escaped(scalar) }
        }
        quoted += truncated ? "…\" (\(text.count) characters)" : "\""
        return quoted
    }

    /// One scalar as it may appear in a quoted message.
    static func escaped(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\"": return "\\\""
        case "\\": return "\\\\"
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\t": return "\\t"
        default:
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
                return "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default:
                return String(scalar)
            }
        }
    }

    /// `text` with every control or format character escaped as in `short`, but not cut or
    /// quoted: for showing stored text (a name) on a terminal.
    public static func escapedForTerminal(_ text: some StringProtocol) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"", "\\": result.unicodeScalars.append(scalar)
            default: result += escaped(scalar)
            }
        }
        return result
    }
}
