import Foundation
import UUIDText

/// A Swift type that can be decoded from a value in PostgreSQL's text format, and for a few
/// types (`Data`, `String`, the integers, `Bool`, `UUID`) from its binary format, which a query
/// asks for with `resultFormat: .binary`.
public protocol PostgresDecodable: Sendable {
    /// Decodes the server's text for a value of type `typeOID`.
    /// - Throws: `PostgresError` of kind `.decoding` when the text does not parse.
    static func decode(postgresText: String, typeOID: UInt32) throws(PostgresError) -> Self

    /// Decodes the server's binary format of a value of type `typeOID`. The default refuses:
    /// read such a column with a text-format query.
    /// - Throws: `PostgresError` of kind `.decoding` for a type or length it does not read.
    static func decode(postgresBinary: Data, typeOID: UInt32) throws(PostgresError) -> Self
}

extension PostgresDecodable {
    public static func decode(postgresBinary: Data, typeOID: UInt32) throws(PostgresError) -> Self {
        throw binaryDecodingError(postgresBinary, typeOID, "no binary format decoding; use a text-format query")
    }

    static func binaryDecodingError(_ bytes: Data, _ typeOID: UInt32, _ reason: String) -> PostgresError {
        PostgresError(
            kind: .decoding,
            message: "cannot decode binary \(PostgresTypeOID.name(typeOID)) as \(Self.self): \(reason)",
            detail: "\(bytes.count) bytes"
        )
    }

    /// A big-endian integer of the binary `int2`, `int4` or `int8` format.
    static func binaryInteger(_ bytes: Data, _ typeOID: UInt32) throws(PostgresError) -> Int64 {
        let width: Int
        switch typeOID {
        case PostgresTypeOID.int2: width = 2
        case PostgresTypeOID.int4: width = 4
        case PostgresTypeOID.int8: width = 8
        default: throw binaryDecodingError(bytes, typeOID, "not an integer type")
        }
        guard bytes.count == width else { throw binaryDecodingError(bytes, typeOID, "expected \(width) bytes") }
        var value: Int64 = bytes.first.map { $0 >= 0x80 ? -1 : 0 } ?? 0
        for byte in bytes { value = value << 8 | Int64(byte) }
        return value
    }
    static func decodingError(_ text: String, _ typeOID: UInt32, _ reason: String = "unparsable value") -> PostgresError
    {
        PostgresError(
            kind: .decoding,
            message: "cannot decode \(PostgresTypeOID.name(typeOID)) as \(Self.self): \(reason)",
            detail: "value: \(text)"
        )
    }
}

extension PostgresTypeOID {
    static func name(_ oid: UInt32) -> String {
        switch oid {
        case bool: "bool"
        case bytea: "bytea"
        case int8: "int8"
        case int2: "int2"
        case int4: "int4"
        case text: "text"
        case json: "json"
        case float4: "float4"
        case float8: "float8"
        case bpchar: "bpchar"
        case varchar: "varchar"
        case date: "date"
        case timestamp: "timestamp"
        case timestamptz: "timestamptz"
        case numeric: "numeric"
        case uuid: "uuid"
        case jsonb: "jsonb"
        default: "type \(oid)"
        }
    }
}

extension String: PostgresDecodable {
    /// Any column's text as the server sent it.
    public static func decode(postgresText: String, typeOID: UInt32) throws(PostgresError) -> String { postgresText }

    /// `text`, `varchar`, `bpchar` and `json`, whose binary format is their UTF-8 text, and
    /// `jsonb` (a version byte, 1, then the text).
    public static func decode(postgresBinary: Data, typeOID: UInt32) throws(PostgresError) -> String {
        switch typeOID {
        case PostgresTypeOID.text, PostgresTypeOID.varchar, PostgresTypeOID.bpchar, PostgresTypeOID.json:
            return String(decoding: postgresBinary, as: UTF8.self)
        case PostgresTypeOID.jsonb where postgresBinary.first == 1:
            return String(decoding: postgresBinary.dropFirst(), as: UTF8.self)
        default:
            throw binaryDecodingError(postgresBinary, typeOID, "not a text type; use a text-format query")
        }
    }
}

extension Int: PostgresDecodable {
    public static func decode(postgresText: String, typeOID: UInt32) throws(PostgresError) -> Int {
        guard let value = Int(postgresText) else { throw decodingError(postgresText, typeOID) }
        return value
    }

    public static func decode(postgresBinary: Data, typeOID: UInt32) throws(PostgresError) -> Int {
        Int(try binaryInteger(postgresBinary, typeOID))
    }
}

extension Int64: PostgresDecodable {
    public static func decode(postgresText: String, typeOID: UInt32) throws(PostgresError) -> Int64 {
        guard let value = Int64(postgresText) else { throw decodingError(postgresText, typeOID) }
        return value
    }

    public static func decode(postgresBinary: Data, typeOID: UInt32) throws(PostgresError) -> Int64 {
        try binaryInteger(postgresBinary, typeOID)
    }
}

extension Int32: PostgresDecodable {
    public static func decode(postgresText: String, typeOID: UInt32) throws(PostgresError) -> Int32 {
        guard let value = Int32(postgresText) else {
            throw decodingError(postgresText, typeOID, "unparsable or out of range")
        }
        return value
    }

    public static func decode(postgresBinary: Data, typeOID: UInt32) throws(PostgresError) -> Int32 {
        guard let value = Int32(exactly: try binaryInteger(postgresBinary, typeOID)) else {
            throw binaryDecodingError(postgresBinary, typeOID, "out of range")
        }
        return value
    }
}

