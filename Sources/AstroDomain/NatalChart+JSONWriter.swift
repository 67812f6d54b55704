import Foundation

extension NatalChart {
    /// The chart's JSON as UTF-8 bytes: byte for byte what `JSONCoding.encoder.encode(self)` gives
    /// (sorted keys, unescaped slashes, ISO 8601 dates, numbers as Swift prints them), written by
    /// hand into one buffer, several times faster than `JSONEncoder`.
    /// - Returns: the JSON text of CONTRACT.md's NatalChart.
    /// - Throws: `EncodingError.invalidValue` when a number is NaN or infinite, as `JSONEncoder` does.
    public func jsonBytes() throws -> [UInt8] {
        var failure: (any Error)?
        // One allocation of a size no chart can exceed, written in place through a pointer.
        let capacity = NatalChartJSONWriter.capacity(for: self)
        let bytes = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            var writer = NatalChartJSONWriter(buffer.baseAddress!)
            do {
                try writer.write(self)
                // `capacity(for:)` is a bound by construction; should it ever be wrong, stop loudly.
                precondition(writer.count <= capacity, "NatalChart JSON exceeded its computed capacity")
                count = writer.count
            } catch {
                failure = error
                count = 0
            }
        }
        if let failure { throw failure }
        return bytes
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
struct NatalChartJSONWriter: TextOutputStream {
    /// Where the next byte goes; the caller sized the buffer with `capacity(for:)`.
    private let base: UnsafeMutablePointer<UInt8>
    /// The bytes written so far.
    private(set) var count = 0

    init(_ base: UnsafeMutablePointer<UInt8>) {
        self.base = base
    }

    /// More bytes than the JSON of `chart` can take: generous fixed parts per object, 32 per
    /// number (the longest is `-2.2250738585072014e-308`, 24), and six per UTF-8 byte of text
    /// (the longest escape, `\u001f`, stands for one byte).
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

    // MARK: Values

    @inline(__always)
    private mutating func byte(_ value: UInt8) {
        base[count] = value
        count &+= 1
    }

    @inline(__always)
    private mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { append($0) }
    }

    @inline(__always)
    private mutating func append(_ buffer: UnsafeBufferPointer<UInt8>) {
        guard let source = buffer.baseAddress else { return }
        (base + count).update(from: source, count: buffer.count)
        count &+= buffer.count
    }

    private mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    /// A non-negative or negative integer in decimal (house numbers).
    private mutating func integer(_ value: Int) {
        if value < 0 {
            byte(UInt8(ascii: "-"))
            // The magnitude as UInt also covers Int.min.
            unsigned(value.magnitude)
        } else {
            unsigned(UInt(value))
        }
    }

    private mutating func unsigned(_ value: UInt) {
        if value >= 10 { unsigned(value / 10) }
        byte(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value % 10))
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
        // Double's TextOutputStreamable conformance prints `description`'s characters into
        // `_writeASCII` below, without building a String.
        value.write(to: &self)
        if base[count - 1] == UInt8(ascii: "0"), base[count - 2] == UInt8(ascii: ".") { count -= 2 }
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
            byte(UInt8(ascii: "\\"))
            switch value {
            case UInt8(ascii: "\""): byte(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): byte(UInt8(ascii: "\\"))
            case 0x08: byte(UInt8(ascii: "b"))
            case 0x09: byte(UInt8(ascii: "t"))
            case 0x0A: byte(UInt8(ascii: "n"))
            case 0x0C: byte(UInt8(ascii: "f"))
            case 0x0D: byte(UInt8(ascii: "r"))
            default:
                raw("u00")
                byte(Self.hexDigit(value >> 4))
                byte(Self.hexDigit(value & 0x0F))
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
        // 8-4-4-4-12 hex digits: eight at a time, then the dashes written over by the next group.
        byte(UInt8(ascii: "\""))
        hexDigits(UInt32(truncatingIfNeeded: high >> 32))
        byte(UInt8(ascii: "-"))
        hexDigits(UInt32(truncatingIfNeeded: high))
        // "xxxxyyyy" → "xxxx-yyyy": move the second four digits one place on.
        base[count] = base[count - 1]
        base[count - 1] = base[count - 2]
        base[count - 2] = base[count - 3]
        base[count - 3] = base[count - 4]
        base[count - 4] = UInt8(ascii: "-")
        count &+= 1
        byte(UInt8(ascii: "-"))
        hexDigits(UInt32(truncatingIfNeeded: low >> 32))
        base[count] = base[count - 1]
        base[count - 1] = base[count - 2]
        base[count - 2] = base[count - 3]
        base[count - 3] = base[count - 4]
        base[count - 4] = UInt8(ascii: "-")
        count &+= 1
        hexDigits(UInt32(truncatingIfNeeded: low))
        byte(UInt8(ascii: "\""))
    }

