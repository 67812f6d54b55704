import AMQP
import AstroDomain

/// The broker objects of the contract: the exchanges (and the request exchanges' bindings to the
/// queues clients may name), and for each job queue the queue, its `<queue>.dead` dead-letter
/// queue and its retry delay queues.
///
/// `astroctl migrate` declares all of it as the broker's administrator. A worker's own broker
/// user may configure nothing (a user that can declare a queue can give it any dead-letter
/// exchange and routing key, a way around topic permissions), so a worker declares only what is
/// missing — which succeeds when it connects as the administrator (development) and otherwise
/// stops it with a message saying to run `astroctl migrate`.
public enum WorkerTopology {
    /// The exchanges every component uses.
    public static var exchanges: [ExchangeSpec] {
        [
            ExchangeSpec(name: BrokerNames.jobsExchange, kind: .topic),
            ExchangeSpec(name: BrokerNames.requestsExchange, kind: .topic),
            ExchangeSpec(name: BrokerNames.gatewayRequestsExchange, kind: .topic),
            ExchangeSpec(name: BrokerNames.eventsExchange, kind: .topic),
            ExchangeSpec(name: BrokerNames.deadLetterExchange, kind: .direct),
            ExchangeSpec(name: BrokerNames.retryExchange, kind: .topic),
        ]
    }

    /// Each client's request exchange → the queue of each job type it may ask for, bound with the
    /// queue's name: the only way a client's message reaches a job queue.
    ///
    /// Queues, never `astro.jobs`: the routing keys of a message's `CC` and `BCC` headers are
    /// routed again at an exchange-to-exchange hop, and RabbitMQ before 4.0 checks them against no
    /// topic permission, so through `astro.jobs` they reached every job queue (issue 29, F4).
    /// Bound directly, they reach only the queues bound to the exchange published to — the ones
    /// every user allowed to publish there may name (`BrokerAccess.Service.requestsExchange`).
    public static var requestBindings: [BindingSpec] {
        var seen: Set<BindingSpec> = []
        return BrokerAccess.services.flatMap { service in
            service.requests.map {
                BindingSpec(queue: $0.rawValue, exchange: service.requestsExchange, routingKey: $0.rawValue)
            }
        }.filter { seen.insert($0).inserted }
    }

    /// The exchange-to-exchange bindings `astro.requests` → `astro.jobs` of the contracts before
    /// issue 29 (one per job type then requestable; every job type here, to cover them all).
    /// `astroctl migrate` removes them: one left in place keeps the CC/BCC route open.
    public static var obsoleteRequestBindings: [ExchangeBindingSpec] {
        JobType.all.map {
            ExchangeBindingSpec(
                destination: BrokerNames.jobsExchange,
                source: BrokerNames.requestsExchange,
                routingKey: $0.rawValue
            )
        }
    }

    /// The topology for the given job queues.
    ///
    /// - Parameters:
    ///   - queues: the job queues (each bound to `astro.jobs` with its own name).
    ///   - retry: the retry policy, whose steps name the delay queues.
    ///   - queueType: classic (one node) or quorum (a cluster); applies to every queue declared.
    ///   - asAdministrator: declare everything outright (`astroctl migrate`), so an exchange or
    ///     queue of different settings is reported; otherwise (a worker) only what is missing.
    public static func topology(
        queues: [String],
        retry: RetryPolicy,
        queueType: QueueSpec.QueueType = .classic,
        asAdministrator: Bool = false
    ) -> Topology {
        var topology = Topology(
            exchanges: exchanges.map { exchange in
                var exchange = exchange
                exchange.declareOnlyIfMissing = !asAdministrator
                return exchange
            }
        )
        func queue(_ spec: QueueSpec) -> QueueSpec {
            var spec = spec
            spec.declareOnlyIfMissing = !asAdministrator
            return spec
        }
        for name in queues {
            let dead = BrokerNames.deadLetterQueue(of: name)
            // A message the broker itself gives up on (rejected without requeue, or past a
            // quorum queue's delivery limit) also ends in the dead-letter queue, never dropped.
            // (The delivery limit of quorum queues is a policy, `astroctl broker definitions`,
            // not an argument: an argument could not be changed on an existing queue.)
            topology.queues.append(
                queue(
                    QueueSpec(
                        name: name,
                        deadLetterExchange: BrokerNames.deadLetterExchange,
                        deadLetterRoutingKey: dead,
                        queueType: queueType
                    )
                )
            )
            topology.bindings.append(BindingSpec(queue: name, exchange: BrokerNames.jobsExchange, routingKey: name))
            topology.queues.append(queue(QueueSpec(name: dead, queueType: queueType)))
            // The broker's dead letters arrive through astro.dlx, the worker's through astro.retry.
            topology.bindings.append(
                BindingSpec(queue: dead, exchange: BrokerNames.deadLetterExchange, routingKey: dead)
            )
            topology.bindings.append(BindingSpec(queue: dead, exchange: BrokerNames.retryExchange, routingKey: dead))
            for step in retry.steps {
                // Delay queues have no consumer: messages wait out their TTL, then the broker
                // dead-letters them back to the work queue through astro.jobs. Retries reach them
                // through astro.retry, bound with the delay queue's own name.
                let delayQueue = RetryPolicy.delayQueueName(queue: name, step: step)
                topology.queues.append(
                    queue(
                        QueueSpec(
                            name: delayQueue,
                            deadLetterExchange: BrokerNames.jobsExchange,
                            deadLetterRoutingKey: name,
                            messageTTL: step,
                            queueType: queueType
                        )
                    )
                )
                topology.bindings.append(
                    BindingSpec(queue: delayQueue, exchange: BrokerNames.retryExchange, routingKey: delayQueue)
                )
            }
        }
        if asAdministrator {
            let declared = Set(queues)
            topology.bindings += requestBindings.filter { declared.contains($0.queue) }
            // What the dead-letter queues' length backstop drops (its policy dead-letters it
            // through astro.dlx under this key) waits here for the maintenance task to count it.
            let dropped = BrokerNames.deadDroppedQueue
            topology.queues.append(QueueSpec(name: dropped, queueType: queueType))
            topology.bindings.append(
                BindingSpec(queue: dropped, exchange: BrokerNames.deadLetterExchange, routingKey: dropped)
            )
        }
        return topology
    }

    /// The topology of every job queue of the contract (what `astroctl migrate` declares, as
    /// the broker's administrator: everything is declared outright, so an exchange of another
    /// type — astro.jobs as the direct exchange of contract v1 — is reported, not silently used).
    public static func contract(retry: RetryPolicy, queueType: QueueSpec.QueueType = .classic) -> Topology {
        topology(queues: JobType.all.map(\.rawValue), retry: retry, queueType: queueType, asAdministrator: true)
    }
}
