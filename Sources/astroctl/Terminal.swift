import AstroDomain

/// Text from the database or another program shown on an operator's terminal: stored names,
/// report and story text (written by users or an LLM) may hold escape sequences, which a
/// terminal would obey (retitle the window, hide text, rewrite the screen). They are shown as
/// `\u{1B}` escapes; line breaks and tabs stay.
enum Terminal {
    static func safe(_ text: String) -> String {
        guard !text.unicodeScalars.allSatisfy({ TextRules.isAllowed($0, allowTab: true, allowNewline: true) }) else {
            return text
        }
        var result = ""
        for scalar in text.unicodeScalars {
            if TextRules.isAllowed(scalar, allowTab: true, allowNewline: true) {
                result.unicodeScalars.append(scalar)
            } else {
                result += InputQuote.escapedForTerminal(String(scalar))
            }
        }
        return result
    }
}