extension Bool: PostgresDecodable {
    public static func decode(postgresText: String, typeOID: UInt32) throws(PostgresError) -> Bool {
        switch postgresText {
        case "t", "true": return true
        case "f", "false": return false
        default: throw decodingError(postgresText, typeOID)
        }
    }

    public static func decode(postgresBinary: Data, typeOID: UInt32) throws(PostgresError) -> Bool {
        guard typeOID == PostgresTypeOID.bool, postgresBinary.count == 1, let byte = postgresBinary.first else {
            throw binaryDecodingError(postgresBinary, typeOID, "expected one byte of bool")
        }
        return byte != 0
    }
}

extension Double: PostgresDecodable {
    public static func decode(postgresText: String, typeOID: UInt32) throws(PostgresError) -> Double {
        switch postgresText {
        case "NaN": return .nan
        case "Infinity": return .infinity
        case "-Infinity": return -.infinity
        default:
            guard let value = Double(postgresText) else { throw decodingError(postgresText, typeOID) }
            return value
        }
    }
}

extension Decimal: PostgresDecodable {
    /// Decodes `numeric` (and integer) text exactly; `NaN` becomes `Decimal.nan`.
    public static func decode(postgresText: String, typeOID: UInt32) throws(PostgresError) -> Decimal {
        if postgresText == "NaN" { return .nan }
        guard isPlainNumber(postgresText),
            let value = Decimal(string: postgresText, locale: Locale(identifier: "en_US_POSIX"))
        else { throw decodingError(postgresText, typeOID) }
        return value
    }

    /// `[-+]digits[.digits][e[-+]digits]` with at least one digit in the mantissa.
    private static func isPlainNumber(_ text: String) -> Bool {
        var bytes = Substring(text).utf8[...]
        if let first = bytes.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") {
            bytes = bytes.dropFirst()
        }
        let isDigit: (UInt8) -> Bool = { (48...57).contains($0) }
        let integer = bytes.prefix(while: isDigit)
        bytes = bytes.dropFirst(integer.count)
        var fractionCount = 0
        if bytes.first == UInt8(ascii: ".") {
            bytes = bytes.dropFirst()
            fractionCount = bytes.prefix(while: isDigit).count
            bytes = bytes.dropFirst(fractionCount)
        }
        guard integer.count + fractionCount > 0 else { return false }
        if let e = bytes.first, e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            if let sign = bytes.first, sign == UInt8(ascii: "-") || sign == UInt8(ascii: "+") {
                bytes = bytes.dropFirst()
            }
            let exponent = bytes.prefix(while: isDigit).count
            guard exponent > 0 else { return false }
            bytes = bytes.dropFirst(exponent)
        }
        return bytes.isEmpty
    }
}

extension UUID: PostgresDecodable {
    public static func decode(postgresText: String, typeOID: UInt32) throws(PostgresError) -> UUID {
        guard let value = UUID(text: postgresText) else { throw decodingError(postgresText, typeOID) }
        return value
    }

    public static func decode(postgresBinary: Data, typeOID: UInt32) throws(PostgresError) -> UUID {
        guard typeOID == PostgresTypeOID.uuid, postgresBinary.count == 16 else {
            throw binaryDecodingError(postgresBinary, typeOID, "expected 16 bytes of uuid")
        }
        let b = Array(postgresBinary)
        return UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }
}

extension Date: PostgresDecodable {
    /// Decodes ISO `timestamptz`, `timestamp` (taken as UTC) and `date` (midnight UTC) text.
    public static func decode(postgresText: String, typeOID: UInt32) throws(PostgresError) -> Date {
        if postgresText == "infinity" || postgresText == "-infinity" {
            throw decodingError(postgresText, typeOID, "infinite timestamps have no Date")
        }
        guard let value = PostgresTimestamp.parse(postgresText) else {
            throw decodingError(postgresText, typeOID, "not an ISO timestamp (is DateStyle ISO?)")
        }
        return value
    }
}

extension Data: PostgresDecodable {
    /// `bytea` in binary format: the bytes as they are (no hex text twice their size).
    public static func decode(postgresBinary: Data, typeOID: UInt32) throws(PostgresError) -> Data {
        guard typeOID == PostgresTypeOID.bytea else {
            throw binaryDecodingError(postgresBinary, typeOID, "not bytea")
        }
        return postgresBinary
    }

    /// Decodes `bytea` in hex output format (`\x0a1b…`); a query reading large values asks for
    /// `resultFormat: .binary` instead.
    public static func decode(postgresText: String, typeOID: UInt32) throws(PostgresError) -> Data {
        let bytes = Array(postgresText.utf8)
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "\\"), bytes[1] == UInt8(ascii: "x"), bytes.count % 2 == 0
        else { throw decodingError(postgresText, typeOID, "not bytea hex format") }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 48...57: byte - 48
            case 97...102: byte - 87
            case 65...70: byte - 55
            default: nil
            }
        }
        // Into an array first: appending to Data byte by byte costs a call per byte.
        var decoded = [UInt8](repeating: 0, count: (bytes.count - 2) / 2)
        var index = 2
        while index < bytes.count {
            guard let high = nibble(bytes[index]), let low = nibble(bytes[index + 1]) else {
                throw decodingError(postgresText, typeOID, "not bytea hex format")
            }
            decoded[(index - 2) / 2] = high << 4 | low
            index += 2
        }
        return Data(decoded)
    }
}
