import Foundation

extension NatalChart {
    /// The chart's JSON as UTF-8 bytes: byte for byte what `JSONCoding.encoder.encode(self)` gives
    /// (sorted keys, unescaped slashes, ISO 8601 dates, numbers as Swift prints them), written by
    /// hand into one buffer, several times faster than `JSONEncoder`.
    /// - Returns: the JSON text of CONTRACT.md's NatalChart.
    /// - Throws: `EncodingError.invalidValue` when a number is NaN or infinite, as `JSONEncoder` does.
    public func jsonBytes() throws -> [UInt8] {
        try NatalChartJSONWriter.encode(self, capacity: NatalChartJSONWriter.capacity(for: self)).bytes
    }
}

/// Writes a `NatalChart` as JSON into a byte buffer, in the exact form of `JSONCoding.encoder`.
///
/// `JSONEncoder` builds a tree of boxed values, sorts every object's keys and prints it; for a
/// chart that is most of the cost of a chart. Here the keys are written in their sorted order
/// (byte order, as `.sortedKeys` sorts them) straight from the model. What must match
/// `JSONEncoder`: strings escape `"`, `\` and the control characters (`\b \t \n \f \r`, others as
/// `\u00xx`) and nothing else; numbers are Swift's shortest round-trip `description` without a
/// trailing `.0`; dates are `ISO8601.string(from:)`; UUIDs lowercase.
///
/// No write can pass the end of the buffer: every write takes its bytes through `claim(_:)`,
/// which checks the room left before handing them out. When something does not fit, the writer
/// stops writing (`overflowed`) and walks the rest of the chart without storing, so a non-finite
/// number still throws as it would have.
struct NatalChartJSONWriter: TextOutputStream {
    /// The buffer written into, from its start.
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    /// How many bytes of `buffer` may still be claimed: its size, or `count` once a write did not fit.
    private var limit: Int
    /// The bytes written so far.
    private(set) var count = 0
    /// Whether a write did not fit: nothing has been written since, and the bytes written are not the JSON.
    private(set) var overflowed = false

    init(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        self.buffer = buffer
        limit = buffer.count
    }

