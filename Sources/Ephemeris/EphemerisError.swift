/// The one error type of the Ephemeris module.
///
/// `message` says what failed (the path, body or Julian day involved) and what to do about it.
public struct EphemerisError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong, coarsely.
    public enum Kind: Sendable, Hashable {
        /// The data directory or a data file (for example `seas_18.se1` for Chiron) is missing: a deployment
        /// problem, fatal until fixed.
        case filesMissing
        /// libswe silently used the Moshier ephemeris instead of the Swiss Ephemeris files, and the
        /// configuration does not allow it: a deployment problem.
        case moshierFallback
        /// libswe reported an error for a computation, or the `Ephemeris` was shut down.
        case calculationFailed
        /// An argument is out of range (latitude, longitude, Julian day, thread count, path): permanent.
        case invalidInput
    }

    /// What went wrong, coarsely.
    public var kind: Kind
    /// What happened and what to do.
    public var message: String
    /// The source file that raised the error.
    public var file: String
    /// The source line that raised the error.
    public var line: UInt

    /// Creates an error.
    /// - Parameters:
    ///   - kind: The error class.
    ///   - message: What happened and what to do.
    public init(kind: Kind, message: String, file: String = #fileID, line: UInt = #line) {
        self.kind = kind
        self.message = message
        self.file = file
        self.line = line
    }

    /// The kind and the message.
    public var description: String {
        "EphemerisError.\(kind): \(message)"
    }

    /// The kind, the message and where it was raised.
    public var debugDescription: String {
        "EphemerisError.\(kind): \(message) (\(file):\(line))"
    }
}
