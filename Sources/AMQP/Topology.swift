/// An exchange to declare.
public struct ExchangeSpec: Sendable, Hashable {
    /// The exchange type.
    public enum Kind: String, Sendable {
        case direct, topic, fanout, headers
    }

    /// The exchange name.
    public var name: String
    /// The exchange type.
    public var kind: Kind
    /// Whether the exchange survives a broker restart.
    public var durable: Bool = true
    /// Whether the broker deletes the exchange when its last binding goes.
    public var autoDelete: Bool = false
    /// Extra arguments (for example `alternate-exchange`).
    public var arguments: AMQPTable = [:]
    /// Declare it only when it does not exist yet (checked with a passive declare, which needs
    /// no permission): a user without `configure` rights on the exchange can then declare a
    /// topology that uses it, once an administrator has created it. An existing exchange is
    /// used as it is, whatever its type.
    public var declareOnlyIfMissing: Bool = false

    /// Creates an exchange declaration.
    public init(
        name: String,
        kind: Kind,
        durable: Bool = true,
        autoDelete: Bool = false,
        arguments: AMQPTable = [:],
        declareOnlyIfMissing: Bool = false
    ) {
        self.name = name
        self.kind = kind
        self.durable = durable
        self.autoDelete = autoDelete
        self.arguments = arguments
        self.declareOnlyIfMissing = declareOnlyIfMissing
    }
}

/// A queue to declare.
public struct QueueSpec: Sendable, Hashable {
    /// The queue type (`x-queue-type`).
    public enum QueueType: String, Sendable {
        case classic, quorum
    }

    /// The queue name.
    public var name: String
    /// Whether the queue survives a broker restart.
    public var durable: Bool = true
    /// Whether the queue belongs to the declaring connection only.
    public var exclusive: Bool = false
    /// Whether the broker deletes the queue when its last consumer goes.
    public var autoDelete: Bool = false
    /// Queue arguments (`x-dead-letter-exchange`, `x-message-ttl`, `x-queue-type`…).
    public var arguments: AMQPTable = [:]
    /// Declare it (and its bindings) only when it does not exist yet, checked with a passive
    /// declare, which needs no permission: a user without `configure` rights on the queue can
    /// then start against a topology an administrator declared. An existing queue is used as it
    /// is, with the bindings it has.
    public var declareOnlyIfMissing: Bool = false

    /// Creates a queue declaration.
    ///
    /// The convenience parameters set `x-dead-letter-exchange`, `x-dead-letter-routing-key`,
    /// `x-message-ttl` (milliseconds) and `x-queue-type`; they override the same keys in `arguments`.
    public init(
        name: String,
        durable: Bool = true,
        exclusive: Bool = false,
        autoDelete: Bool = false,
        deadLetterExchange: String? = nil,
        deadLetterRoutingKey: String? = nil,
        messageTTL: Duration? = nil,
        queueType: QueueType? = nil,
        arguments: AMQPTable = [:],
        declareOnlyIfMissing: Bool = false
    ) {
        self.name = name
        self.declareOnlyIfMissing = declareOnlyIfMissing
        self.durable = durable
        self.exclusive = exclusive
        self.autoDelete = autoDelete
        var arguments = arguments
        if let deadLetterExchange {
            arguments["x-dead-letter-exchange"] = .string(deadLetterExchange)
        }
        if let deadLetterRoutingKey {
            arguments["x-dead-letter-routing-key"] = .string(deadLetterRoutingKey)
        }
        if let messageTTL {
            arguments["x-message-ttl"] = .int(messageTTL.wholeMilliseconds)
        }
        if let queueType {
            arguments["x-queue-type"] = .string(queueType.rawValue)
        }
        self.arguments = arguments
    }
}

/// A binding of a queue to an exchange.
public struct BindingSpec: Sendable, Hashable {
    /// The queue to bind.
    public var queue: String
    /// The exchange to bind it to.
    public var exchange: String
    /// The binding key.
    public var routingKey: String
    /// Binding arguments (for headers exchanges).
    public var arguments: AMQPTable = [:]

