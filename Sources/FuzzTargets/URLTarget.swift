import AMQP
import Foundation
import Postgres

/// `url`: connection URLs from the environment (`AMQPConfiguration(url:)`, `PostgresConfiguration(url:)`),
/// the input as UTF-8 text (invalid sequences replaced).
///
/// Invariant: a password is never shown. When the input has the shape `scheme://user:PASSWORD@…` with a
/// PASSWORD of at least 6 characters (the text between the first `:` after `://` and the first or the
/// last `@`: both readings are checked), neither a parse error's `description` and `debugDescription`
/// nor a parsed configuration's `redactedURL` may contain that PASSWORD. So that the same text elsewhere
/// in the URL or in an error's fixed wording does not count, a finding is confirmed by parsing the URL
/// again with only the password's letters and digits changed (hex digits to hex digits): the shown text
/// must then hold the password fewer times and the changed password more times.
enum URLTarget {
    static let target = FuzzTarget(
        name: "url",
        summary: "AMQPConfiguration(url:) and PostgresConfiguration(url:), passwords never in errors",
        run: run
    )

    /// Passwords shorter than this are not checked (they would match ordinary words of the messages).
    static let minimumPasswordLength = 6

    static func run(_ data: Data) {
        let url = String(decoding: data, as: UTF8.self)
        let amqp = amqpTexts(url)
        let postgres = postgresTexts(url)
        for password in passwordRanges(in: url) {
            let secret = String(url[password])
            let changedSecret = String(secret.map(changed))
            guard changedSecret != secret else { continue }
            let changedURL = url.replacingCharacters(in: password, with: changedSecret)
            let change = Change(url: url, secret: secret, changedURL: changedURL, changedSecret: changedSecret)
            check(amqp, change, parser: "AMQPConfiguration", texts: amqpTexts)
            check(postgres, change, parser: "PostgresConfiguration", texts: postgresTexts)
        }
    }

    /// What a parse shows: the error's descriptions, or the redacted URL of the configuration.
    private struct Shown {
        var texts: [String]
        var failed: Bool
    }

    private static func amqpTexts(_ url: String) -> Shown {
        do {
            return Shown(texts: [try AMQPConfiguration(url: url).redactedURL], failed: false)
        } catch {
            return Shown(texts: [error.description, error.debugDescription], failed: true)
        }
    }

    private static func postgresTexts(_ url: String) -> Shown {
        do {
            return Shown(texts: [try PostgresConfiguration(url: url).redactedURL], failed: false)
        } catch {
            return Shown(texts: [error.description, error.debugDescription], failed: true)
        }
    }

    /// A URL and the same URL with only its password's letters and digits changed.
    private struct Change {
        var url: String
        var secret: String
        var changedURL: String
        var changedSecret: String
    }

    private static func check(_ shown: Shown, _ change: Change, parser: String, texts: (String) -> Shown) {
        guard shown.texts.contains(where: { occurrences(of: change.secret, in: $0) > 0 }) else { return }
        let changedShown = texts(change.changedURL)
        guard changedShown.failed == shown.failed else { return }
        for (index, text) in shown.texts.enumerated() where changedShown.texts.indices.contains(index) {
            // Shown because of the password: changing it changes what is shown, one for one.
            let changedText = changedShown.texts[index]
            guard occurrences(of: change.secret, in: text) > occurrences(of: change.secret, in: changedText),
                occurrences(of: change.changedSecret, in: changedText) > occurrences(of: change.changedSecret, in: text)
            else { continue }
            let what = shown.failed ? (index == 0 ? "error description" : "error debugDescription") : "redactedURL"
            fatalError(
                "\(parser): the \(what) shows the password \(quoted(change.secret)) of the URL "
                    + "\(quoted(change.url)): \(quoted(text))"
            )
        }
    }

    /// Non-overlapping occurrences of `part` in `text`, byte for byte: Foundation's string search
    /// traps (index out of bounds) on some strings with NUL bytes, which a fuzzer finds.
    private static func occurrences(of part: String, in text: String) -> Int {
        let needle = Array(part.utf8)
        let haystack = Array(text.utf8)
        guard !needle.isEmpty else { return 0 }
        var count = 0
        var index = 0
        while index + needle.count <= haystack.count {
            if haystack[index..<(index + needle.count)].elementsEqual(needle) {
                count += 1
                index += needle.count
            } else {
                index += 1
            }
        }
        return count
    }

    /// The password of `scheme://user:PASSWORD@…`, read up to the first and up to the last `@` (a
    /// password may contain a raw `@`), when at least `minimumPasswordLength` characters long.
    static func passwordRanges(in url: String) -> [Range<String.Index>] {
        guard let scheme = url.firstRange(of: "://") else { return [] }
        let rest = url[scheme.upperBound...]
        var ranges: [Range<String.Index>] = []
        for at in [rest.firstIndex(of: "@"), rest.lastIndex(of: "@")] {
            guard let at, let colon = rest[..<at].firstIndex(of: ":") else { continue }
            let password = rest.index(after: colon)..<at
            if url[password].count >= minimumPasswordLength, !ranges.contains(password) {
                ranges.append(password)
            }
        }
        return ranges
    }

    /// A different character of the same kind: letters and digits rotate within a-f, g-z, A-F, G-Z, 0-9
    /// (so percent escapes stay well-formed); anything else stays.
    private static func changed(_ character: Character) -> Character {
        guard character.unicodeScalars.count == 1, let ascii = character.asciiValue else { return character }
        let ranges: [ClosedRange<UInt8>] = [
            UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "g")...UInt8(ascii: "z"),
            UInt8(ascii: "A")...UInt8(ascii: "F"), UInt8(ascii: "G")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
        ]
        guard let range = ranges.first(where: { $0.contains(ascii) }) else { return character }
        let count = range.upperBound - range.lowerBound + 1
        return Character(Unicode.Scalar(range.lowerBound + (ascii - range.lowerBound + 1) % count))
    }
}
