import Foundation

/// The rules of one time zone read from a TZif file (RFC 8536, versions 1–4), such as those of
/// the system time zone database in `/usr/share/zoneinfo`.
///
/// Unlike Foundation's `TimeZone` on Linux (ICU's data, built without the IANA "backzone"
/// file), the system database of Debian and most distributions keeps each zone's own history
/// before 1970: Europe/Amsterdam has Amsterdam Mean Time (+00:19:32) in 1935, not Brussels' +00:00.
///
/// Version 2 and later files carry the data twice; the 64-bit block is used. Before the first
/// transition the zone uses local time type 0 (RFC 8536 section 3.2; `zic` makes it the first
/// standard type, usually local mean time); from the last transition on, the footer's POSIX TZ
/// string, when there is one, decides (`PosixTimeZoneRule`). Leap-second records are read but
/// not applied: they occur only in the `right/` files, which count time differently.
public struct ZoneInfoRules: Sendable, Hashable {
    /// A local time type: an offset, whether it is daylight saving time, and its abbreviation.
    public struct LocalTimeType: Sendable, Hashable {
        /// Seconds east of UTC.
        public var utcOffset: Int
        /// Whether the type is daylight saving time.
        public var isDaylightSaving: Bool
        /// The abbreviation, such as `CEST` or `+0545`.
        public var abbreviation: String
    }

    /// The zone's identifier (`Europe/Amsterdam`), or what the caller named the data.
    public let identifier: String
    /// The TZif version, 1–4.
    public let version: Int
    /// The transition instants, seconds since 1970-01-01T00:00:00Z, ascending.
    public let transitionTimes: [Int]
    /// For each transition, the index in `localTimeTypes` of the type it starts.
    public let transitionTypeIndices: [Int]
    /// The local time types (at least one).
    public let localTimeTypes: [LocalTimeType]
    /// The footer's POSIX TZ string (empty when there is none, as in version 1 files).
    public let footer: String
    /// The parsed footer rule; `nil` when the footer is empty.
    public let footerRule: PosixTimeZoneRule?
    /// How many leap-second records the file has (non-zero only in `right/` files).
    public let leapSecondCount: Int
    /// The offset each transition starts (`localTimeTypes[transitionTypeIndices[i]].utcOffset`).
    private let offsetsAfterTransitions: [Int]

    /// Parses TZif data.
    /// - Parameters:
    ///   - data: the bytes of a TZif file.
    ///   - identifier: the name the rules report as `identifier`.
    /// - Throws: `ZoneInfoError` with code `notTZif` without the `TZif` magic, `malformed` when
    ///   the data is truncated or inconsistent.
    public init(data: Data, identifier: String) throws(ZoneInfoError) {
        var reader = TZifReader(bytes: [UInt8](data), identifier: identifier)
        let first = try reader.header()
        var block = first
        if first.version >= 2 {
            try reader.skip(first.dataLength(timeSize: 4))
            block = try reader.header()
            guard block.version == first.version else { throw reader.failure("the two headers differ in version") }
        }
        let timeSize = block.version >= 2 ? 8 : 4

        var times: [Int] = []
        times.reserveCapacity(block.transitionCount)
        for _ in 0..<block.transitionCount {
            let time =
                timeSize == 8
                ? Int(Int64(bitPattern: try reader.uint64())) : Int(Int32(bitPattern: try reader.uint32()))
            if let previous = times.last, time <= previous { throw reader.failure("transitions are not ascending") }
            times.append(time)
        }
        var indices: [Int] = []
        indices.reserveCapacity(block.transitionCount)
        for _ in 0..<block.transitionCount {
            let index = Int(try reader.byte())
            guard index < block.typeCount else { throw reader.failure("transition type \(index) out of range") }
            indices.append(index)
        }
        var rawTypes: [(offset: Int, isDaylight: Bool, designation: Int)] = []
        for _ in 0..<block.typeCount {
            let offset = Int32(bitPattern: try reader.uint32())
            guard offset != Int32.min else { throw reader.failure("a UT offset of -2^31") }
            let isDaylight = try reader.byte()
            guard isDaylight <= 1 else { throw reader.failure("isdst is not 0 or 1") }
            let designation = Int(try reader.byte())
            guard designation < block.characterCount else { throw reader.failure("abbreviation index out of range") }
            rawTypes.append((Int(offset), isDaylight == 1, designation))
        }
        let characters = Array(try reader.bytes(block.characterCount))
        try reader.skip(block.leapCount * (timeSize + 4) + block.standardIndicatorCount + block.utIndicatorCount)

        var footer = ""
        if block.version >= 2 {
            guard try reader.byte() == UInt8(ascii: "\n") else {
                throw reader.failure("the footer does not start a line")
            }
            let text = try reader.line()
            footer = String(decoding: text, as: UTF8.self)
        }

        self.identifier = identifier
        version = block.version
        transitionTimes = times
        transitionTypeIndices = indices
        localTimeTypes = rawTypes.map { type in
            let end = characters[type.designation...].firstIndex(of: 0) ?? characters.endIndex
            return LocalTimeType(
                utcOffset: type.offset,
                isDaylightSaving: type.isDaylight,
                abbreviation: String(decoding: characters[type.designation..<end], as: UTF8.self)
            )
        }
        self.footer = footer
        footerRule = footer.isEmpty ? nil : try PosixTimeZoneRule(parsing: footer)
        leapSecondCount = block.leapCount
        offsetsAfterTransitions = indices.map { rawTypes[$0].offset }
    }