    /// Creates a binding.
    public init(queue: String, exchange: String, routingKey: String, arguments: AMQPTable = [:]) {
        self.queue = queue
        self.exchange = exchange
        self.routingKey = routingKey
        self.arguments = arguments
    }
}

/// A binding of one exchange to another (RabbitMQ's `exchange.bind`): what `source` routes
/// under `routingKey` is routed on by `destination` as if published to it.
public struct ExchangeBindingSpec: Sendable, Hashable {
    /// The exchange that receives the messages.
    public var destination: String
    /// The exchange whose messages are forwarded.
    public var source: String
    /// The binding key.
    public var routingKey: String
    /// Binding arguments (for headers exchanges).
    public var arguments: AMQPTable = [:]

    /// Creates an exchange-to-exchange binding.
    public init(destination: String, source: String, routingKey: String, arguments: AMQPTable = [:]) {
        self.destination = destination
        self.source = source
        self.routingKey = routingKey
        self.arguments = arguments
    }
}

/// Exchanges, queues, bindings and exchange-to-exchange bindings declared together (in that
/// order), idempotently.
public struct Topology: Sendable, Hashable {
    /// Exchanges, declared first.
    public var exchanges: [ExchangeSpec]
    /// Queues, declared second.
    public var queues: [QueueSpec]
    /// Bindings of queues, declared third.
    public var bindings: [BindingSpec]
    /// Bindings of exchanges to exchanges, declared last.
    public var exchangeBindings: [ExchangeBindingSpec]

    /// Creates a topology.
    public init(
        exchanges: [ExchangeSpec] = [],
        queues: [QueueSpec] = [],
        bindings: [BindingSpec] = [],
        exchangeBindings: [ExchangeBindingSpec] = []
    ) {
        self.exchanges = exchanges
        self.queues = queues
        self.bindings = bindings
        self.exchangeBindings = exchangeBindings
    }

    /// Nothing to declare.
    public static let empty = Topology()

    /// Whether there is nothing to declare.
    public var isEmpty: Bool {
        exchanges.isEmpty && queues.isEmpty && bindings.isEmpty && exchangeBindings.isEmpty
    }

    /// This topology plus `other`: an exchange or queue of the same name is replaced by `other`'s,
    /// bindings are added once.
    /// - Parameter other: The topology to add.
    /// - Returns: The union, in declaration order.
    public func merging(_ other: Topology) -> Topology {
        var result = self
        for exchange in other.exchanges {
            if let i = result.exchanges.firstIndex(where: { $0.name == exchange.name }) {
                result.exchanges[i] = exchange
            } else {
                result.exchanges.append(exchange)
            }
        }
        for queue in other.queues {
            if let i = result.queues.firstIndex(where: { $0.name == queue.name }) {
                result.queues[i] = queue
            } else {
                result.queues.append(queue)
            }
        }
        for binding in other.bindings where !result.bindings.contains(binding) {
            result.bindings.append(binding)
        }
        for binding in other.exchangeBindings where !result.exchangeBindings.contains(binding) {
            result.exchangeBindings.append(binding)
        }
        return result
    }

    /// This topology without the queue `name` and its bindings.
    func removingQueue(_ name: String) -> Topology {
        var result = self
        result.queues.removeAll { $0.name == name }
        result.bindings.removeAll { $0.queue == name }
        return result
    }

    /// This topology without the exchange `name` and its bindings.
    func removingExchange(_ name: String) -> Topology {
        var result = self
        result.exchanges.removeAll { $0.name == name }
        result.bindings.removeAll { $0.exchange == name }
        result.exchangeBindings.removeAll { $0.source == name || $0.destination == name }
        return result
    }
}

extension Duration {
    /// The duration in whole milliseconds, rounded down.
    var wholeMilliseconds: Int64 {
        let c = components
        return c.seconds * 1000 + c.attoseconds / 1_000_000_000_000_000
    }

    /// The duration in nanoseconds, saturating.
    var nanoseconds: Int64 {
        let c = components
        let (product, overflow) = c.seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return c.seconds < 0 ? .min : .max }
        return product + c.attoseconds / 1_000_000_000
    }
}
