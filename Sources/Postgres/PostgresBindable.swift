import Foundation
import UUIDText

/// A value sent as a query parameter: in PostgreSQL's text format, or in its binary format
/// (`Data` as `bytea`, whose binary format is the bytes themselves: no hex text twice its size).
public struct PostgresParameter: Sendable, Hashable {
    /// How a value travels.
    public enum Value: Sendable, Hashable {
        /// The type's text input format.
        case text(String)
        /// The type's binary format (the server reads it with the type's `receive` function).
        case binary(Data)
    }

    /// The value; nil is SQL NULL.
    public var value: Value?
    /// The parameter's type OID; 0 lets the server infer it from the statement (text values only:
    /// a binary value must name its type).
    public var typeOID: UInt32

    /// Makes a text-format parameter; nil is SQL NULL.
    public init(text: String?, typeOID: UInt32 = 0) {
        self.value = text.map(Value.text)
        self.typeOID = typeOID
    }

    /// Makes a binary-format parameter of type `typeOID` (e.g. `PostgresTypeOID.bytea`).
    public init(binary: Data, typeOID: UInt32) {
        self.value = .binary(binary)
        self.typeOID = typeOID
    }

    /// The value's text; nil for SQL NULL or a binary value.
    public var text: String? {
        if case .text(let text)? = value { return text }
        return nil
    }
}

/// A Swift value that can be bound to a `$n` parameter.
public protocol PostgresBindable: Sendable {
    /// The parameter to send.
    var postgresParameter: PostgresParameter { get }
    /// The type OID sent for this type's NULL (`Optional.none`); 0 by default.
    static var postgresTypeOID: UInt32 { get }
    /// The parameter to send, or an `.encoding` error when the value cannot be encoded.
    /// The connection calls this; the default returns `postgresParameter`.
    func makePostgresParameter() throws(PostgresError) -> PostgresParameter
}

extension PostgresBindable {
    public static var postgresTypeOID: UInt32 { 0 }
    public func makePostgresParameter() throws(PostgresError) -> PostgresParameter { postgresParameter }
}

/// Type OIDs of the built-in types this module encodes and decodes.
public enum PostgresTypeOID {
    public static let bool: UInt32 = 16
    public static let bytea: UInt32 = 17
    public static let int8: UInt32 = 20
    public static let int2: UInt32 = 21
    public static let int4: UInt32 = 23
    public static let text: UInt32 = 25
    public static let json: UInt32 = 114
    public static let float4: UInt32 = 700
    public static let float8: UInt32 = 701
    public static let bpchar: UInt32 = 1042
    public static let varchar: UInt32 = 1043
    public static let date: UInt32 = 1082
    public static let timestamp: UInt32 = 1114
    public static let timestamptz: UInt32 = 1184
    public static let numeric: UInt32 = 1700
    public static let uuid: UInt32 = 2950
    public static let jsonb: UInt32 = 3802
}

extension String: PostgresBindable {
    /// Sent untyped (OID 0), so it also fits `varchar`, enum, date and other text-input columns.
    public var postgresParameter: PostgresParameter { PostgresParameter(text: self) }
}

extension Int: PostgresBindable {
    public var postgresParameter: PostgresParameter {
        PostgresParameter(text: String(self), typeOID: Self.postgresTypeOID)
    }
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.int8 }
}

extension Int64: PostgresBindable {
    public var postgresParameter: PostgresParameter {
        PostgresParameter(text: String(self), typeOID: Self.postgresTypeOID)
    }
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.int8 }
}

extension Int32: PostgresBindable {
    public var postgresParameter: PostgresParameter {
        PostgresParameter(text: String(self), typeOID: Self.postgresTypeOID)
    }
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.int4 }
}

extension Bool: PostgresBindable {
    public var postgresParameter: PostgresParameter {
        PostgresParameter(text: self ? "true" : "false", typeOID: Self.postgresTypeOID)
    }
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.bool }
}

extension Double: PostgresBindable {
    public var postgresParameter: PostgresParameter {
        let text: String
        if isNaN {
            text = "NaN"
        } else if isInfinite {
            text = self < 0 ? "-Infinity" : "Infinity"
        } else {
            text = String(self)
        }
        return PostgresParameter(text: text, typeOID: Self.postgresTypeOID)
    }
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.float8 }
}