    /// `chart`'s JSON written into a buffer of `capacity` bytes, and how many buffers that took.
    ///
    /// Should the JSON not fit (`capacity(for:)` is meant to be a bound, but it is a sum kept by
    /// hand next to the writer), it is written again from the start into a buffer twice the size,
    /// until it fits. Growing was chosen over the alternatives because it keeps what callers get
    /// the same in every case: a trap (the old `precondition`) would take a worker down with a job
    /// that can never succeed, and falling back to `JSONEncoder` would hand out bytes from another
    /// writer, equal only as far as the tests compare them. Doubling bounds the extra work to about
    /// as much again as the final write.
    /// - Throws: `EncodingError.invalidValue` when a number is NaN or infinite.
    static func encode(_ chart: NatalChart, capacity: Int) throws -> (bytes: [UInt8], buffers: Int) {
        var capacity = max(capacity, 0)
        var buffers = 0
        while true {
            buffers += 1
            var overflowed = false
            var failure: (any Error)?
            let bytes = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
                var writer = NatalChartJSONWriter(buffer)
                do {
                    try writer.write(chart)
                    overflowed = writer.overflowed
                    count = overflowed ? 0 : writer.count
                } catch {
                    failure = error
                    count = 0
                }
            }
            if let failure { throw failure }
            if !overflowed { return (bytes, buffers) }
            capacity = max(capacity, 512) * 2
        }
    }

    /// More bytes than the JSON of `chart` can take, so that one buffer is enough: generous fixed
    /// parts per object, 32 per number (the longest is `-2.2250738585072014e-308`, 24), and six
    /// per UTF-8 byte of text (the longest escape, `\u001f`, stands for one byte). Should it ever
    /// fall short, `encode` grows the buffer rather than write past it.
    static func capacity(for chart: NatalChart) -> Int {
        var text =
            chart.birthDate.utf8.count + chart.birthTime.utf8.count + chart.timezone.utf8.count
            + chart.locationName.utf8.count + chart.engineVersion.utf8.count + chart.ephemerisVersion.utf8.count
            + chart.zodiac.rawValue.utf8.count
        for warning in chart.warnings { text += warning.code.utf8.count + warning.message.utf8.count }
        let placements = chart.planets.count + (chart.points?.count ?? 0)
        return 1024 + 6 * text + 64 * chart.warnings.count + 512 * placements + 256 * chart.houses.count
            + 256 * chart.aspects.count
    }

    mutating func write(_ chart: NatalChart) throws {
        raw("{\"ascendant\":")
        try number(chart.ascendant, "ascendant")
        raw(",\"aspects\":[")
        for (index, aspect) in chart.aspects.enumerated() {
            if index > 0 { byte(UInt8(ascii: ",")) }
            raw("{\"id\":")
            id(aspect.id)
            raw(",\"isApplying\":")
            bool(aspect.isApplying)
            raw(",\"orb\":")
            try number(aspect.orb, "orb")
            raw(",\"planet1\":")
            plain(aspect.planet1.rawValue)
            raw(",\"planet2\":")
            plain(aspect.planet2.rawValue)
            raw(",\"type\":")
            plain(aspect.type.rawValue)
            byte(UInt8(ascii: "}"))
        }
        raw("],\"birthDate\":")
        string(chart.birthDate)
        raw(",\"birthTime\":")
        string(chart.birthTime)
        raw(",\"calculatedAt\":")
        date(chart.calculatedAt)
        if let policy = chart.dstPolicyApplied {
            raw(",\"dstPolicyApplied\":")
            plain(policy.rawValue)
        }
        raw(",\"engineVersion\":")
        string(chart.engineVersion)
        raw(",\"ephemerisVersion\":")
        string(chart.ephemerisVersion)
        raw(",\"houseSystem\":")
        plain(chart.houseSystem.rawValue)
        if let requested = chart.houseSystemRequested {
            raw(",\"houseSystemRequested\":")
            plain(requested.rawValue)
        }
        raw(",\"houses\":[")
        for (index, house) in chart.houses.enumerated() {
            if index > 0 { byte(UInt8(ascii: ",")) }
            raw("{\"cusp\":")
            try number(house.cusp, "cusp")
            raw(",\"id\":")
            id(house.id)
            raw(",\"number\":")
            integer(house.number)
            raw(",\"sign\":")
            plain(house.sign.rawValue)
            byte(UInt8(ascii: "}"))
        }
        raw("],\"julianDayUT\":")
        try number(chart.julianDayUT, "julianDayUT")
        raw(",\"latitude\":")
        try number(chart.latitude, "latitude")
        raw(",\"locationName\":")
        string(chart.locationName)
        raw(",\"longitude\":")
        try number(chart.longitude, "longitude")
        raw(",\"midheaven\":")
        try number(chart.midheaven, "midheaven")
        raw(",\"planets\":[")
        for (index, planet) in chart.planets.enumerated() {
            if index > 0 { byte(UInt8(ascii: ",")) }
            try placement(planet, name: planet.name.rawValue)
        }
        byte(UInt8(ascii: "]"))
        if let points = chart.points {
            raw(",\"points\":[")
            for (index, point) in points.enumerated() {
                if index > 0 { byte(UInt8(ascii: ",")) }
                try placement(point, name: point.name.rawValue)
            }
            byte(UInt8(ascii: "]"))
        }
        raw(",\"timezone\":")
        string(chart.timezone)
        raw(",\"utc\":")
        date(chart.utc)
        raw(",\"warnings\":[")
        for (index, warning) in chart.warnings.enumerated() {
            if index > 0 { byte(UInt8(ascii: ",")) }
            raw("{\"code\":")
            string(warning.code)
            raw(",\"message\":")
            string(warning.message)
            byte(UInt8(ascii: "}"))
        }
        raw("],\"zodiac\":")
        plain(chart.zodiac.rawValue)
        byte(UInt8(ascii: "}"))
    }

    private mutating func placement<Name>(_ placement: NatalChart.Placement<Name>, name: String) throws {
        raw("{\"house\":")
        integer(placement.house)
        raw(",\"id\":")
        id(placement.id)
        raw(",\"isRetrograde\":")
        bool(placement.isRetrograde)
        raw(",\"latitude\":")
        try number(placement.latitude, "latitude")
        raw(",\"longitude\":")
        try number(placement.longitude, "longitude")
        raw(",\"name\":")
        plain(name)
        raw(",\"sign\":")
        plain(placement.sign.rawValue)
        raw(",\"speed\":")
        try number(placement.speed, "speed")
        byte(UInt8(ascii: "}"))
    }

    // MARK: Room

    /// The next `size` bytes of the buffer, counted as written (the caller fills every one of
    /// them, and only them); or nil, with nothing written from here on, when they do not fit.
    @inline(__always)
    private mutating func claim(_ size: Int) -> UnsafeMutableBufferPointer<UInt8>? {
        // `count <= limit <= buffer.count` always holds, so the subtraction cannot overflow.
        guard size <= limit &- count else {
            stop()
            return nil
        }
        let start = count
        count &+= size
        // Rebasing a slice: in debug builds every index the caller writes is checked against `size`.
        return UnsafeMutableBufferPointer(rebasing: buffer[start..<count])
    }

    @inline(never)
    private mutating func stop() {
        overflowed = true
        limit = count
    }

    // MARK: Values

    @inline(__always)
    private mutating func byte(_ value: UInt8) {
        guard let target = claim(1) else { return }
        target[0] = value
    }

    @inline(__always)
    private mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { append($0) }
    }

    @inline(__always)
    private mutating func append(_ source: UnsafeBufferPointer<UInt8>) {
        guard let from = source.baseAddress, let target = claim(source.count)?.baseAddress else { return }
        target.update(from: from, count: source.count)
    }

    private mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    /// An integer in decimal (house numbers), `Int.min` included.
    private mutating func integer(_ value: Int) {
        var rest = value.magnitude
        var size = value < 0 ? 2 : 1
        while rest >= 10 {
            rest /= 10
            size &+= 1
        }
        guard let target = claim(size) else { return }
        if value < 0 { target[0] = UInt8(ascii: "-") }
        rest = value.magnitude
        var index = size
        repeat {
            index &-= 1
            target[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        } while rest > 0
    }

    /// A double as `JSONEncoder` prints it: `description` (shortest round-trip digits, `1e-05`,
    /// `1.5e+20`, `-0.0`) with a trailing `.0` removed (`2448172`, `-0`).
    private mutating func number(_ value: Double, _ key: String) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(
                value,
                EncodingError.Context(
                    codingPath: [],
                    debugDescription: "Unable to encode Double.\(value) directly in JSON (key \(key))."
                )
            )
        }
        let start = count
        // Double's TextOutputStreamable conformance prints `description`'s characters into
        // `_writeASCII` below in one call, without building a String.
        value.write(to: &self)
        // Only this number's own bytes are looked at: none when it did not fit.
        if count &- start >= 2, buffer[count - 1] == UInt8(ascii: "0"), buffer[count - 2] == UInt8(ascii: ".") {
            count &-= 2
        }
    }

    /// A JSON string of an enum's raw value: identifiers of plain ASCII letters, digits and
    /// hyphens (checked for every case by `ChartJSONWriterTests`), so no escape is looked for.
    private mutating func plain(_ text: String) {
        byte(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { append($0) }
        byte(UInt8(ascii: "\""))
    }

    /// A JSON string with `JSONEncoder`'s escapes; everything else, slashes and non-ASCII
    /// characters included, is copied as UTF-8.
    private mutating func string(_ text: String) {
        byte(UInt8(ascii: "\""))
        // `withUTF8` reads a native string in place (bridged text is made contiguous first).
        var text = text
        text.withUTF8 { appendEscaped($0) }
        byte(UInt8(ascii: "\""))
    }

    private mutating func appendEscaped(_ utf8: UnsafeBufferPointer<UInt8>) {
        var runStart = 0
        for index in 0..<utf8.count {
            let value = utf8[index]
            guard value < 0x20 || value == UInt8(ascii: "\"") || value == UInt8(ascii: "\\") else { continue }
            if runStart < index { append(UnsafeBufferPointer(rebasing: utf8[runStart..<index])) }
            runStart = index + 1
            let short: UInt8? =
                switch value {
                case UInt8(ascii: "\""): UInt8(ascii: "\"")
                case UInt8(ascii: "\\"): UInt8(ascii: "\\")
                case 0x08: UInt8(ascii: "b")
                case 0x09: UInt8(ascii: "t")
                case 0x0A: UInt8(ascii: "n")
                case 0x0C: UInt8(ascii: "f")
                case 0x0D: UInt8(ascii: "r")
                default: nil
                }
            if let short {
                guard let target = claim(2) else { return }
                target[0] = UInt8(ascii: "\\")
                target[1] = short
            } else {
                guard let target = claim(6) else { return }
                target[0] = UInt8(ascii: "\\")
                target[1] = UInt8(ascii: "u")
                target[2] = UInt8(ascii: "0")
                target[3] = UInt8(ascii: "0")
                target[4] = Self.hexDigit(value >> 4)
                target[5] = Self.hexDigit(value & 0x0F)
            }
        }
        if runStart < utf8.count { append(UnsafeBufferPointer(rebasing: utf8[runStart...])) }
    }

    @inline(__always)
    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") &+ value : UInt8(ascii: "a") &+ (value &- 10)
    }

    /// A chart element id as its lowercase UUID string (`TypedID`'s encoding).
    private mutating func id(_ id: ChartElementID) {
        let uuid = id.uuid.uuid
        let high =
            UInt64(uuid.0) << 56 | UInt64(uuid.1) << 48 | UInt64(uuid.2) << 40 | UInt64(uuid.3) << 32
            | UInt64(uuid.4) << 24 | UInt64(uuid.5) << 16 | UInt64(uuid.6) << 8 | UInt64(uuid.7)
        let low =
            UInt64(uuid.8) << 56 | UInt64(uuid.9) << 48 | UInt64(uuid.10) << 40 | UInt64(uuid.11) << 32
            | UInt64(uuid.12) << 24 | UInt64(uuid.13) << 16 | UInt64(uuid.14) << 8 | UInt64(uuid.15)
        // `"8-4-4-4-12"`: 38 bytes claimed at once, the hex digits stored eight at a time, the
        // middle dashes made by moving the second four digits of a group one place on.
        guard let target = claim(38) else { return }
        let words = UnsafeMutableRawBufferPointer(target)
        target[0] = UInt8(ascii: "\"")
        words.storeBytes(of: Self.hexDigits(UInt32(truncatingIfNeeded: high >> 32)), toByteOffset: 1, as: UInt64.self)
        target[9] = UInt8(ascii: "-")
        words.storeBytes(of: Self.hexDigits(UInt32(truncatingIfNeeded: high)), toByteOffset: 10, as: UInt64.self)
        target[18] = target[17]
        target[17] = target[16]
        target[16] = target[15]
        target[15] = target[14]
        target[14] = UInt8(ascii: "-")
        target[19] = UInt8(ascii: "-")
        words.storeBytes(of: Self.hexDigits(UInt32(truncatingIfNeeded: low >> 32)), toByteOffset: 20, as: UInt64.self)
        target[28] = target[27]
        target[27] = target[26]
        target[26] = target[25]
        target[25] = target[24]
        target[24] = UInt8(ascii: "-")
        words.storeBytes(of: Self.hexDigits(UInt32(truncatingIfNeeded: low)), toByteOffset: 29, as: UInt64.self)
        target[37] = UInt8(ascii: "\"")
    }

    /// Eight lowercase hex digits of `value`, most significant first, as the bytes of one word
    /// in memory order: computed for all eight at once (SWAR) rather than digit by digit.
    @inline(__always)
    private static func hexDigits(_ value: UInt32) -> UInt64 {
        // Spread the nibbles so that each sits in its own byte, most significant in the top byte.
        var word = UInt64(value)
        word = (word | word << 16) & 0x0000_FFFF_0000_FFFF
        word = (word | word << 8) & 0x00FF_00FF_00FF_00FF
        word = (word | word << 4) & 0x0F0F_0F0F_0F0F_0F0F
        // Bytes holding 10…15 get 1 here: adding 6 carries into their high nibble.
        let letters = ((word &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        // "0" is 0x30; "a" is 0x30 + 10 + 0x27.
        word = word &+ 0x3030_3030_3030_3030 &+ letters &* 0x27
        return word.bigEndian
    }

    /// A date as `ISO8601.string(from:)` formats it.
    ///
    /// That goes through `Date.ISO8601FormatStyle`, which costs more than the rest of a chart's
    /// JSON; so the same text is built here for years 1583…9999: the instant rounded to the
    /// nearest millisecond, with the milliseconds when there are any. Other instants take
    /// `ISO8601.string` itself: before 1583 because Foundation's calendar there is the Julian
    /// one (the Gregorian reform of October 1582), which `BirthDate` does not follow.
    private mutating func date(_ date: Date) {
        // The same rounding as `ISO8601.string(from:)`, on the same value; the range is checked
        // on the rounded instant, which can be in the next year (9999-12-31T23:59:59.9996).
        let rounded = (date.timeIntervalSince1970 * 1000).rounded()
        // 1583-01-01 and 10000-01-01 since 1970, in milliseconds (NaN is in neither).
        guard rounded >= -12_212_553_600_000, rounded < 253_402_300_800_000 else {
            string(ISO8601.string(from: date))
            return
        }
        let wholeMilliseconds = Int(rounded)
        let seconds = wholeMilliseconds >= 0 ? wholeMilliseconds / 1000 : (wholeMilliseconds - 999) / 1000
        let milliseconds = wholeMilliseconds - seconds * 1000
        let withMilliseconds = milliseconds != 0
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let day = BirthDate(daysSince1970: days)

        // `"yyyy-MM-ddTHH:mm:ss`, then `.SSS` when there are milliseconds, then `Z"`.
        guard let target = claim(withMilliseconds ? 26 : 22) else { return }
        target[0] = UInt8(ascii: "\"")
        Self.digits(day.year, 4, into: target, at: 1)
        target[5] = UInt8(ascii: "-")
        Self.digits(day.month, 2, into: target, at: 6)
        target[8] = UInt8(ascii: "-")
        Self.digits(day.day, 2, into: target, at: 9)
        target[11] = UInt8(ascii: "T")
        Self.digits(secondOfDay / 3600, 2, into: target, at: 12)
        target[14] = UInt8(ascii: ":")
        Self.digits(secondOfDay % 3600 / 60, 2, into: target, at: 15)
        target[17] = UInt8(ascii: ":")
        Self.digits(secondOfDay % 60, 2, into: target, at: 18)
        var end = 20
        if withMilliseconds {
            target[20] = UInt8(ascii: ".")
            Self.digits(milliseconds, 3, into: target, at: 21)
            end = 24
        }
        target[end] = UInt8(ascii: "Z")
        target[end + 1] = UInt8(ascii: "\"")
    }

    /// The last `width` decimal digits of a non-negative number (zero-padded) at `offset`.
    @inline(__always)
    private static func digits(
        _ value: Int,
        _ width: Int,
        into target: UnsafeMutableBufferPointer<UInt8>,
        at offset: Int
    ) {
        var rest = value
        var index = offset &+ width
        while index > offset {
            index &-= 1
            target[index] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        }
    }

    // MARK: TextOutputStream (for `Double.write(to:)`)

    mutating func write(_ string: String) {
        var string = string
        string.withUTF8 { append($0) }
    }

    mutating func _writeASCII(_ buffer: UnsafeBufferPointer<UInt8>) { append(buffer) }
}
