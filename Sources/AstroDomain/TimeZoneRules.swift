import Foundation
import Synchronization

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

/// Zone look-ups by identifier, found or not, in bounded memory: what `FoundationTimeZones` and
/// the `ZoneInfo` module's `SystemTimeZones` keep so that a chart does not read its zone again.
///
/// Identifiers come from clients, so the cache must not grow with what they send: callers cache
/// only names `BirthData.isIANAZoneName` accepts, zones found are kept up to `capacity` (the
/// database has about 600 names, so they all fit), and unknown names up to `unknownCapacity`,
/// an arbitrary one making room for the next. Past `capacity`, a zone found is returned and not
/// kept. A look-up runs outside the lock; two threads may both load the same zone once.
public final class ZoneLookupCache<Value: Sendable>: Sendable {
    /// The most zones found that are kept.
    public let capacity: Int
    /// The most unknown names that are kept.
    public let unknownCapacity: Int

    private struct State {
        var found: [String: Value] = [:]
        var unknown: Set<String> = []
    }

    private let state = Mutex(State())

    /// An empty cache.
    /// - Parameters:
    ///   - capacity: the most zones found kept (at least 1).
    ///   - unknownCapacity: the most unknown names kept (0: none).
    public init(capacity: Int = 2048, unknownCapacity: Int = 1024) {
        self.capacity = max(1, capacity)
        self.unknownCapacity = max(0, unknownCapacity)
    }

    /// The cached value of `identifier`, or what `load` gives (then cached within the bounds).
    /// - Parameters:
    ///   - identifier: a name `BirthData.isIANAZoneName` accepted.
    ///   - load: reads the zone; `nil` when it is unknown.
    /// - Returns: the zone, or `nil` when it is unknown.
    public func value(for identifier: String, load: (String) -> Value?) -> Value? {
        let cached: Value?? = state.withLock { state in
            if let value = state.found[identifier] { return .some(value) }
            return state.unknown.contains(identifier) ? .some(nil) : nil
        }
        if let cached { return cached }
        let value = load(identifier)
        let capacity = self.capacity
        let unknownCapacity = self.unknownCapacity
        state.withLock { state in
            if let value {
                if state.found.count < capacity { state.found[identifier] = value }
            } else if unknownCapacity > 0 {
                if state.unknown.count >= unknownCapacity { state.unknown.remove(at: state.unknown.startIndex) }
                state.unknown.insert(identifier)
            }
        }
        return value
    }

    /// Entries held, found and unknown together.
    public var count: Int { state.withLock { $0.found.count + $0.unknown.count } }
}
