import Foundation

/// A time zone's offsets from UTC over history: what `LocalTimeConverter` reads local times with.
///
/// Foundation's `TimeZone` conforms (the fallback); the `ZoneInfo` module's `ZoneInfoRules`,
/// read from the system time zone database, conforms too and knows more pre-1970 history.
public protocol TimeZoneRules: Sendable {
    /// The IANA identifier, such as `Europe/Kyiv`.
    var identifier: String { get }

    /// The offset from UTC at an instant.
    /// - Parameter date: the instant.
    /// - Returns: seconds east of UTC (local mean time keeps its seconds).
    func secondsFromGMT(for date: Date) -> Int

    /// The first change of offset strictly after an instant (changes of only the abbreviation
    /// or the DST flag may be reported too).
    /// - Parameter date: the instant.
    /// - Returns: the instant of the change, or `nil` when there is none.
    func nextTransition(after date: Date) -> Date?
}

extension TimeZone: TimeZoneRules {
    /// `nextDaylightSavingTimeTransition(after:)`, which on Foundation reports every change of offset.
    /// - Parameter date: the instant.
    /// - Returns: the next transition, or `nil`.
    public func nextTransition(after date: Date) -> Date? { nextDaylightSavingTimeTransition(after: date) }
}

/// Finds a zone's rules by identifier: what `BirthData.validated(timeZones:)` and
/// `BirthData.resolveInstant(timeZones:)` look zones up with.
public protocol TimeZoneRulesProvider: Sendable {
    /// The rules of a zone.
    /// - Parameter identifier: an identifier already checked to look like an IANA one
    ///   (`Area/Location` or one of the few slashless names such as `UTC`).
    /// - Returns: the rules, or `nil` when the identifier names no zone.
    /// - Important: called once or twice per chart: look-ups should be cached.
    func rules(forIdentifier identifier: String) -> (any TimeZoneRules)?
}

/// Zones from Foundation's `TimeZone` (on Linux, ICU's data: no pre-1970 history for zones the
/// tz database's "backzone" file describes), cached per identifier.
public struct FoundationTimeZones: TimeZoneRulesProvider {
    /// A provider; every instance shares one cache.
    public init() {}

    /// The Foundation zone, from the cache of `BirthData.timeZone(named:)`.
    /// - Parameter identifier: the identifier.
    /// - Returns: the zone, or `nil` when Foundation does not know the identifier.
    public func rules(forIdentifier identifier: String) -> (any TimeZoneRules)? {
        BirthData.foundationTimeZone(identifier)
    }
}

extension TimeZoneRulesProvider where Self == FoundationTimeZones {
    /// Zones from Foundation's `TimeZone`.
    public static var foundation: FoundationTimeZones { FoundationTimeZones() }
}
