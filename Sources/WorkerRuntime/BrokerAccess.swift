import AMQP
import AstroDomain
import Logging

/// Who may do what on the broker: one RabbitMQ user per service, allowed to consume its own
/// queues and to publish exactly the job types and events it produces.
///
/// RabbitMQ checks `configure`/`write`/`read` patterns per exchange or queue name, and — on
/// topic exchanges — topic permissions per routing key. `astro.jobs`, `astro.requests`,
/// `astro.retry` and `astro.events` are topic exchanges so that the routing key (the job type,
/// the worker's own queue, the event type) is what is permitted: a client that may ask for
/// `report.request` cannot publish `billing.refund-credit`, and a chart-worker cannot put a
/// retry or a dead letter into the billing queues.
///
/// Two broker features would route around topic permissions, and the patterns close both:
/// - a queue's dead-letter exchange and routing key are the declarer's choice and not checked
///   against topic permissions, so no user that may write to `astro.jobs` may declare queues:
///   workers configure nothing (the administrator declares every queue and binding,
///   `astroctl migrate`), and a client, which declares private queues to wait for events,
///   publishes its jobs to a request exchange of its own instead (`astro.requests`,
///   `astro.gateway-requests`), where nothing but the queues it may name is bound;
/// - an exchange-to-exchange binding needs `read` on its source, so workers read nothing but
///   their own work queues.
///
/// A third one, sender-selected distribution, is closed by the topology: the routing keys of a
/// message's `CC` and `BCC` headers are checked against no topic permission (before RabbitMQ 4.0)
/// and are routed again at every exchange-to-exchange hop, so a request exchange is bound to
/// queues only — never to `astro.jobs` — and only to the queues every user publishing there may
/// name (`WorkerTopology.requestBindings`).
///
/// The patterns here are the single source of what each service may do; the definitions file
/// the local stack and compose load (`deploy/rabbitmq/definitions.json`) and the Kubernetes
/// topology objects are checked against them.
public enum BrokerAccess {
    /// One broker user and what it is for.
    public struct Service: Sendable, Hashable {
        /// The RabbitMQ user name.
        public var user: String
        /// The environment variable holding its password where a deployment sets it.
        public var passwordVariable: String
        /// The job queues it consumes.
        public var consumes: [JobType]
        /// The job types it publishes on `astro.jobs` (a worker's follow-up jobs).
        public var publishesJobs: [JobType]
        /// The job types it asks for on `requestsExchange` (a client).
        public var requests: [JobType]
        /// The exchange it publishes its requests to: one where nothing but the queues of
        /// `requests` is bound (`astro.requests`; the gateway's `astro.gateway-requests`).
        public var requestsExchange: String
        /// Prefixes of the event types it publishes on `astro.events` (`chart.`).
        public var eventPrefixes: [String]
        /// Whether it binds private queues to `astro.events` to wait for events (clients).
        public var readsEvents: Bool
        /// Prefix of the private queues it may declare (clients' event queues), if any.
        public var privateQueuePrefix: String?
        /// Whether it reads (consumes, acknowledges, purges) every `<type>.dead` queue: the
        /// operator's tools and the maintenance task.
        public var readsDeadLetters: Bool = false
        /// Whether it may put a dead letter back into its own `.dead` queue through `astro.retry`
        /// (astroctl moves a dead letter read many times, so reading never wears it out).
        public var movesDeadLetters: Bool = false
        /// Other queues it reads by name (the maintenance task: `astro.dead-dropped`).
        public var readsQueues: [String] = []

        public init(
            user: String,
            passwordVariable: String,
            consumes: [JobType] = [],
            publishesJobs: [JobType] = [],
            requests: [JobType] = [],
            requestsExchange: String = BrokerNames.requestsExchange,
            eventPrefixes: [String] = [],
            readsEvents: Bool = false,
            privateQueuePrefix: String? = nil
        ) {
            self.user = user
            self.passwordVariable = passwordVariable
            self.consumes = consumes
            self.publishesJobs = publishesJobs
            self.requests = requests
            self.requestsExchange = requestsExchange
            self.eventPrefixes = eventPrefixes
            self.readsEvents = readsEvents
            self.privateQueuePrefix = privateQueuePrefix
        }
    }

