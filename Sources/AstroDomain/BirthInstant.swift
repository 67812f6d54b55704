import Foundation

/// What a local wall-clock time is in a time zone: one instant, two (the clocks went back and
/// the time happened twice), or none (the clocks jumped over it).
public enum LocalTimeResolution: Sendable, Hashable {
    /// The wall time happened exactly once, at this instant, with this UTC offset (seconds).
    case unique(Date, offset: Int)
    /// The wall time happened more than once. `first` is the earliest instant (read with the
    /// offset before the clock change), `second` the latest (with the offset after it).
    case ambiguous(first: Date, firstOffset: Int, second: Date, secondOffset: Int)
    /// The wall time never showed: at `transition` the offset went from `offsetBefore` up to
    /// `offsetAfter` (seconds), skipping the wall times in between.
    case nonexistent(transition: Date, offsetBefore: Int, offsetAfter: Int)
}

/// Converts local wall-clock times to UTC instants without silent normalisation.
///
/// The wall time is read as a count of seconds `L` on a proleptic Gregorian time line (as if it
/// were UTC). Every UTC offset the zone used within two days of `L` is collected: the offsets at
/// `L` ± 1 and ± 2 days, and on both sides of each transition that
/// `TimeZoneRules.nextTransition(after:)` reports in that window (for Foundation's `TimeZone`,
/// `nextDaylightSavingTimeTransition(after:)`, which reports every change of offset). An offset
/// `o` is a reading of the wall time when the zone really used `o` at the instant `L − o`. One
/// reading: the time is unique. Several: it is ambiguous. None: it is in a gap, and the
/// transition that skipped it is named. Offsets keep their seconds (local mean time such as
/// Moscow's +02:31:19 in 1919).
public enum LocalTimeConverter {
    /// Resolves a wall time in a zone.
    /// - Parameters:
    ///   - date: the local calendar date.
    ///   - time: the local wall-clock time.
    ///   - timeZone: the zone whose rules (historical offsets included) apply: a Foundation
    ///     `TimeZone`, a `ZoneInfoRules` or any other `TimeZoneRules` (an existential is opened).
    /// - Returns: the instant(s) the wall time denotes, or the transition that skipped it.
    public static func resolve<Zone: TimeZoneRules>(
        date: BirthDate,
        time: BirthTime,
        in timeZone: Zone
    ) -> LocalTimeResolution {
        let wall = date.daysSince1970 * 86_400 + time.secondsSinceMidnight
        let windowStart = wall - 2 * 86_400
        let windowEnd = wall + 2 * 86_400
        let transitions = self.transitions(in: timeZone, from: windowStart, to: windowEnd)

        // The distinct offsets, in a small array: a zone uses one or two offsets in four days,
        // so a linear search beats hashing, and the readings are sorted below anyway.
        var offsets: [Int] = []
        offsets.reserveCapacity(4 + 2 * transitions.count)
        func collect(_ value: Int) { if !offsets.contains(value) { offsets.append(value) } }
        collect(offset(timeZone, at: windowStart))
        collect(offset(timeZone, at: wall - 86_400))
        collect(offset(timeZone, at: wall))
        collect(offset(timeZone, at: wall + 86_400))
        collect(offset(timeZone, at: windowEnd))
        for transition in transitions {
            collect(offset(timeZone, at: transition - 1))
            collect(offset(timeZone, at: transition))
        }

        var readings: [(instant: Int, offset: Int)] = []
        for candidate in offsets where offset(timeZone, at: wall - candidate) == candidate {
            readings.append((instant: wall - candidate, offset: candidate))
        }
        if readings.count > 1 { readings.sort { $0.instant < $1.instant } }
        if let first = readings.first, let last = readings.last {
            if readings.count == 1 {
                return .unique(instant(first.instant), offset: first.offset)
            }
            return .ambiguous(
                first: instant(first.instant),
                firstOffset: first.offset,
                second: instant(last.instant),
                secondOffset: last.offset
            )
        }

        // No reading: a gap. Name the forward jump that covers the wall time; should the reported
        // transitions miss it, scan the window hour by hour and bisect each change found.
        func jump(among candidates: [Int]) -> LocalTimeResolution? {
            for transition in candidates {
                let before = offset(timeZone, at: transition - 1)
                let after = offset(timeZone, at: transition)
                if after > before, transition + before <= wall, wall < transition + after {
                    return .nonexistent(transition: instant(transition), offsetBefore: before, offsetAfter: after)
                }
            }
            return nil
        }
        if let gap = jump(among: transitions)
            ?? jump(among: scannedTransitions(in: timeZone, from: windowStart, to: windowEnd))
        {
            return gap
        }
        // Unreachable for a zone whose offsets are consistent: with no reading, some jump covers `wall`.
        let current = offset(timeZone, at: wall)
        return .nonexistent(transition: instant(wall - current), offsetBefore: current, offsetAfter: current)
    }