extension Decimal: PostgresBindable {
    public var postgresParameter: PostgresParameter {
        PostgresParameter(text: isNaN ? "NaN" : description, typeOID: Self.postgresTypeOID)
    }
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.numeric }
}

extension UUID: PostgresBindable {
    public var postgresParameter: PostgresParameter {
        PostgresParameter(text: lowercasedText, typeOID: Self.postgresTypeOID)
    }
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.uuid }
}

extension Date: PostgresBindable {
    /// A `timestamptz` in UTC with microseconds, e.g. `2026-11-22 10:00:00.123456+00`; a date
    /// outside PostgreSQL's range is `infinity` or `-infinity` here (and refused by
    /// `makePostgresParameter`, which queries use).
    public var postgresParameter: PostgresParameter {
        let text = PostgresTimestamp.format(self) ?? (timeIntervalSinceReferenceDate > 0 ? "infinity" : "-infinity")
        return PostgresParameter(text: text, typeOID: Self.postgresTypeOID)
    }
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.timestamptz }

    /// - Throws: `.encoding` for a date outside PostgreSQL's range (4713 BC to 294276 AD) or
    ///   not a number.
    public func makePostgresParameter() throws(PostgresError) -> PostgresParameter {
        guard let text = PostgresTimestamp.format(self) else {
            throw PostgresError(kind: .encoding, message: "a date outside PostgreSQL's range (4713 BC to 294276 AD)")
        }
        return PostgresParameter(text: text, typeOID: Self.postgresTypeOID)
    }
}

extension Data: PostgresBindable {
    /// A `bytea` in binary format: the bytes as they are.
    public var postgresParameter: PostgresParameter {
        PostgresParameter(binary: self, typeOID: Self.postgresTypeOID)
    }
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.bytea }
}

extension Optional: PostgresBindable where Wrapped: PostgresBindable {
    /// The wrapped value's parameter, or SQL NULL typed as `Wrapped.postgresTypeOID`.
    public var postgresParameter: PostgresParameter {
        switch self {
        case .some(let value): value.postgresParameter
        case .none: PostgresParameter(text: nil, typeOID: Wrapped.postgresTypeOID)
        }
    }
    public static var postgresTypeOID: UInt32 { Wrapped.postgresTypeOID }
    public func makePostgresParameter() throws(PostgresError) -> PostgresParameter {
        switch self {
        case .some(let value): try value.makePostgresParameter()
        case .none: PostgresParameter(text: nil, typeOID: Wrapped.postgresTypeOID)
        }
    }
}

/// A `jsonb` parameter holding any `Encodable` value, encoded with sorted keys and ISO 8601 dates.
public struct PostgresJSON<Value: Encodable & Sendable>: PostgresBindable {
    /// The value to encode.
    public let value: Value
    private let encoded: Result<String, PostgresError>

    /// Encodes `value` now; an encoding failure surfaces as `.encoding` when the parameter is sent.
    public init(_ value: Value) {
        self.value = value
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        do {
            let data = try encoder.encode(value)
            encoded = .success(String(decoding: data, as: UTF8.self))
        } catch {
            encoded = .failure(
                PostgresError(
                    kind: .encoding,
                    message: "cannot encode \(Value.self) as JSON",
                    detail: String(describing: error)
                )
            )
        }
    }

    /// The `jsonb` text; SQL NULL if encoding failed (the connection throws `.encoding` instead of sending it).
    public var postgresParameter: PostgresParameter {
        PostgresParameter(text: try? encoded.get(), typeOID: Self.postgresTypeOID)
    }
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.jsonb }
    public func makePostgresParameter() throws(PostgresError) -> PostgresParameter {
        PostgresParameter(text: try encoded.get(), typeOID: Self.postgresTypeOID)
    }
}

/// A `jsonb` parameter carrying JSON text as it is (the server validates it).
public struct PostgresRawJSON: PostgresBindable, Hashable {
    /// The JSON text.
    public var jsonText: String

    /// Wraps JSON text.
    public init(_ jsonText: String) {
        self.jsonText = jsonText
    }

    public var postgresParameter: PostgresParameter { PostgresParameter(text: jsonText, typeOID: Self.postgresTypeOID) }
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.jsonb }
}