    public static let chartWorker = Service(
        user: "chart-worker",
        passwordVariable: "CHART_WORKER_AMQP_PASSWORD",
        consumes: [.chartCalculate] + JobType.chartResultJobs,
        eventPrefixes: ["chart."]
    )
    public static let billingWorker = Service(
        user: "billing-worker",
        passwordVariable: "BILLING_WORKER_AMQP_PASSWORD",
        consumes: [
            .billingVerifyPurchase, .reportRequest, .billingRefundCredit, .billingStoreNotification,
            .billingSendConsumption, .billingRecoverNotifications, .userDelete,
            .userExportPack,
        ],
        // billing.send-consumption: its own follow-up of a CONSUMPTION_REQUEST;
        // billing.recover-notifications: the start-up recovery it schedules through its outbox;
        // story.erase-illustrations: user.delete's follow-up for the story-worker's files.
        publishesJobs: [
            .reportGenerate, .billingSendConsumption, .billingRecoverNotifications, .storyEraseIllustrations,
        ],
        // billing.* of its own, report.completed / report.failed for report.request, and user.*
        // for user.delete.
        eventPrefixes: ["billing.", "report.", "user."]
    )
    public static let reportWorker = Service(
        user: "report-worker",
        passwordVariable: "REPORT_WORKER_AMQP_PASSWORD",
        consumes: [.reportGenerate],
        publishesJobs: [.billingRefundCredit],
        eventPrefixes: ["report."]
    )
    public static let storyWorker = Service(
        user: "story-worker",
        passwordVariable: "STORY_WORKER_AMQP_PASSWORD",
        consumes: [.storyGenerate, .storyIllustrate, .storyRead, .storyEraseIllustrations, .userExport],
        // user.export-pack: user.export's second step (the billing-worker packs the zip);
        // user.export.failed: user.export's own failure.
        publishesJobs: [.userExportPack],
        eventPrefixes: ["story.", "achievement.", "user.export."]
    )
    /// What a client of the backend publishes (astroctl's job commands, the app's gateway):
    /// the jobs people ask for, through `astro.requests`, never the internal ones
    /// (`report.generate`, `billing.refund-credit`); it may wait for events on queues of its own.
    public static let client = Service(
        user: "astro-client",
        passwordVariable: "CLIENT_AMQP_PASSWORD",
        requests: JobType.requestable,
        readsEvents: true,
        privateQueuePrefix: "astroctl.wait."
    )
    /// The app's HTTP gateway: it publishes the jobs people ask for through an exchange of its
    /// own, `astro.gateway-requests` (a header could reach every queue bound to the exchange it
    /// publishes to, and `astro.requests` has `billing.recover-notifications`), and each replica
    /// binds one private queue (`gateway.events.<random>`)
    /// to every event for the live event streams (`GET /v1/events`) and long polls. A user of
    /// its own, so that the public-facing service's credentials are not astroctl's and can be
    /// rotated or revoked alone.
    public static let gateway = Service(
        user: "gateway",
        passwordVariable: "GATEWAY_AMQP_PASSWORD",
        // Not an operator's recovery of Apple's notification history: the app has no use for it.
        requests: JobType.requestable.filter { $0 != .billingRecoverNotifications },
        requestsExchange: BrokerNames.gatewayRequestsExchange,
        readsEvents: true,
        privateQueuePrefix: "gateway.events."
    )