    /// The offset from UTC at an instant.
    /// - Parameter instant: the instant.
    /// - Returns: seconds east of UTC (with seconds for local mean time, such as Amsterdam's 1172).
    public func offset(at instant: Date) -> Int {
        offset(atSecond: Self.wholeSeconds(instant))
    }

    /// The offset from UTC at an instant given in whole seconds since 1970-01-01T00:00:00Z.
    /// - Parameter seconds: the instant.
    /// - Returns: seconds east of UTC.
    public func offset(atSecond seconds: Int) -> Int {
        let times = transitionTimes
        guard let last = times.last else { return footerRule?.offset(atSecond: seconds) ?? localTimeTypes[0].utcOffset }
        if seconds >= last, let footerRule { return footerRule.offset(atSecond: seconds) }
        guard seconds >= times[0] else { return localTimeTypes[0].utcOffset }
        // The last transition at or before `seconds`.
        var low = 0
        var high = times.count
        while high - low > 1 {
            let middle = (low + high) / 2
            if times[middle] <= seconds { low = middle } else { high = middle }
        }
        return offsetsAfterTransitions[low]
    }

    /// The first transition strictly after an instant: from the table, then from the footer rule.
    /// Transitions that change only the abbreviation or the DST flag are included.
    /// - Parameter instant: the instant.
    /// - Returns: the transition, or `nil` when the offset never changes again.
    public func nextTransition(after instant: Date) -> Date? {
        nextTransition(afterSecond: Self.wholeSeconds(instant)).map { Date(timeIntervalSince1970: TimeInterval($0)) }
    }

    /// `nextTransition(after:)` in whole seconds since 1970-01-01T00:00:00Z.
    /// - Parameter seconds: the instant.
    /// - Returns: the transition in seconds since 1970, or `nil`.
    public func nextTransition(afterSecond seconds: Int) -> Int? {
        let times = transitionTimes
        if let last = times.last, seconds < last {
            var low = 0
            var high = times.count - 1
            while low < high {
                let middle = (low + high) / 2
                if times[middle] > seconds { high = middle } else { low = middle + 1 }
            }
            return times[low]
        }
        return footerRule?.nextTransition(afterSecond: max(seconds, times.last ?? seconds))
    }

    /// The transitions within a range, from the table and the footer rule.
    /// - Parameter range: the instants to look in.
    /// - Returns: the transitions in `range`, ascending.
    public func transitions(in range: ClosedRange<Date>) -> [Date] {
        var found: [Date] = []
        var cursor = Self.wholeSeconds(range.lowerBound) - 1
        let end = range.upperBound.timeIntervalSince1970
        while let next = nextTransition(afterSecond: cursor), TimeInterval(next) <= end {
            let date = Date(timeIntervalSince1970: TimeInterval(next))
            if date >= range.lowerBound { found.append(date) }
            cursor = next
        }
        return found
    }

