import Foundation

/// The AMQP basic properties of a message.
public struct MessageProperties: Sendable, Hashable {
    /// MIME type of the body.
    public var contentType: String?
    /// Encoding of the body (for example `gzip`).
    public var contentEncoding: String?
    /// Application headers.
    public var headers: AMQPTable = [:]
    /// Whether the broker writes the message to disk (delivery mode 2); transient otherwise (1).
    public var persistent: Bool = true
    /// Message priority, for priority queues.
    public var priority: UInt8?
    /// Correlates a reply with its request.
    public var correlationID: String?
    /// The queue to reply to.
    public var replyTo: String?
    /// Per-message TTL in milliseconds, as a decimal string (AMQP's encoding).
    public var expiration: String?
    /// The application's message id (consumers dedupe on it).
    public var messageID: String?
    /// When the message was created (second precision on the wire).
    public var timestamp: Date?
    /// The application's message type name.
    public var type: String?
    /// The publishing application.
    public var appID: String?

    /// Creates message properties; by default a persistent message with no other properties.
    public init(
        contentType: String? = nil,
        contentEncoding: String? = nil,
        headers: AMQPTable = [:],
        persistent: Bool = true,
        priority: UInt8? = nil,
        correlationID: String? = nil,
        replyTo: String? = nil,
        expiration: String? = nil,
        messageID: String? = nil,
        timestamp: Date? = nil,
        type: String? = nil,
        appID: String? = nil
    ) {
        self.contentType = contentType
        self.contentEncoding = contentEncoding
        self.headers = headers
        self.persistent = persistent
        self.priority = priority
        self.correlationID = correlationID
        self.replyTo = replyTo
        self.expiration = expiration
        self.messageID = messageID
        self.timestamp = timestamp
        self.type = type
        self.appID = appID
    }
}

/// A message to publish.
public struct OutgoingMessage: Sendable {
    /// The exchange; `""` is the default exchange, which routes by queue name.
    public var exchange: String
    /// The routing key (the queue name for the default exchange).
    public var routingKey: String
    /// The body bytes.
    public var body: Data
    /// The basic properties.
    public var properties: MessageProperties
    /// Whether an unroutable message is returned (and the publish fails with `.unroutable`) rather than
    /// silently dropped.
    public var mandatory: Bool = true

    /// Creates a message.
    public init(
        exchange: String = "",
        routingKey: String,
        body: Data,
        properties: MessageProperties = MessageProperties(),
        mandatory: Bool = true
    ) {
        self.exchange = exchange
        self.routingKey = routingKey
        self.body = body
        self.properties = properties
        self.mandatory = mandatory
    }
}

/// A message delivered to an `AMQPConsumer`. Acknowledge it with `ack`, `nack` or `reject`.
public struct Delivery: Sendable {
    /// The queue it was consumed from.
    public let queue: String
    /// The exchange it was published to.
    public let exchange: String
    /// The routing key it was published with.
    public let routingKey: String
    /// The body bytes; empty when the body was withheld for its size (`isBodyWithheld`).
    public let body: Data
    /// The body's size as the broker announced it, in bytes.
    public let bodySize: UInt64
    /// The basic properties.
    public let properties: MessageProperties
    /// Whether the broker delivered it before (to a consumer that did not acknowledge it).
    public let redelivered: Bool
    /// The channel's delivery tag.
    public let deliveryTag: UInt64
    /// The connection it came on; bumped on each reconnect. Acks for an older generation are refused.
    public let generation: UInt64
    /// For a withheld body: its first and last bytes (`withheldExcerptBytes` each at most), kept
    /// while the rest was dropped, so the message can still be named (its job id) in logs and
    /// records. Empty otherwise.
    public let withheldExcerpts: [Data]

    /// How many bytes of each end of a withheld body are kept.
    public static let withheldExcerptBytes = 8192

    /// Whether the body was larger than `AMQPConfiguration.maxBodyBytes`: the consumer read and
    /// dropped it without keeping it, so `body` is empty. Reject such a delivery without requeue
    /// (the broker keeps the whole message and dead-letters it), never process it.
    public var isBodyWithheld: Bool { bodySize > UInt64(body.count) }

    /// Creates a delivery (for tests and in-memory fakes; the consumer makes the real ones).
    /// - Parameter bodySize: the announced size; defaults to `body.count` (nothing withheld).
    public init(
        queue: String,
        exchange: String,
        routingKey: String,
        body: Data,
        bodySize: UInt64? = nil,
        properties: MessageProperties,
        redelivered: Bool,
        deliveryTag: UInt64,
        generation: UInt64,
        withheldExcerpts: [Data] = []
    ) {
        self.withheldExcerpts = withheldExcerpts
        self.queue = queue
        self.exchange = exchange
        self.routingKey = routingKey
        self.body = body
        self.bodySize = max(bodySize ?? UInt64(body.count), UInt64(body.count))
        self.properties = properties
        self.redelivered = redelivered
        self.deliveryTag = deliveryTag
        self.generation = generation
    }
}

/// A change of a connection's state, for logs and readiness checks.
public enum ConnectionEvent: Sendable {
    /// Connected (and, for a consumer, consuming); `generation` counts connections from 1.
    case connected(generation: UInt64)
    /// The connection was lost or closed by the broker.
    case disconnected(AMQPError)
    /// A reconnect attempt is scheduled after `delay`.
    case reconnecting(attempt: Int, delay: Duration)
}