    /// astroctl's operator commands (`astroctl dead list|show|replay|purge`): it reads and
    /// purges the `.dead` queues, republishes a replayed job to `astro.jobs` under any job type
    /// (a dead `report.generate` is replayed too), and moves a worn dead letter back into its own
    /// `.dead` queue through `astro.retry`. It reads no work queue, publishes no event and no
    /// request, and configures nothing; it needs no management tag (it uses AMQP only).
    public static let `operator`: Service = {
        var service = Service(
            user: "astro-operator",
            passwordVariable: "OPERATOR_AMQP_PASSWORD",
            publishesJobs: JobType.all
        )
        service.readsDeadLetters = true
        service.movesDeadLetters = true
        return service
    }()
    /// The maintenance task: it reads (and drops from) the `.dead` queues and drains
    /// `astro.dead-dropped`, where the broker's length backstop dead-letters what it drops. It
    /// publishes nothing and configures nothing; no management tag (AMQP only: queue lengths come
    /// from passive declarations, which need no permission).
    public static let maintenance: Service = {
        var service = Service(user: "maintenance", passwordVariable: "MAINTENANCE_AMQP_PASSWORD")
        service.readsDeadLetters = true
        service.readsQueues = [BrokerNames.deadDroppedQueue]
        return service
    }()

    /// Every service user, workers first.
    public static let services =
        [chartWorker, billingWorker, reportWorker, storyWorker, client, gateway]
        + [`operator`, maintenance]

    /// The exchanges clients publish their requests to.
    public static let requestExchanges = [BrokerNames.requestsExchange, BrokerNames.gatewayRequestsExchange]

    /// The user a worker of these queues connects as.
    public static func service(consuming queues: [JobType]) -> Service? {
        services.first { !$0.consumes.isEmpty && Set($0.consumes) == Set(queues) }
    }

    /// RabbitMQ's three permission patterns for a vhost.
    public struct Permissions: Sendable, Hashable {
        public var configure: String
        public var write: String
        public var read: String
    }

    /// A topic permission: the routing keys a user may publish (`write`) and bind (`read`) on a
    /// topic exchange.
    public struct TopicPermission: Sendable, Hashable {
        public var exchange: String
        public var write: String
        public var read: String
    }

    /// A pattern no name matches, for "none at all" (RabbitMQ patterns are PCRE).
    public static let nothing = "^(?!)$"

    static func escaped(_ name: String) -> String {
        var result = ""
        for character in name {
            if ".^$*+?()[]{}|\\/".contains(character) { result.append("\\") }
            result.append(character)
        }
        return result
    }

    static func alternatives(_ names: [String]) -> String {
        names.count == 1 ? names[0] : "(" + names.joined(separator: "|") + ")"
    }

    /// `^(q1|q2)…$` for names, or `nothing`.
    static func exactly(_ names: [String]) -> String {
        names.isEmpty ? nothing : "^" + alternatives(names.map(escaped)) + "$"
    }

    /// `^(p1|p2)…$` for already escaped patterns, or `nothing`.
    static func anyOf(_ patterns: [String]) -> String {
        patterns.isEmpty ? nothing : "^" + alternatives(patterns) + "$"
    }

    /// The vhost permissions of a service.
    public static func permissions(_ service: Service) -> Permissions {
        var exchanges: [String] = []
        if !service.publishesJobs.isEmpty { exchanges.append(BrokerNames.jobsExchange) }
        if !service.requests.isEmpty { exchanges.append(service.requestsExchange) }
        if !service.eventPrefixes.isEmpty { exchanges.append(BrokerNames.eventsExchange) }
        // Retries and dead letters of its own queues (or, for the operator, dead letters moved).
        if !service.consumes.isEmpty || service.movesDeadLetters { exchanges.append(BrokerNames.retryExchange) }
        let privateQueues = service.privateQueuePrefix.map { [escaped($0) + ".+"] } ?? []
        var readable = service.consumes.map { escaped($0.rawValue) }
        if service.readsDeadLetters {
            readable += JobType.all.map { escaped(BrokerNames.deadLetterQueue(of: $0.rawValue)) }
        }
        readable += service.readsQueues.map(escaped)
        if service.readsEvents { readable.append(escaped(BrokerNames.eventsExchange)) }
        // configure: only a client's private queues (binding them needs `write` on the queue and
        // `read` on astro.events). write: the exchanges it publishes to. read: the queues it
        // consumes — no exchange a worker could bind another exchange from.
        return Permissions(
            configure: anyOf(privateQueues),
            write: anyOf(exchanges.map(escaped) + privateQueues),
            read: anyOf(readable + privateQueues)
        )
    }

