import AstroDomain
import Foundation
import Synchronization

/// Zone rules from the system time zone database (`/usr/share/zoneinfo`, Debian's `tzdata`),
/// falling back to Foundation's `TimeZone` when a zone's file is missing, cached per identifier.
///
/// The system database includes the IANA "backzone" history that Foundation's ICU data on Linux
/// lacks (Amsterdam Mean Time +00:19:32 in 1935, where Foundation says +00:00), so charts before
/// 1970 get the historical offset. Where there is no such file (macOS keeps its own copy and may
/// have fewer zones; minimal containers often have no `tzdata` at all) Foundation's zone is used,
/// so a missing database degrades to the old behaviour instead of refusing every chart.
///
/// A file that exists but is not valid TZif data is an unknown zone (no fallback). Only names
/// `BirthData.isIANAZoneName` accepts are looked up at all (so not `right/` (leap-second time
/// scale) or `posix/` (duplicates), nor a NUL byte); look-ups, found or unknown, are cached in a
/// bounded `ZoneLookupCache`, so no stream of distinct names grows it.
public final class SystemTimeZones: TimeZoneRulesProvider {
    /// The shared provider for the system directory: one cache for the whole process.
    public static let shared = SystemTimeZones()

    /// The database directory zones are read from.
    public let directory: String

    private let cache: ZoneLookupCache<any TimeZoneRules>

    /// A provider reading one directory.
    /// - Parameters:
    ///   - directory: the database directory (default `/usr/share/zoneinfo`).
    ///   - cache: the look-ups kept (bounded).
    public init(
        directory: String = ZoneInfoRules.systemDirectory,
        cache: ZoneLookupCache<any TimeZoneRules> = ZoneLookupCache()
    ) {
        self.directory = directory
        self.cache = cache
    }

    /// How many identifiers the cache holds (found and unknown).
    public var cachedCount: Int { cache.count }

    /// The zone's rules: from its TZif file, or from Foundation when there is no file.
    /// - Parameter identifier: the IANA identifier.
    /// - Returns: the rules, or `nil` when neither the database nor Foundation knows the zone.
    public func rules(forIdentifier identifier: String) -> (any TimeZoneRules)? {
        guard BirthData.isIANAZoneName(identifier) else { return nil }
        return cache.value(for: identifier) { self.load($0) }
    }

    /// Where `rules(forIdentifier:)` found a zone: the database, Foundation, or nowhere.
    /// - Parameter identifier: the IANA identifier.
    /// - Returns: `true` when the zone comes from a TZif file of `directory`.
    public func isFromDatabase(_ identifier: String) -> Bool {
        rules(forIdentifier: identifier) is ZoneInfoRules
    }

    private func load(_ identifier: String) -> (any TimeZoneRules)? {
        do {
            let rules = try ZoneInfoRules.load(identifier: identifier, directory: directory)
            return rules.leapSecondCount == 0 ? rules : nil
        } catch  where error.code == .notFound {
            return TimeZone(identifier: identifier)
        } catch {
            return nil
        }
    }
}