    /// `+02:00`, `-04:00`, or `+02:31:19` when the offset has seconds.
    public static func formatOffset(_ seconds: Int) -> String {
        let sign = seconds < 0 ? "-" : "+"
        let magnitude = abs(seconds)
        let hours = magnitude / 3600
        let minutes = magnitude % 3600 / 60
        let rest = magnitude % 60
        var text = sign + twoDigits(hours) + ":" + twoDigits(minutes)
        if rest != 0 { text += ":" + twoDigits(rest) }
        return text
    }

    private static func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }

    private static func instant(_ seconds: Int) -> Date { Date(timeIntervalSince1970: TimeInterval(seconds)) }

    private static func offset(_ timeZone: some TimeZoneRules, at seconds: Int) -> Int {
        timeZone.secondsFromGMT(for: instant(seconds))
    }

    /// Instants (whole seconds since 1970) of the zone's offset changes in [start, end).
    private static func transitions(in timeZone: some TimeZoneRules, from start: Int, to end: Int) -> [Int] {
        var found: [Int] = []
        var cursor = instant(start)
        // A zone changes offset at most a few times in four days; the bound guards a loop.
        for _ in 0..<16 {
            guard let next = timeZone.nextTransition(after: cursor), next > cursor else { break }
            let seconds = Int(next.timeIntervalSince1970.rounded(.up))
            guard seconds < end else { break }
            found.append(seconds)
            cursor = next
        }
        return found
    }

    /// Offset changes in [start, end) found by sampling every hour and bisecting each change to
    /// the second (a fallback; two changes within one hour would be seen as one).
    private static func scannedTransitions(in timeZone: some TimeZoneRules, from start: Int, to end: Int) -> [Int] {
        var found: [Int] = []
        var step = start
        while step < end {
            let next = min(step + 3600, end)
            let startOffset = offset(timeZone, at: step)
            if offset(timeZone, at: next) != startOffset {
                var low = step
                var high = next
                while high - low > 1 {
                    let middle = low + (high - low) / 2
                    if offset(timeZone, at: middle) == startOffset { low = middle } else { high = middle }
                }
                found.append(high)
            }
            step = next
        }
        return found
    }
}

/// The UTC instant of a birth, with how it was found.
public struct BirthInstant: Sendable, Hashable {
    /// The birth instant.
    public var utc: Date
    /// The zone's UTC offset at that instant, in seconds (may have seconds: local mean time).
    public var utcOffset: Int
    /// The policy that resolved a gap or an overlap; `nil` when the local time was unique.
    public var dstPolicyApplied: DSTPolicy?
    /// For a resolved gap or overlap, what was done, for the chart's `dst-policy-applied` warning.
    public var note: String?

    public init(utc: Date, utcOffset: Int, dstPolicyApplied: DSTPolicy? = nil, note: String? = nil) {
        self.utc = utc
        self.utcOffset = utcOffset
        self.dstPolicyApplied = dstPolicyApplied
        self.note = note
    }
}