    /// The topic permissions of a service on each topic exchange (one for every exchange, so
    /// no exchange is left to RabbitMQ's default of "every routing key").
    public static func topicPermissions(_ service: Service) -> [TopicPermission] {
        let consumed = service.consumes.map { escaped($0.rawValue) }
        var ownQueues = consumed.isEmpty ? nothing : "^" + alternatives(consumed) + "\\.(retry\\.[0-9]+ms|dead)$"
        if service.movesDeadLetters {
            ownQueues = exactly(JobType.all.map { BrokerNames.deadLetterQueue(of: $0.rawValue) })
        }
        let events =
            service.eventPrefixes.isEmpty ? nothing : "^" + alternatives(service.eventPrefixes.map(escaped)) + ".+$"
        let jobs = TopicPermission(
            exchange: BrokerNames.jobsExchange,
            write: exactly(service.publishesJobs.map(\.rawValue)),
            read: nothing
        )
        let requests = requestExchanges.map { exchange in
            TopicPermission(
                exchange: exchange,
                write: exchange == service.requestsExchange ? exactly(service.requests.map(\.rawValue)) : nothing,
                read: nothing
            )
        }
        return [jobs] + requests + [
            TopicPermission(exchange: BrokerNames.retryExchange, write: ownQueues, read: nothing),
            TopicPermission(
                exchange: BrokerNames.eventsExchange,
                write: events,
                read: service.readsEvents ? ".*" : nothing
            ),
        ]
    }

    /// The broker's own delivery limit on quorum work queues (the `delivery-limit` policy): a
    /// backstop above the runtime's `DELIVERY_LIMIT`, for a message whose deliveries the runtime
    /// cannot count (its database down while the message crashes worker after worker). The
    /// runtime quarantines first, with a `delivery-limit` dead letter and a failed event; the
    /// broker's limit dead-letters silently (x-death reason `delivery_limit`).
    public static let brokerDeliveryLimit = 50

    /// The policy name and the work queues it applies to.
    public static let deliveryLimitPolicy = "astro-work-queue-delivery-limit"

    /// The backstop over the dead-letter queues (the `dead-letter-backstop` policy): the broker
    /// drops the oldest beyond this many messages. The maintenance task bounds them first, at
    /// `DEAD_LETTER_MAX_LENGTH` (at most this), naming each message it drops; the backstop only
    /// catches a queue the task stopped tending (CONTRACT.md, "Retention"). What it drops is not
    /// lost from sight: the policy dead-letters it (x-death reason `maxlen`) through `astro.dlx`
    /// into `astro.dead-dropped`, which the next maintenance run drains, logging and counting each
    /// one exactly (`astro_dead_letters_dropped_total{reason="broker-max-length"}`).
    public static let deadLetterBackstopLength = 1_000_000

    /// The dead-letter queues' policy name.
    public static let deadLetterBackstopPolicy = "astro-dead-letter-backstop"

    /// A pattern matching exactly the contract's dead-letter queues.
    public static var deadLetterQueuePattern: String {
        exactly(JobType.all.map { BrokerNames.deadLetterQueue(of: $0.rawValue) })
    }

    /// A pattern matching exactly the contract's work queues.
    public static var workQueuePattern: String { exactly(JobType.all.map(\.rawValue)) }

