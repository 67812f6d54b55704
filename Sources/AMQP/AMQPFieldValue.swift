/// A value in an AMQP field table: message headers and declaration arguments.
///
/// Integers travel as 64-bit signed (`l`), which RabbitMQ accepts for every numeric argument
/// (`x-message-ttl`, `x-max-length`…). When decoding, every integer width and timestamps become `.int`,
/// 32-bit floats and decimals become `.double`, and byte strings become `.string`.
public enum AMQPFieldValue: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByFloatLiteral
{
    /// A UTF-8 string (`S`).
    case string(String)
    /// A signed 64-bit integer (`l`).
    case int(Int64)
    /// A boolean (`t`).
    case bool(Bool)
    /// A 64-bit float (`d`).
    case double(Double)
    /// A nested table (`F`).
    case table([String: AMQPFieldValue])
    /// An array (`A`).
    case array([AMQPFieldValue])
    /// No value (`V`).
    case void

    public init(stringLiteral value: String) {
        self = .string(value)
    }

    public init(integerLiteral value: Int64) {
        self = .int(value)
    }

    public init(booleanLiteral value: Bool) {
        self = .bool(value)
    }

    public init(floatLiteral value: Double) {
        self = .double(value)
    }

    /// The string, if this is `.string`.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The integer, if this is `.int`.
    public var intValue: Int64? {
        if case .int(let value) = self { return value }
        return nil
    }
}

/// An AMQP field table.
public typealias AMQPTable = [String: AMQPFieldValue]
