import AMQP
import Foundation
import JOSE

/// Hiding secrets in what `astroctl dead show` prints: a dead letter's body and headers may hold
/// a signed App Store transaction, a token or a password, which an operator's terminal, shell
/// history or pasted ticket must not receive.
public enum Redaction {
    /// Object keys whose values are never printed, compared case-insensitively without `-` and
    /// `_`: a key containing any of these (`signedTransaction`, `signedPayload`, `accessToken`,
    /// `x-api-key`, `password`…).
    public static let secretKeyParts = [
        "token", "secret", "password", "passwd", "jws", "jwt", "signed", "signature", "authorization", "apikey",
        "credential", "privatekey", "cookie", "session", "receipt",
    ]

    /// Whether values under `key` are secret (see `secretKeyParts`).
    public static func isSecretKey(_ key: String) -> Bool {
        let folded = key.lowercased().filter { $0 != "-" && $0 != "_" }
        return secretKeyParts.contains { folded.contains($0) }
    }

    /// Whether a string value looks like a secret whatever its key: a JWS or JWT (three base64url
    /// segments), a bearer credential or a PEM block.
    public static func looksLikeSecret(_ value: String) -> Bool {
        if value.hasPrefix("Bearer ") || value.hasPrefix("bearer ") || value.contains("-----BEGIN ") { return true }
        let segments = value.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3, value.utf8.count >= 40 else { return false }
        // Padding too: a secret is hidden even when it is not a well-formed token.
        let base64URL = { (byte: UInt8) in Base64URL.isAlphabet(byte) || byte == UInt8(ascii: "=") }
        return segments[0].utf8.count >= 10 && segments[1].utf8.count >= 10
            && segments.allSatisfy { $0.utf8.allSatisfy(base64URL) }
    }

    /// What is printed instead of a secret: its size only.
    public static func placeholder(for value: String) -> String { "[redacted: \(value.utf8.count) bytes]" }

    /// The largest body shown, in bytes; a longer one is cut with a note.
    public static let maximumShownBytes = 16_384

    /// A message body as printed: JSON pretty-printed with sorted keys and every secret value
    /// (by key or by look) replaced; anything else as text with control characters escaped, a
    /// body that as a whole looks like a secret replaced. Cut after `maximumShownBytes`.
    public static func body(_ data: Data) -> String {
        if let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]),
            let redacted = try? JSONSerialization.data(
                withJSONObject: redact(object),
                options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed]
            )
        {
            return cut(String(decoding: redacted, as: UTF8.self))
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if looksLikeSecret(text) { return placeholder(for: text) }
        return cut(escaped(text))
    }

    /// A JSON value with secrets replaced, recursively.
    static func redact(_ value: Any, key: String? = nil) -> Any {
        if let key, isSecretKey(key), !(value is NSNull) {
            if let text = value as? String { return placeholder(for: text) }
            return "[redacted]"
        }
        switch value {
        case let object as [String: Any]:
            return Dictionary(uniqueKeysWithValues: object.map { ($0.key, redact($0.value, key: $0.key)) })
        case let array as [Any]:
            return array.map { redact($0, key: nil) }
        case let text as String:
            return looksLikeSecret(text) ? placeholder(for: text) : text
        default:
            return value
        }
    }

    /// A header value as printed: secrets replaced, nested tables (`x-death`) flattened to
    /// `key=value` pairs.
    public static func header(_ key: String, _ value: AMQPFieldValue) -> String {
        if isSecretKey(key) { return "[redacted]" }
        switch value {
        case .string(let text): return looksLikeSecret(text) ? placeholder(for: text) : escaped(text)
        case .int(let number): return String(number)
        case .bool(let flag): return String(flag)
        case .double(let number): return String(number)
        case .void: return "(void)"
        case .table(let table):
            return "{" + table.keys.sorted().map { "\($0)=\(header($0, table[$0] ?? .void))" }.joined(separator: " ")
                + "}"
        case .array(let values): return "[" + values.map { header(key, $0) }.joined(separator: ", ") + "]"
        }
    }

    /// Control characters (a terminal would obey them) written as `\u{…}` escapes; newlines and
    /// tabs kept.
    public static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar == "\n" || scalar == "\t" || !(scalar.properties.generalCategory == .control) {
                out.unicodeScalars.append(scalar)
            } else {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            }
        }
        return out
    }

    static func cut(_ text: String) -> String {
        guard text.utf8.count > maximumShownBytes else { return text }
        let kept = String(decoding: text.utf8.prefix(maximumShownBytes), as: UTF8.self)
        return kept + "\n… (\(text.utf8.count - maximumShownBytes) more bytes not shown)"
    }
}

