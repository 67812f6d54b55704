import Foundation

/// How an `Ephemeris` finds its data files and how many threads it computes on.
public struct EphemerisConfiguration: Sendable, Hashable {
    /// The default data directory of Debian's `swe-standard-data`, used when `SE_EPHE_PATH` is unset.
    public static let defaultPath = "/usr/share/libswe/ephe"

    /// The directory of the Swiss Ephemeris data files (`sepl_*.se1`, `semo_*.se1`, `seas_*.se1`); libswe also
    /// accepts several directories separated by `:`.
    public var path: String
    /// Whether results computed with the built-in Moshier ephemeris (less precise, used by libswe when the
    /// files are missing) are accepted instead of being an error.
    public var allowMoshierFallback: Bool = false
    /// How many dedicated threads compute charts for `Ephemeris.positions` (at least 1).
    public var threads: Int = 1

    /// Creates a configuration.
    /// - Parameters:
    ///   - path: The data directory; `nil` takes the environment variable `SE_EPHE_PATH`, else
    ///     `/usr/share/libswe/ephe`.
    ///   - allowMoshierFallback: Whether a fallback to the Moshier ephemeris is accepted.
    ///   - threads: How many pinned computation threads to start.
    public init(path: String? = nil, allowMoshierFallback: Bool = false, threads: Int = 1) {
        if let path {
            self.path = path
        } else if let fromEnvironment = ProcessInfo.processInfo.environment["SE_EPHE_PATH"], !fromEnvironment.isEmpty {
            self.path = fromEnvironment
        } else {
            self.path = Self.defaultPath
        }
        self.allowMoshierFallback = allowMoshierFallback
        self.threads = threads
    }
}
