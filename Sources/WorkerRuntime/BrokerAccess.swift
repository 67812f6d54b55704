import AMQP
import AstroDomain
import Logging

/// Who may do what on the broker: one RabbitMQ user per service, allowed to declare and consume
/// its own queues and to publish exactly the job types and events it produces.
///
/// RabbitMQ checks `configure`/`write`/`read` patterns per exchange or queue name, and — on
/// topic exchanges — topic permissions per routing key. `astro.jobs`, `astro.retry` and
/// `astro.events` are topic exchanges so that the routing key (the job type, the delay queue,
/// the event type) is what is permitted: a client that may publish `report.request` cannot
/// publish `billing.refund-credit`, and a chart-worker cannot put a retry into the billing
/// queues. The patterns here are the single source of what each service may do; the
/// definitions file the local stack and compose load (`deploy/rabbitmq/definitions.json`) and
/// the Kubernetes topology objects are checked against them.
public enum BrokerAccess {
    /// One broker user and what it is for.
    public struct Service: Sendable, Hashable {
        /// The RabbitMQ user name.
        public var user: String
        /// The environment variable holding its password where a deployment sets it.
        public var passwordVariable: String
        /// The job queues it consumes (and declares, with their dead-letter and delay queues).
        public var consumes: [JobType]
        /// The job types it publishes on `astro.jobs`.
        public var publishesJobs: [JobType]
        /// Prefixes of the event types it publishes on `astro.events` (`chart.`).
        public var eventPrefixes: [String]
        /// Whether it binds private queues to `astro.events` to wait for events (clients).
        public var readsEvents: Bool
        /// Prefix of the private queues it may declare (clients' event queues), if any.
        public var privateQueuePrefix: String?

        public init(
            user: String,
            passwordVariable: String,
            consumes: [JobType] = [],
            publishesJobs: [JobType] = [],
            eventPrefixes: [String] = [],
            readsEvents: Bool = false,
            privateQueuePrefix: String? = nil
        ) {
            self.user = user
            self.passwordVariable = passwordVariable
            self.consumes = consumes
            self.publishesJobs = publishesJobs
            self.eventPrefixes = eventPrefixes
            self.readsEvents = readsEvents
            self.privateQueuePrefix = privateQueuePrefix
        }
    }

    public static let chartWorker = Service(
        user: "chart-worker",
        passwordVariable: "CHART_WORKER_AMQP_PASSWORD",
        consumes: [.chartCalculate],
        eventPrefixes: ["chart."]
    )
    public static let billingWorker = Service(
        user: "billing-worker",
        passwordVariable: "BILLING_WORKER_AMQP_PASSWORD",
        consumes: [.billingVerifyPurchase, .reportRequest, .billingRefundCredit, .billingStoreNotification],
        publishesJobs: [.reportGenerate],
        // billing.* of its own, and report.completed / report.failed for report.request.
        eventPrefixes: ["billing.", "report."]
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
        consumes: [.storyGenerate, .storyIllustrate, .storyRead],
        eventPrefixes: ["story.", "achievement."]
    )
    /// What a client of the backend publishes (astroctl's job commands, the app's gateway):
    /// the jobs people ask for, never the internal ones (`report.generate`,
    /// `billing.refund-credit`); it may wait for events on queues of its own.
    public static let client = Service(
        user: "astro-client",
        passwordVariable: "CLIENT_AMQP_PASSWORD",
        publishesJobs: [
            .chartCalculate, .billingVerifyPurchase, .reportRequest, .billingStoreNotification, .storyGenerate,
            .storyIllustrate, .storyRead,
        ],
        readsEvents: true,
        privateQueuePrefix: "astroctl.wait."
    )

    /// Every service user, workers first.
    public static let services = [chartWorker, billingWorker, reportWorker, storyWorker, client]

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

    /// A pattern no routing key matches, for "none at all" (RabbitMQ patterns are PCRE).
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

    /// `^(q1|q2)…$` for queue names, or `nothing`.
    static func exactly(_ names: [String]) -> String {
        names.isEmpty ? nothing : "^" + alternatives(names.map(escaped)) + "$"
    }

