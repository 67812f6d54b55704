import AMQP
import AstroDomain

/// The broker objects of the contract: the three exchanges, and for each job queue the queue,
/// its `<queue>.dead` dead-letter queue and its retry delay queues.
public enum WorkerTopology {
    /// The exchanges every component uses.
    public static var exchanges: [ExchangeSpec] {
        [
            ExchangeSpec(name: BrokerNames.jobsExchange, kind: .topic),
            ExchangeSpec(name: BrokerNames.eventsExchange, kind: .topic),
            ExchangeSpec(name: BrokerNames.deadLetterExchange, kind: .direct),
            ExchangeSpec(name: BrokerNames.retryExchange, kind: .topic),
        ]
    }

    /// The exchanges as a worker declares them: only when missing. A worker's own broker user
    /// may not configure (or delete) the shared exchanges; `astroctl migrate` creates them.
    public static var workerExchanges: [ExchangeSpec] {
        exchanges.map { exchange in
            var exchange = exchange
            exchange.declareOnlyIfMissing = true
            return exchange
        }
    }

    /// The topology for the given job queues.
    ///
    /// - Parameters:
    ///   - queues: the job queues (each bound to `astro.jobs` with its own name).
    ///   - retry: the retry policy, whose steps name the delay queues.
    ///   - queueType: classic (one node) or quorum (a cluster); applies to every queue declared.
    ///   - deliveryLimit: on quorum queues, `x-delivery-limit` of the work queues: the broker
    ///     dead-letters a message returned unacknowledged this many times (classic queues have
    ///     no such argument; the runtime counts deliveries itself, `DELIVERY_LIMIT`).
    public static func topology(
        queues: [String],
        retry: RetryPolicy,
        queueType: QueueSpec.QueueType = .classic,
        deliveryLimit: Int = WorkerConfiguration.defaultDeliveryLimit,
        exchangesOnlyIfMissing: Bool = true
    ) -> Topology {
        var topology = Topology(exchanges: exchangesOnlyIfMissing ? workerExchanges : exchanges)
        for queue in queues {
            let dead = BrokerNames.deadLetterQueue(of: queue)
            // A message the broker itself gives up on (rejected without requeue, or expired)
            // also ends in the dead-letter queue, never silently dropped.
            topology.queues.append(
                QueueSpec(
                    name: queue,
                    deadLetterExchange: BrokerNames.deadLetterExchange,
                    deadLetterRoutingKey: dead,
                    queueType: queueType,
                    arguments: queueType == .quorum ? ["x-delivery-limit": .int(Int64(deliveryLimit))] : [:]
                )
            )
            topology.bindings.append(BindingSpec(queue: queue, exchange: BrokerNames.jobsExchange, routingKey: queue))
            topology.queues.append(QueueSpec(name: dead, queueType: queueType))
            topology.bindings.append(
                BindingSpec(queue: dead, exchange: BrokerNames.deadLetterExchange, routingKey: dead)
            )
            for step in retry.steps {
                // Delay queues have no consumer: messages wait out their TTL, then the broker
                // dead-letters them back to the work queue through astro.jobs. Retries reach them
                // through astro.retry, bound with the delay queue's own name.
                let delayQueue = RetryPolicy.delayQueueName(queue: queue, step: step)
                topology.queues.append(
                    QueueSpec(
                        name: delayQueue,
                        deadLetterExchange: BrokerNames.jobsExchange,
                        deadLetterRoutingKey: queue,
                        messageTTL: step,
                        queueType: queueType
                    )
                )
                topology.bindings.append(
                    BindingSpec(queue: delayQueue, exchange: BrokerNames.retryExchange, routingKey: delayQueue)
                )
            }
        }
        return topology
    }

    /// The topology of every job queue of the contract (what `astroctl migrate` declares, as
    /// the broker's administrator: the exchanges are declared outright, so one of another type
    /// — astro.jobs as the direct exchange of contract v1 — is reported, not silently used).
    public static func contract(
        retry: RetryPolicy,
        queueType: QueueSpec.QueueType = .classic,
        deliveryLimit: Int = WorkerConfiguration.defaultDeliveryLimit
    ) -> Topology {
        topology(
            queues: JobType.all.map(\.rawValue),
            retry: retry,
            queueType: queueType,
            deliveryLimit: deliveryLimit,
            exchangesOnlyIfMissing: false
        )
    }
}
