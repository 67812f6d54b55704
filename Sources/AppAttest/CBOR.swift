import Foundation

/// A CBOR data item of the kinds App Attest objects use (RFC 8949): unsigned and negative
/// integers, byte and text strings, arrays and maps. Tags, floats, simple values and
/// indefinite lengths are refused by ``CBORDecoder``.
public indirect enum CBORValue: Sendable, Hashable {
    /// Major type 0.
    case unsigned(UInt64)
    /// Major type 1: the value is `-1 - n`.
    case negative(UInt64)
    /// Major type 2.
    case bytes(Data)
    /// Major type 3, valid UTF-8.
    case text(String)
    /// Major type 4.
    case array([CBORValue])
    /// Major type 5, in encoded order; keys are unique.
    case map([CBORMapEntry])

    /// The value under a text key of a map; nil for another kind or a missing key.
    public subscript(key: String) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key == .text(key) }?.value
    }

    /// The bytes of a byte string; nil for another kind.
    public var bytes: Data? {
        if case .bytes(let data) = self { return data }
        return nil
    }

    /// The string of a text string; nil for another kind.
    public var text: String? {
        if case .text(let string) = self { return string }
        return nil
    }

    /// The elements of an array; nil for another kind.
    public var array: [CBORValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }
}

/// One key and value of a CBOR map.
public struct CBORMapEntry: Sendable, Hashable {
    public var key: CBORValue
    public var value: CBORValue

    public init(_ key: CBORValue, _ value: CBORValue) {
        self.key = key
        self.value = value
    }
}

/// Why CBOR input was refused.
public struct CBORError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable codes.
    public enum Code: String, Sendable {
        /// The input ends inside an item.
        case truncated = "cbor-truncated"
        /// Arrays and maps nest deeper than the limit.
        case tooDeep = "cbor-too-deep"
        /// The input, a string, or an array's or map's count is over its limit.
        case tooLarge = "cbor-too-large"
        /// A tag, float, simple value, indefinite length or reserved encoding.
        case unsupported = "cbor-unsupported"
        /// Bytes follow the single top-level item.
        case trailingBytes = "cbor-trailing-bytes"
        /// A text string is not UTF-8.
        case invalidUTF8 = "cbor-invalid-utf8"
        /// A map has the same key twice.
        case duplicateKey = "cbor-duplicate-key"
    }

    public var code: Code
    /// Where in the input (a byte offset) the problem was found.
    public var offset: Int

    public var description: String { "\(code.rawValue) at byte \(offset)" }
}

/// A strict, bounded CBOR decoder: one definite-length item, nothing after it, every length
/// checked against the bytes left before anything is allocated, nesting and counts limited. Any
/// input ends in a value or a ``CBORError``, never a crash or an unbounded allocation.
public struct CBORDecoder: Sendable {
    /// Largest input accepted.
    public var maxInputBytes: Int
    /// Deepest nesting of arrays and maps (the top level is depth 1).
    public var maxDepth: Int
    /// Most elements of one array or entries of one map.
    public var maxCount: Int

    /// Limits that fit App Attest objects (an attestation is about 5 KB: two certificates, a
    /// receipt and the authenticator data, two maps deep).
    public init(maxInputBytes: Int = 65_536, maxDepth: Int = 8, maxCount: Int = 64) {
        self.maxInputBytes = maxInputBytes
        self.maxDepth = maxDepth
        self.maxCount = maxCount
    }

    /// Decodes exactly one item.
    /// - Throws: ``CBORError``.
    public func decode(_ data: Data) throws(CBORError) -> CBORValue {
        guard data.count <= maxInputBytes else { throw CBORError(code: .tooLarge, offset: 0) }
        let bytes = [UInt8](data)
        var reader = Reader(bytes: bytes, limits: self)
        let value = try reader.item(depth: 1)
        guard reader.position == bytes.count else { throw CBORError(code: .trailingBytes, offset: reader.position) }
        return value
    }

    private struct Reader {
        let bytes: [UInt8]
        let limits: CBORDecoder
        var position = 0

        var remaining: Int { bytes.count - position }

        mutating func byte() throws(CBORError) -> UInt8 {
            guard position < bytes.count else { throw CBORError(code: .truncated, offset: position) }
            defer { position += 1 }
            return bytes[position]
        }