    /// RabbitMQ definitions (users, vhost, permissions, topic permissions) for these passwords:
    /// what `load_definitions` imports at boot. Passwords go in as given (RabbitMQ hashes them on
    /// import); a password of `${VARIABLE}` makes a template for a deployment to fill in.
    /// - Parameters:
    ///   - administrator: the user with every right (migrations, operators), and its password.
    ///   - passwords: each service's password, by user name; services without one are left out.
    ///   - vhost: the virtual host.
    public static func definitions(
        administrator: (user: String, password: String),
        passwords: [String: String],
        vhost: String = "/"
    ) -> JSONValue {
        var users: [JSONValue] = [
            ["name": .string(administrator.user), "password": .string(administrator.password), "tags": "administrator"]
        ]
        var permissions: [JSONValue] = [
            [
                "user": .string(administrator.user), "vhost": .string(vhost), "configure": ".*", "write": ".*",
                "read": ".*",
            ]
        ]
        var topicPermissions: [JSONValue] = []
        for service in services {
            guard let password = passwords[service.user] else { continue }
            users.append(["name": .string(service.user), "password": .string(password), "tags": ""])
            let granted = Self.permissions(service)
            permissions.append(
                [
                    "user": .string(service.user), "vhost": .string(vhost), "configure": .string(granted.configure),
                    "write": .string(granted.write), "read": .string(granted.read),
                ]
            )
            for topic in Self.topicPermissions(service) {
                topicPermissions.append(
                    [
                        "user": .string(service.user), "vhost": .string(vhost), "exchange": .string(topic.exchange),
                        "write": .string(topic.write), "read": .string(topic.read),
                    ]
                )
            }
        }
        return [
            "users": .array(users), "vhosts": [["name": .string(vhost)]], "permissions": .array(permissions),
            "topic_permissions": .array(topicPermissions),
            "policies": [
                deliveryLimitPolicyDefinition(vhost: vhost), deadLetterBackstopPolicyDefinition(vhost: vhost),
            ],
        ]
    }

    /// The delivery-limit policy as a definitions entry. It applies to `queues` (RabbitMQ 3.10,
    /// the local stack's, has no `quorum_queues` target); classic queues ignore the key.
    static func deliveryLimitPolicyDefinition(vhost: String) -> JSONValue {
        [
            "vhost": .string(vhost), "name": .string(deliveryLimitPolicy), "pattern": .string(workQueuePattern),
            "apply-to": "queues", "priority": 0,
            "definition": ["delivery-limit": .number(Double(brokerDeliveryLimit))],
        ]
    }

    /// The dead-letter backstop as a definitions entry: a length bound, dropping from the head.
    static func deadLetterBackstopPolicyDefinition(vhost: String) -> JSONValue {
        [
            "vhost": .string(vhost), "name": .string(deadLetterBackstopPolicy),
            "pattern": .string(deadLetterQueuePattern), "apply-to": "queues", "priority": 0,
            "definition": [
                "max-length": .number(Double(deadLetterBackstopLength)), "overflow": "drop-head",
                "dead-letter-exchange": .string(BrokerNames.deadLetterExchange),
                "dead-letter-routing-key": .string(BrokerNames.deadDroppedQueue),
            ],
        ]
    }

    /// The definitions as a template: passwords are `${VARIABLE}` placeholders (the
    /// administrator is `${RABBITMQ_USER}` with `${RABBITMQ_PASSWORD}`), for
    /// `deploy/rabbitmq/definitions.json`.
    public static func definitionsTemplate() -> JSONValue {
        definitions(
            administrator: ("${RABBITMQ_USER}", "${RABBITMQ_PASSWORD}"),
            passwords: Dictionary(uniqueKeysWithValues: services.map { ($0.user, "${\($0.passwordVariable)}") })
        )
    }
}

