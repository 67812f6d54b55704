/// Why a zone's rules could not be loaded or parsed.
public struct ZoneInfoError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, in a small set of codes.
    public enum Code: String, Sendable, Hashable {
        /// The identifier is not a safe relative path of `[A-Za-z0-9/_+-]` without `..` or a leading `/`.
        case invalidIdentifier = "invalid-identifier"
        /// No file with that name exists in the directory.
        case notFound = "not-found"
        /// The file exists but could not be read (permissions, a directory, I/O).
        case unreadable
        /// The file is not TZif data (no `TZif` magic): `zone.tab`, `posixrules` text, …
        case notTZif = "not-tzif"
        /// TZif data that is truncated or inconsistent (counts, indices, footer).
        case malformed
    }

    /// The code.
    public var code: Code
    /// What exactly was wrong (names the identifier or the field, never file contents).
    public var reason: String
    /// Where the error was raised.
    public var file: String
    /// Where the error was raised.
    public var line: Int

    /// - Parameters:
    ///   - code: the code.
    ///   - reason: what exactly was wrong.
    public init(_ code: Code, reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    public var description: String { "\(code.rawValue): \(reason)" }
}