    /// Eight lowercase hex digits of `value`, most significant first, computed for all eight at
    /// once in one 64-bit word (SWAR) rather than digit by digit.
    @inline(__always)
    private mutating func hexDigits(_ value: UInt32) {
        // Spread the nibbles so that each sits in its own byte, most significant in the top byte.
        var word = UInt64(value)
        word = (word | word << 16) & 0x0000_FFFF_0000_FFFF
        word = (word | word << 8) & 0x00FF_00FF_00FF_00FF
        word = (word | word << 4) & 0x0F0F_0F0F_0F0F_0F0F
        // Bytes holding 10…15 get 1 here: adding 6 carries into their high nibble.
        let letters = ((word &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        // "0" is 0x30; "a" is 0x30 + 10 + 0x27.
        word = word &+ 0x3030_3030_3030_3030 &+ letters &* 0x27
        UnsafeMutableRawPointer(base + count).storeBytes(of: word.bigEndian, as: UInt64.self)
        count &+= 8
    }

    /// A date as `ISO8601.string(from:)` formats it.
    ///
    /// That goes through `Date.ISO8601FormatStyle`, which costs more than the rest of a chart's
    /// JSON; so the same text is built here for years 1000…9999: the instant rounded to the
    /// nearest millisecond, with the milliseconds when there are any. Other instants take
    /// `ISO8601.string` itself.
    private mutating func date(_ date: Date) {
        let sinceReference = date.timeIntervalSinceReferenceDate
        // 1000-01-01 and 10000-01-01 relative to 2001-01-01, in seconds.
        guard sinceReference >= -31_556_995_200, sinceReference < 252_423_993_600 else {
            string(ISO8601.string(from: date))
            return
        }
        // The same rounding as `ISO8601.string(from:)`, on the same value.
        let wholeMilliseconds = Int((date.timeIntervalSince1970 * 1000).rounded())
        let seconds = wholeMilliseconds >= 0 ? wholeMilliseconds / 1000 : (wholeMilliseconds - 999) / 1000
        let milliseconds = wholeMilliseconds - seconds * 1000
        let withMilliseconds = milliseconds != 0
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let day = BirthDate(daysSince1970: days)

        byte(UInt8(ascii: "\""))
        digits(day.year, 4)
        byte(UInt8(ascii: "-"))
        digits(day.month, 2)
        byte(UInt8(ascii: "-"))
        digits(day.day, 2)
        byte(UInt8(ascii: "T"))
        digits(secondOfDay / 3600, 2)
        byte(UInt8(ascii: ":"))
        digits(secondOfDay % 3600 / 60, 2)
        byte(UInt8(ascii: ":"))
        digits(secondOfDay % 60, 2)
        if withMilliseconds {
            byte(UInt8(ascii: "."))
            digits(milliseconds, 3)
        }
        raw("Z\"")
    }

    /// A non-negative number as exactly `width` decimal digits (zero-padded).
    private mutating func digits(_ value: Int, _ width: Int) {
        var divisor = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            byte(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest / divisor % 10))
            rest %= divisor
            divisor /= 10
        }
    }

    // MARK: TextOutputStream (for `Double.write(to:)`)

    mutating func write(_ string: String) {
        var string = string
        string.withUTF8 { append($0) }
    }

    mutating func _writeASCII(_ buffer: UnsafeBufferPointer<UInt8>) { append(buffer) }
}