extension BrokerAccess {
    /// The same users, permissions and policy as objects of the RabbitMQ Messaging Topology
    /// Operator (`User`, `Permission`, `TopicPermission`, `Policy`, API rabbitmq.com/v1beta1) for a
    /// `RabbitmqCluster`: each user's credentials come from the Secret `astro-amqp-<user>`
    /// (keys `username`, `password`). `deploy/k8s/overlays/production/rabbitmq-access.yaml` is
    /// this text.
    /// - Parameter cluster: the `RabbitmqCluster`'s name.
    public static func topologyOperatorObjects(cluster: String) -> String {
        func quoted(_ text: String) -> String {
            "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
        }
        var documents: [String] = []
        let header = """
            # Generated by `astroctl broker kubernetes`: one broker user per service with only the rights
            # it needs, the work queues' delivery-limit policy and the dead-letter queues' length
            # backstop (BrokerAccess in Sources/WorkerRuntime). Do not edit; regenerate.
            """
        for service in services {
            let labels = "  labels:\n    app.kubernetes.io/part-of: astrosvitla\n"
            let reference = "  rabbitmqClusterReference:\n    name: \(cluster)\n"
            documents.append(
                "apiVersion: rabbitmq.com/v1beta1\nkind: User\nmetadata:\n  name: \(service.user)\n\(labels)spec:\n"
                    + reference + "  importCredentialsSecret:\n    name: astro-amqp-\(service.user)\n"
            )
            let granted = permissions(service)
            documents.append(
                "apiVersion: rabbitmq.com/v1beta1\nkind: Permission\nmetadata:\n  name: \(service.user)\n\(labels)spec:\n"
                    + "  vhost: \"/\"\n  user: \(service.user)\n  permissions:\n"
                    + "    configure: \(quoted(granted.configure))\n    write: \(quoted(granted.write))\n"
                    + "    read: \(quoted(granted.read))\n" + reference
            )
            for topic in topicPermissions(service) {
                let name = "\(service.user)-\(topic.exchange.replacingOccurrences(of: ".", with: "-"))"
                documents.append(
                    "apiVersion: rabbitmq.com/v1beta1\nkind: TopicPermission\nmetadata:\n  name: \(name)\n\(labels)spec:\n"
                        + "  vhost: \"/\"\n  user: \(service.user)\n  permissions:\n"
                        + "    exchange: \(topic.exchange)\n    write: \(quoted(topic.write))\n    read: \(quoted(topic.read))\n"
                        + reference
                )
            }
        }
        documents.append(
            "apiVersion: rabbitmq.com/v1beta1\nkind: Policy\nmetadata:\n  name: \(deliveryLimitPolicy)\n"
                + "  labels:\n    app.kubernetes.io/part-of: astrosvitla\nspec:\n"
                + "  name: \(deliveryLimitPolicy)\n  vhost: \"/\"\n  pattern: \(quoted(workQueuePattern))\n"
                + "  applyTo: queues\n  priority: 0\n  definition:\n    delivery-limit: \(brokerDeliveryLimit)\n"
                + "  rabbitmqClusterReference:\n    name: \(cluster)\n"
        )
        documents.append(
            "apiVersion: rabbitmq.com/v1beta1\nkind: Policy\nmetadata:\n  name: \(deadLetterBackstopPolicy)\n"
                + "  labels:\n    app.kubernetes.io/part-of: astrosvitla\nspec:\n"
                + "  name: \(deadLetterBackstopPolicy)\n  vhost: \"/\"\n  pattern: \(quoted(deadLetterQueuePattern))\n"
                + "  applyTo: queues\n  priority: 0\n  definition:\n    max-length: \(deadLetterBackstopLength)\n"
                + "    overflow: drop-head\n    dead-letter-exchange: \(BrokerNames.deadLetterExchange)\n"
                + "    dead-letter-routing-key: \(BrokerNames.deadDroppedQueue)\n"
                + "  rabbitmqClusterReference:\n    name: \(cluster)\n"
        )
        return header + "\n" + documents.joined(separator: "---\n")
    }
}

/// Brings a broker declared under an earlier contract to this one.
public enum BrokerUpgrade {
    /// Why a contract could not be declared.
    public struct Refusal: Error, CustomStringConvertible {
        public var description: String
    }