/// An input of an operator command that is not valid: exit status 2 like every usage error.
public struct OperatorInputError: Error, CustomStringConvertible, Equatable {
    /// What is wrong and what is accepted.
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// `--since`: how far back, as a duration (`90s`, `30m`, `12h`, `7d`) or a moment (ISO 8601:
/// `2026-11-24`, `2026-11-24T10:00:00Z`).
public enum SinceOption {
    /// The longest duration accepted: ten years.
    public static let maximumDays = 3650

    /// The moment `text` names, relative to `now` for a duration.
    /// - Throws: `OperatorInputError` when it is neither form, negative or beyond ten years.
    public static func parse(_ text: String, now: Date = Date()) throws(OperatorInputError) -> Date {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 40 else {
            throw OperatorInputError(
                "--since: expected a duration (30m, 12h, 7d) or an ISO 8601 time, got \(text.debugDescription)"
            )
        }
        if let unit = trimmed.last, let seconds = ["s": 1.0, "m": 60, "h": 3600, "d": 86400][String(unit)],
            let amount = Int(trimmed.dropLast()), amount >= 0
        {
            guard Double(amount) * seconds <= Double(maximumDays) * 86400 else {
                throw OperatorInputError("--since: at most \(maximumDays)d, got \(trimmed)")
            }
            return now.addingTimeInterval(-Double(amount) * seconds)
        }
        let full = ISO8601DateFormatter()
        full.formatOptions = [.withInternetDateTime]
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        for formatter in [full, fractional, day] {
            if let date = formatter.date(from: trimmed) { return date }
        }
        throw OperatorInputError(
            "--since: expected a duration (30m, 12h, 7d) or an ISO 8601 time, got \(text.debugDescription)"
        )
    }
}

/// Who an operator action is recorded as: `--operator`, else `$ASTRO_OPERATOR`, else the login
/// user (`$SUDO_USER` first, so `sudo astroctl` names the person), else `unknown`.
public enum OperatorIdentity {
    /// The longest name accepted, in characters.
    public static let maximumLength = 100

    /// - Throws: `OperatorInputError` for a name that is empty, too long or has control characters.
    public static func resolve(option: String?, environment: [String: String]) throws(OperatorInputError) -> String {
        let candidates: [(String, String?)] = [
            ("--operator", option), ("ASTRO_OPERATOR", environment["ASTRO_OPERATOR"]),
            ("SUDO_USER", environment["SUDO_USER"]), ("USER", environment["USER"]), ("LOGNAME", environment["LOGNAME"]),
        ]
        for (source, value) in candidates {
            guard let value else { continue }
            let name = value.trimmingCharacters(in: .whitespaces)
            if name.isEmpty, source != "--operator" { continue }
            guard !name.isEmpty, name.count <= maximumLength,
                !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else {
                throw OperatorInputError("\(source): an operator name is 1 to \(maximumLength) printable characters")
            }
            return name
        }
        return "unknown"
    }

    /// An action's reason (`--why`), trimmed; nil when absent or blank.
    /// - Throws: `OperatorInputError` when longer than 500 characters or with control characters.
    public static func reason(_ text: String?) throws(OperatorInputError) -> String? {
        guard let text else { return nil }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty { return nil }
        guard trimmed.count <= 500,
            !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { throw OperatorInputError("--why: at most 500 printable characters") }
        return trimmed
    }
}

/// A plain text table: a header row, columns padded to their widest cell, each cell cut to
/// `maximumCellWidth` characters (with `…`) and escaped, so one long reason cannot wreck it.
public enum TextTable {
    /// The widest a cell is printed.
    public static let maximumCellWidth = 60

    public static func render(header: [String], rows: [[String]]) -> String {
        func cell(_ text: String) -> String {
            let flat = Redaction.escaped(text).replacingOccurrences(of: "\n", with: " ").replacingOccurrences(
                of: "\t",
                with: " "
            )
            return flat.count > maximumCellWidth ? String(flat.prefix(maximumCellWidth - 1)) + "…" : flat
        }
        let cells = ([header] + rows).map { $0.map(cell) }
        var widths = Array(repeating: 0, count: header.count)
        for row in cells {
            for (index, text) in row.enumerated() where index < widths.count {
                widths[index] = max(widths[index], text.count)
            }
        }
        return cells.map { row in
            row.enumerated().map { index, text in
                index == row.count - 1 ? text : text.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }
            .joined(separator: "  ")
        }
        .joined(separator: "\n")
    }
}

/// The answer to a destructive command's question (`astroctl dead purge`).
public enum Confirmation {
    /// Whether a line typed is a yes (`y` or `yes`, any case); no line (end of input, a script
    /// without --yes) is a no.
    public static func accepts(_ line: String?) -> Bool {
        guard let line else { return false }
        let answer = line.trimmingCharacters(in: .whitespaces).lowercased()
        return answer == "y" || answer == "yes"
    }
}