extension BirthData {
    /// The UTC instant of the birth: the local date and time read in the birth time zone, with
    /// its historical offsets. A local time in a gap or an overlap is resolved only by
    /// `dstPolicy` (see `DSTPolicy`), and then `dstPolicyApplied` and `note` say so.
    /// - Throws: the validation errors of `validated()` for date, time and zone;
    ///   `nonexistent-local-time` or `ambiguous-local-time` on `profile.birthTime` when the
    ///   local time is in a gap or an overlap and there is no `dstPolicy`.
    public func resolveInstant() throws(ChartInputError) -> BirthInstant {
        try resolveInstant(timeZones: .foundation)
    }

    /// The UTC instant of the birth, as `resolveInstant()`, with the zone's rules from `timeZones`.
    /// - Parameter timeZones: where zones come from (such as the system time zone database).
    /// - Returns: the instant, as `resolveInstant()`.
    /// - Throws: as `resolveInstant()`.
    public func resolveInstant(timeZones: some TimeZoneRulesProvider) throws(ChartInputError) -> BirthInstant {
        let date = try Self.parseDate(birthDate)
        let time = try Self.parseTime(birthTime)
        let zone = try Self.timeZoneRules(named: timezone, in: timeZones)
        // Only the gap and overlap messages name the local time: not built for a unique time.
        var local: String { "\(date) \(time)" }
        switch LocalTimeConverter.resolve(date: date, time: time, in: zone) {
        case .unique(let instant, let offset):
            return BirthInstant(utc: instant, utcOffset: offset)

        case .ambiguous(let first, let firstOffset, let second, let secondOffset):
            let fact =
                "\(local) happened twice in \(timezone): at \(ISO8601.string(from: first)) "
                + "(\(LocalTimeConverter.formatOffset(firstOffset))) and at \(ISO8601.string(from: second)) "
                + "(\(LocalTimeConverter.formatOffset(secondOffset)))"
            guard let dstPolicy else {
                throw ChartInputError(
                    .ambiguousLocalTime,
                    field: ChartField.birthTime,
                    message: "\(ChartField.birthTime): \(fact); give dstPolicy \"earlier\" (first) or "
                        + "\"later\" (second)"
                )
            }
            let (instant, offset, which) =
                dstPolicy == .earlier ? (first, firstOffset, "first") : (second, secondOffset, "second")
            return BirthInstant(
                utc: instant,
                utcOffset: offset,
                dstPolicyApplied: dstPolicy,
                note:
                    "\(fact); dstPolicy \"\(dstPolicy.rawValue)\" chose the \(which), \(ISO8601.string(from: instant))"
            )

        case .nonexistent(let transition, let before, let after):
            let wall = date.daysSince1970 * 86_400 + time.secondsSinceMidnight
            let fact =
                "\(local) does not exist in \(timezone): at \(ISO8601.string(from: transition)) the clocks "
                + "moved forward from \(LocalTimeConverter.formatOffset(before)) to "
                + "\(LocalTimeConverter.formatOffset(after))"
            guard let dstPolicy else {
                throw ChartInputError(
                    .nonexistentLocalTime,
                    field: ChartField.birthTime,
                    message: "\(ChartField.birthTime): \(fact); give dstPolicy \"earlier\" (read it with the "
                        + "offset before the change) or \"later\" (with the offset after it)"
                )
            }
            let offset = dstPolicy == .earlier ? before : after
            let instant = Date(timeIntervalSince1970: TimeInterval(wall - offset))
            let side = dstPolicy == .earlier ? "before" : "after"
            return BirthInstant(
                utc: instant,
                utcOffset: offset,
                dstPolicyApplied: dstPolicy,
                note: "\(fact); dstPolicy \"\(dstPolicy.rawValue)\" read it with the offset \(side) the change, "
                    + "\(LocalTimeConverter.formatOffset(offset)), giving \(ISO8601.string(from: instant))"
            )
        }
    }
}