    /// The largest whole second at or before an instant (clamped far outside any real date).
    private static func wholeSeconds(_ instant: Date) -> Int {
        let seconds = instant.timeIntervalSince1970
        guard seconds.isFinite else { return seconds > 0 ? Int(1e15) : Int(-1e15) }
        return Int(min(max(seconds.rounded(.down), -1e15), 1e15))
    }
}

/// The six counts of a TZif header.
private struct TZifHeader {
    var version: Int
    var utIndicatorCount: Int
    var standardIndicatorCount: Int
    var leapCount: Int
    var transitionCount: Int
    var typeCount: Int
    var characterCount: Int

    func dataLength(timeSize: Int) -> Int {
        transitionCount * timeSize + transitionCount + typeCount * 6 + characterCount
            + leapCount * (timeSize + 4) + standardIndicatorCount + utIndicatorCount
    }
}

/// Reads big-endian TZif fields, checking every length.
private struct TZifReader {
    let bytes: [UInt8]
    let identifier: String
    var index = 0

    func failure(_ what: String) -> ZoneInfoError {
        ZoneInfoError(.malformed, reason: "\(identifier): \(what) (byte \(index))")
    }

    mutating func header() throws(ZoneInfoError) -> TZifHeader {
        guard bytes.count - index >= 4, bytes[index..<index + 4].elementsEqual("TZif".utf8) else {
            if index == 0 { throw ZoneInfoError(.notTZif, reason: "\(identifier) is not TZif data") }
            throw failure("no second TZif header")
        }
        guard bytes.count - index >= 44 else { throw failure("truncated header") }
        let version: Int
        switch bytes[index + 4] {
        case 0: version = 1
        case UInt8(ascii: "2"): version = 2
        case UInt8(ascii: "3"): version = 3
        case UInt8(ascii: "4"): version = 4
        default: throw failure("unknown TZif version")
        }
        index += 20
        var counts: [Int] = []
        for _ in 0..<6 {
            let count = Int(try uint32())
            guard count < 1 << 24 else { throw failure("a count of \(count)") }
            counts.append(count)
        }
        let header = TZifHeader(
            version: version,
            utIndicatorCount: counts[0],
            standardIndicatorCount: counts[1],
            leapCount: counts[2],
            transitionCount: counts[3],
            typeCount: counts[4],
            characterCount: counts[5]
        )
        guard header.typeCount >= 1, header.typeCount <= 256, header.characterCount >= 1,
            header.utIndicatorCount == 0 || header.utIndicatorCount == header.typeCount,
            header.standardIndicatorCount == 0 || header.standardIndicatorCount == header.typeCount
        else { throw failure("inconsistent header counts") }
        return header
    }

    mutating func skip(_ count: Int) throws(ZoneInfoError) {
        guard bytes.count - index >= count else { throw failure("truncated") }
        index += count
    }

    mutating func bytes(_ count: Int) throws(ZoneInfoError) -> ArraySlice<UInt8> {
        guard bytes.count - index >= count else { throw failure("truncated") }
        defer { index += count }
        return bytes[index..<index + count]
    }

    mutating func byte() throws(ZoneInfoError) -> UInt8 {
        guard index < bytes.count else { throw failure("truncated") }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func uint32() throws(ZoneInfoError) -> UInt32 {
        var value: UInt32 = 0
        for byte in try bytes(4) { value = value << 8 | UInt32(byte) }
        return value
    }

    mutating func uint64() throws(ZoneInfoError) -> UInt64 {
        var value: UInt64 = 0
        for byte in try bytes(8) { value = value << 8 | UInt64(byte) }
        return value
    }

    /// The bytes up to the next newline, which is consumed.
    mutating func line() throws(ZoneInfoError) -> ArraySlice<UInt8> {
        guard let end = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) else { throw failure("unterminated footer") }
        defer { index = end + 1 }
        return bytes[index..<end]
    }
}