    /// Declares the contract's topology as the administrator, then removes the bindings of earlier
    /// contracts that would keep a way around the permissions open (`removeObsoleteBindings`).
    /// `astro.jobs` was a direct exchange in contract v1 and is a topic exchange now: when the
    /// broker still has the direct one, it is deleted and declared again with its bindings. Messages in queues are untouched, and
    /// publishes in the moment it takes fail and are retried by their publishers; but a retry
    /// leaving a delay queue while `astro.jobs` is missing would be dropped by the broker, so the
    /// conversion waits until every delay queue is empty (at most `drainTimeout`) and is refused
    /// otherwise.
    /// - Returns: what was changed, for the operator.
    /// - Throws: `AMQPError` from the declarations; `Refusal` when the delay queues hold retries
    ///   past `drainTimeout`.
    public static func declareContract(
        _ topology: Topology,
        publisher: AMQPPublisher,
        drainTimeout: Duration = .seconds(90),
        logger: Logger
    ) async throws -> [String] {
        let refused: AMQPError
        do {
            try await publisher.declare(topology)
            return try await removeObsoleteBindings(publisher: publisher)
        } catch {
            refused = error
        }
        guard refused.kind == .preconditionFailed, refused.message.contains("'\(BrokerNames.jobsExchange)'") else {
            throw refused
        }
        logger.notice(
            "astro.jobs is a direct exchange (contract v1); converting it to a topic exchange",
            metadata: [LogKey.reason: "\(refused.message)"]
        )
        let delayQueues = topology.queues.filter {
            $0.arguments["x-dead-letter-exchange"] == .string(BrokerNames.jobsExchange)
        }.map(\.name)
        let waiting = try await waitUntilEmpty(delayQueues, publisher: publisher, timeout: drainTimeout)
        guard waiting.isEmpty else {
            let total = waiting.map(\.count).reduce(0, +)
            let queues = waiting.map { "\($0.queue): \($0.count)" }.joined(separator: ", ")
            throw Refusal(
                description: "astro.jobs must be converted from a direct to a topic exchange, but \(total) "
                    + "retries still wait in delay queues (\(queues)) and would be dropped while it is missing; "
                    + "stop the workers (their retries then drain back to the work queues within "
                    + "RETRY_MAX_DELAY_MS) and run astroctl migrate again"
            )
        }
        try await publisher.deleteExchange(BrokerNames.jobsExchange)
        try await publisher.declare(topology)
        return ["astro.jobs converted from a direct to a topic exchange; its bindings were declared again"]
            + (try await removeObsoleteBindings(publisher: publisher))
    }

    /// Removes the exchange-to-exchange bindings `astro.requests` → `astro.jobs` of the contracts
    /// before issue 29, through which a client's `CC`/`BCC` headers reached every job queue. Run
    /// after the contract is declared (its queues are bound to the request exchanges directly by
    /// then, so no request goes unrouted in between). Unbinding is idempotent: nothing tells
    /// whether a binding was there, so the line says what holds afterwards.
    /// - Returns: the line for the operator.
    /// - Throws: `AMQPError` from the unbinding.
    static func removeObsoleteBindings(publisher: AMQPPublisher) async throws(AMQPError) -> [String] {
        for binding in WorkerTopology.obsoleteRequestBindings {
            try await publisher.unbindExchange(binding)
        }
        return [
            "removed any exchange-to-exchange binding astro.requests → astro.jobs (contracts before issue 29 "
                + "had them; CC/BCC headers reached internal queues through them)"
        ]
    }

    /// Polls the queues until all are empty or `timeout` passes.
    /// - Returns: the queues still holding messages (empty when all drained).
    static func waitUntilEmpty(
        _ queues: [String],
        publisher: AMQPPublisher,
        timeout: Duration
    ) async throws -> [(queue: String, count: UInt32)] {
        let deadline = ContinuousClock.now + timeout
        while true {
            var waiting: [(queue: String, count: UInt32)] = []
            for queue in queues {
                // (A `catch where` on this typed error crashes the 6.3 compiler here.)
                let state: Result<AMQPPublisher.QueueState, AMQPError>
                do {
                    state = .success(try await publisher.queueState(queue))
                } catch {
                    state = .failure(error)
                }
                switch state {
                case .success(let found) where found.messageCount > 0: waiting.append((queue, found.messageCount))
                case .success: break
                case .failure(let error) where error.kind == .notFound: break
                case .failure(let error): throw error
                }
            }
            if waiting.isEmpty || ContinuousClock.now >= deadline { return waiting }
            try await Task.sleep(for: .milliseconds(500))
        }
    }
}
