/// SQL text for a statement.
///
/// Only a string literal (no interpolation) or the explicitly risky `init(unsafeSQL:)` makes one,
/// so values always travel as `$n` parameters and never inside the text.
public struct SQL: Sendable, Hashable, ExpressibleByStringLiteral {
    /// The statement text.
    public let text: String

    /// Makes SQL from a string literal.
    public init(stringLiteral value: StaticString) {
        self.text = value.withUTF8Buffer { String(decoding: $0, as: UTF8.self) }
    }

    /// Makes SQL from a runtime string.
    ///
    /// - Important: Only for SQL assembled from trusted constants (migration files, validated
    ///   identifiers). Never put a user-supplied value in `unsafeSQL`: bind it as a parameter.
    public init(unsafeSQL: String) {
        self.text = unsafeSQL
    }
}
