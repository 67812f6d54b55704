import Foundation

extension JSONValue {
    /// The value as compact JSON: object keys sorted (by their UTF-8 bytes), no spaces, `/` not
    /// escaped, whole numbers without a fraction — what `JSONCoding.encoder` writes, at a
    /// fraction of its cost (events and job results are written for every job; Foundation's
    /// encoder was the workers' largest single CPU cost after the database calls).
    /// Non-finite numbers, which JSON cannot hold, are written as `null`.
    public func jsonData() -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        write(into: &bytes)
        return Data(bytes)
    }

    /// `jsonData()` as a string.
    public func jsonString() -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        write(into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the value's JSON to `bytes`.
    public func write(into bytes: inout [UInt8]) {
        switch self {
        case .null:
            bytes.append(contentsOf: "null".utf8)
        case .bool(let value):
            bytes.append(contentsOf: (value ? "true" : "false").utf8)
        case .number(let value):
            guard value.isFinite else {
                bytes.append(contentsOf: "null".utf8)
                return
            }
            // Whole numbers print without a fraction, as the Codable conformance encodes them.
            if value.rounded() == value, abs(value) < 9_007_199_254_740_992 {
                bytes.append(contentsOf: String(Int64(value)).utf8)
            } else {
                bytes.append(contentsOf: value.description.utf8)
            }
        case .string(let value):
            Self.writeString(value, into: &bytes)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                element.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            let keys = members.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            for (index, key) in keys.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                Self.writeString(key, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                members[key]!.write(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped, the rest as
    /// UTF-8.
    static func writeString(_ text: String, into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            // Runs of bytes that need no escape are copied whole (most strings are one run).
            var runStart = 0
            for (index, byte) in utf8.enumerated() where byte < 0x20 || byte == 0x22 || byte == 0x5C {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                appendEscaped(byte, into: &bytes)
                runStart = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func appendEscaped(_ byte: UInt8, into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        default:
            let hex: StaticString = "0123456789abcdef"
            bytes.append(contentsOf: [UInt8(ascii: "u"), 0x30, 0x30])
            bytes.append(hex.utf8Start[Int(byte >> 4)])
            bytes.append(hex.utf8Start[Int(byte & 0x0F)])
        }
    }
}