    /// The names of a service's own queues: work queue, dead-letter queue, delay queues.
    static func ownQueues(_ service: Service) -> String? {
        guard !service.consumes.isEmpty else { return nil }
        return alternatives(service.consumes.map { escaped($0.rawValue) }) + "(\\.dead|\\.retry\\.[0-9]+ms)?"
    }

    /// The vhost permissions of a service.
    public static func permissions(_ service: Service) -> Permissions {
        var own: [String] = []
        if let queues = ownQueues(service) { own.append(queues) }
        if let prefix = service.privateQueuePrefix { own.append(escaped(prefix) + ".+") }
        // A worker publishes events, follow-up jobs, retries and dead letters; a client only jobs.
        let exchanges =
            (service.consumes.isEmpty
            ? [BrokerNames.jobsExchange]
            : [
                BrokerNames.jobsExchange, BrokerNames.eventsExchange, BrokerNames.deadLetterExchange,
                BrokerNames.retryExchange,
            ]).map(escaped)
        func pattern(_ parts: [String]) -> String { parts.isEmpty ? nothing : "^" + alternatives(parts) + "$" }
        // configure: declaring (and deleting) its own queues only; the shared exchanges are the
        // administrator's. write: publishing to the exchanges (topic permissions narrow the
        // keys) and binding its own queues. read: consuming its own queues, binding them to the
        // exchanges (and, for a client, to astro.events).
        var readable = own
        if !service.consumes.isEmpty {
            readable += [BrokerNames.jobsExchange, BrokerNames.deadLetterExchange, BrokerNames.retryExchange].map(
                escaped
            )
        }
        if service.readsEvents { readable.append(escaped(BrokerNames.eventsExchange)) }
        return Permissions(configure: pattern(own), write: pattern(exchanges + own), read: pattern(readable))
    }

    /// The topic permissions of a service on the three topic exchanges.
    public static func topicPermissions(_ service: Service) -> [TopicPermission] {
        let consumed = service.consumes.map { escaped($0.rawValue) }
        let delayQueues =
            consumed.isEmpty ? nothing : "^" + alternatives(consumed) + "\\.retry\\.[0-9]+ms$"
        let events =
            service.eventPrefixes.isEmpty
            ? nothing : "^" + alternatives(service.eventPrefixes.map(escaped)) + ".+$"
        return [
            TopicPermission(
                exchange: BrokerNames.jobsExchange,
                write: exactly(service.publishesJobs.map(\.rawValue)),
                read: exactly(service.consumes.map(\.rawValue))
            ),
            TopicPermission(exchange: BrokerNames.retryExchange, write: delayQueues, read: delayQueues),
            TopicPermission(
                exchange: BrokerNames.eventsExchange,
                write: events,
                read: service.readsEvents ? ".*" : nothing
            ),
        ]
    }

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
    /// The same users and permissions as objects of the RabbitMQ Messaging Topology Operator
    /// (`User`, `Permission`, `TopicPermission`, API rabbitmq.com/v1beta1) for a
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
            # it needs (BrokerAccess in Sources/WorkerRuntime). Do not edit; regenerate.
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
        return header + "\n" + documents.joined(separator: "---\n")
    }
}

/// Brings a broker declared under an earlier contract to this one.
public enum BrokerUpgrade {
    /// Declares the contract's topology as the administrator. `astro.jobs` was a direct exchange
    /// in contract v1 and is a topic exchange now: when the broker still has the direct one, it
    /// is deleted and declared again with its bindings (messages in queues are untouched;
    /// publishes in the second it takes fail and are retried by their publishers).
    /// - Returns: what was changed, for the operator.
    /// - Throws: `AMQPError` from the declarations.
    public static func declareContract(
        _ topology: Topology,
        publisher: AMQPPublisher,
        logger: Logger
    ) async throws(AMQPError) -> [String] {
        do {
            try await publisher.declare(topology)
            return []
        } catch  where error.kind == .preconditionFailed && error.message.contains("'\(BrokerNames.jobsExchange)'") {
            logger.notice(
                "astro.jobs is a direct exchange (contract v1); converting it to a topic exchange",
                metadata: ["error.message": "\(error.message)"]
            )
            try await publisher.deleteExchange(BrokerNames.jobsExchange)
            try await publisher.declare(topology)
            return ["astro.jobs converted from a direct to a topic exchange; its bindings were declared again"]
        }
    }
}
