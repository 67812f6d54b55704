import AstroDomain
import Foundation

extension ZoneInfoRules {
    /// Where the system time zone database lives on Linux (Debian's `tzdata`) and macOS.
    public static let systemDirectory = "/usr/share/zoneinfo"

    /// Reads a zone's TZif file from a time zone database directory.
    /// - Parameters:
    ///   - identifier: an IANA identifier such as `Europe/Amsterdam`: only `[A-Za-z0-9/_+-]`,
    ///     no leading `/`, no `..`, so it can only name a file inside `directory`.
    ///   - directory: the database directory.
    /// - Returns: the zone's rules.
    /// - Throws: `ZoneInfoError`: `invalidIdentifier`, `notFound` (no such file), `unreadable`,
    ///   `notTZif` (`zone.tab`, `tzdata.zi`, …) or `malformed`.
    public static func load(
        identifier: String,
        directory: String = systemDirectory
    ) throws(ZoneInfoError) -> ZoneInfoRules {
        try validate(identifier: identifier)
        let path = directory + "/" + identifier
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ZoneInfoError(.notFound, reason: "no zone file for \(InputQuote.short(identifier))")
        }
        guard !isDirectory.boolValue else {
            throw ZoneInfoError(.notTZif, reason: "\(InputQuote.short(identifier)) is a directory")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path), options: .mappedIfSafe)
        } catch {
            throw ZoneInfoError(.unreadable, reason: "\(InputQuote.short(identifier)) could not be read")
        }
        return try ZoneInfoRules(data: data, identifier: identifier)
    }

    /// Checks that an identifier can only name a file below the database directory.
    /// - Throws: `ZoneInfoError` with code `invalidIdentifier`.
    static func validate(identifier: String) throws(ZoneInfoError) {
        let allowed = identifier.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "/"), UInt8(ascii: "_"), UInt8(ascii: "+"),
                UInt8(ascii: "-"):
                true
            default: false
            }
        }
        guard !identifier.isEmpty, identifier.utf8.count <= 255, allowed, !identifier.hasPrefix("/"),
            !identifier.contains("..")
        else {
            throw ZoneInfoError(.invalidIdentifier, reason: "\(InputQuote.short(identifier)) is not a zone identifier")
        }
    }
}

extension ZoneInfoRules: TimeZoneRules {
    /// `offset(at:)`, as `TimeZoneRules` names it.
    /// - Parameter date: the instant.
    /// - Returns: seconds east of UTC.
    public func secondsFromGMT(for date: Date) -> Int { offset(at: date) }
}