        /// The argument of an item head with additional information `info`.
        mutating func argument(_ info: UInt8, at start: Int) throws(CBORError) -> UInt64 {
            switch info {
            case 0...23: return UInt64(info)
            case 24...27:
                let width = 1 << Int(info - 24)
                guard remaining >= width else { throw CBORError(code: .truncated, offset: position) }
                var value: UInt64 = 0
                for _ in 0..<width { value = value << 8 | UInt64(try byte()) }
                return value
            default:
                // 28–30 are reserved, 31 is an indefinite length: neither is accepted.
                throw CBORError(code: .unsupported, offset: start)
            }
        }

        /// A length or count, checked against what the input could still hold (each element
        /// takes at least one byte), so nothing is allocated for a length the input cannot back.
        mutating func length(_ info: UInt8, at start: Int, perUnit: Int) throws(CBORError) -> Int {
            let value = try argument(info, at: start)
            guard value <= UInt64(remaining / perUnit) else {
                throw CBORError(code: value > UInt64(limits.maxInputBytes) ? .tooLarge : .truncated, offset: start)
            }
            return Int(value)
        }

        mutating func item(depth: Int) throws(CBORError) -> CBORValue {
            let start = position
            let head = try byte()
            let major = head >> 5
            let info = head & 0x1F
            switch major {
            case 0:
                return .unsigned(try argument(info, at: start))
            case 1:
                return .negative(try argument(info, at: start))
            case 2:
                let count = try length(info, at: start, perUnit: 1)
                defer { position += count }
                return .bytes(Data(bytes[position..<position + count]))
            case 3:
                let count = try length(info, at: start, perUnit: 1)
                guard let string = String(validating: bytes[position..<position + count], as: UTF8.self) else {
                    throw CBORError(code: .invalidUTF8, offset: start)
                }
                position += count
                return .text(string)
            case 4, 5:
                guard depth <= limits.maxDepth else { throw CBORError(code: .tooDeep, offset: start) }
                let count = try length(info, at: start, perUnit: major == 4 ? 1 : 2)
                guard count <= limits.maxCount else { throw CBORError(code: .tooLarge, offset: start) }
                if major == 4 {
                    var elements: [CBORValue] = []
                    elements.reserveCapacity(count)
                    for _ in 0..<count { elements.append(try item(depth: depth + 1)) }
                    return .array(elements)
                }
                var entries: [CBORMapEntry] = []
                entries.reserveCapacity(count)
                var keys = Set<CBORValue>()
                for _ in 0..<count {
                    let keyOffset = position
                    let key = try item(depth: depth + 1)
                    guard keys.insert(key).inserted else { throw CBORError(code: .duplicateKey, offset: keyOffset) }
                    entries.append(CBORMapEntry(key, try item(depth: depth + 1)))
                }
                return .map(entries)
            default:
                // Tags (6) and floats or simple values (7) appear in no App Attest object.
                throw CBORError(code: .unsupported, offset: start)
            }
        }
    }
}

/// Encodes CBOR items with the shortest heads (RFC 8949 preferred serialization): what
/// ``DevAppAttest`` builds its objects with.
public enum CBOREncoder {
    /// The encoding of `value`.
    public static func encode(_ value: CBORValue) -> Data {
        var out: [UInt8] = []
        append(value, to: &out)
        return Data(out)
    }

    private static func head(_ major: UInt8, _ argument: UInt64, to out: inout [UInt8]) {
        let type = major << 5
        switch argument {
        case 0...23: out.append(type | UInt8(argument))
        case 24...0xFF: out += [type | 24, UInt8(argument)]
        case 0x100...0xFFFF: out += [type | 25] + bigEndian(argument, width: 2)
        case 0x1_0000...0xFFFF_FFFF: out += [type | 26] + bigEndian(argument, width: 4)
        default: out += [type | 27] + bigEndian(argument, width: 8)
        }
    }

    private static func bigEndian(_ value: UInt64, width: Int) -> [UInt8] {
        (0..<width).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    private static func append(_ value: CBORValue, to out: inout [UInt8]) {
        switch value {
        case .unsigned(let number): head(0, number, to: &out)
        case .negative(let number): head(1, number, to: &out)
        case .bytes(let data):
            head(2, UInt64(data.count), to: &out)
            out += data
        case .text(let string):
            head(3, UInt64(string.utf8.count), to: &out)
            out += string.utf8
        case .array(let elements):
            head(4, UInt64(elements.count), to: &out)
            for element in elements { append(element, to: &out) }
        case .map(let entries):
            head(5, UInt64(entries.count), to: &out)
            for entry in entries {
                append(entry.key, to: &out)
                append(entry.value, to: &out)
            }
        }
    }
}
