import AMQP
import AstroDomain
import Foundation
import TestProcesses
import Testing
import WorkerRuntime

/// Each service's broker user (deploy/rabbitmq/definitions.json, loaded by scripts/stack.sh)
/// may publish exactly what its service produces (issue 14): a client allowed to ask for
/// report.request cannot publish billing.refund-credit, a worker cannot reach another service's
/// queues through the retry exchange, the dead-letter exchange or the default exchange, and no
/// user can route around its topic permissions with a queue's dead-letter settings or an
/// exchange-to-exchange binding.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct BrokerAccessTests {
    /// Publishes one message as `service` and returns the broker's refusal, or nil when it was confirmed.
    func refusal(
        as service: BrokerAccess.Service,
        exchange: String,
        routingKey: String,
        mandatory: Bool = false
    ) async throws -> AMQPError? {
        let publisher = AMQPPublisher(
            configuration: try AMQPConfiguration(url: try RuntimeTestEnvironment.amqpURL(as: service)),
            logger: RuntimeTestEnvironment.logger
        )
        defer { Task { await publisher.close() } }
        do {
            try await publisher.publish(
                OutgoingMessage(
                    exchange: exchange,
                    routingKey: routingKey,
                    body: Data(#"{"jobId":"00000000-0000-4000-8000-000000000000"}"#.utf8),
                    mandatory: mandatory
                ),
                timeout: .seconds(10)
            )
            return nil
        } catch {
            return error
        }
    }

    static func isAccessRefused(_ error: AMQPError?) -> Bool { error?.replyCode == 403 }

    /// A publisher connected as `service`.
    func connection(as service: BrokerAccess.Service) throws -> AMQPPublisher {
        AMQPPublisher(
            configuration: try AMQPConfiguration(url: try RuntimeTestEnvironment.amqpURL(as: service)),
            logger: RuntimeTestEnvironment.logger
        )
    }

    /// Declares `topology` as `service` and returns the broker's refusal, or nil when it was declared.
    func declarationRefusal(as service: BrokerAccess.Service, _ topology: Topology) async throws -> AMQPError? {
        let publisher = try connection(as: service)
        defer { Task { await publisher.close() } }
        do {
            try await publisher.declare(topology)
            return nil
        } catch {
            return error
        }
    }

    /// The exchange a client-facing service publishes its jobs to.
    static func requestExchange(of service: BrokerAccess.Service) -> String { service.requestsExchange }

    /// The broker's bindings from `exchange`, as `rabbitmqctl list_bindings` reports them.
    static func bindings(from exchange: String) async throws -> [(destination: String, kind: String, key: String)] {
        _ = try RuntimeTestEnvironment.variable("ASTRO_STACK_DIR")
        let script = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("scripts/stack.sh")
        let listed = try await ProcessRunner.run(
            "/bin/bash",
            [
                script.path, "rabbit-ctl", "list_bindings", "-q", "--no-table-headers", "-p",
                try AMQPTestEnvironment.virtualHost(), "source_name",
                "destination_name", "destination_kind", "routing_key",
            ]
        )
        #expect(listed.status == 0, "rabbitmqctl list_bindings: \(listed.error)")
        return listed.output.split(separator: "\n").compactMap { line in
            let columns = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard columns.count == 4, columns[0] == exchange else { return nil }
            return (columns[1], columns[2], columns[3])
        }
    }

    /// Publishes one job to `exchange` as `service` under `routingKey`, with more routing keys in
    /// the `CC` or `BCC` header (sender-selected distribution), mandatory and confirmed.
    func publish(
        as service: BrokerAccess.Service,
        to exchange: String,
        routingKey: String,
        header: String,
        keys: [String],
        jobID: JobID
    ) async throws -> AMQPError? {
        let publisher = try connection(as: service)
        defer { Task { await publisher.close() } }
        var properties = MessageProperties(contentType: "application/json")
        properties.messageID = jobID.description
        properties.headers[header] = .array(keys.map { .string($0) })
        do {
            try await publisher.publish(
                OutgoingMessage(
                    exchange: exchange,
                    routingKey: routingKey,
                    body: Data(#"{"jobId":"\#(jobID)"}"#.utf8),
                    properties: properties,
                    mandatory: true
                ),
                timeout: .seconds(10)
            )
            return nil
        } catch {
            return error
        }
    }

    /// A queue of the test's own bound to `astro.jobs` under `keys`: whatever `astro.jobs` routes
    /// under one of them reaches it as it reaches the real queue (a copy; the real queue's
    /// consumers, of tests running alongside, cannot take it away).
    func witness(_ admin: AMQPPublisher, keys: [String]) async throws -> String {
        let name = "test.witness.\(UUID().uuidString.prefix(8).lowercased())"
        try await admin.declare(
            Topology(
                queues: [QueueSpec(name: name, durable: false, autoDelete: false)],
                bindings: keys.map { BindingSpec(queue: name, exchange: BrokerNames.jobsExchange, routingKey: $0) }
            )
        )
        return name
    }

    /// The job types `service` may not ask for: the queues no header of its messages may reach.
    static func forbidden(to service: BrokerAccess.Service) -> [String] {
        JobType.all.filter { !service.requests.contains($0) }.map(\.rawValue)
    }

    /// Issue 29, F4: a client's message under a job type it may name, carrying the internal job
    /// types in `CC` or `BCC`, reaches the named queue and no other — as astroctl's user and as
    /// the gateway's, each on its own request exchange (RabbitMQ before 4.0 checks topic
    /// permissions against the routing key only, never these headers).
    @Test func ccAndBCCHeadersReachNoQueueTheClientMayNotName() async throws {
        let admin = try await RuntimeTestEnvironment.contractPublisher(purging: [
            .reportGenerate, .billingRefundCredit, .billingRecoverNotifications,
        ])
        defer { Task { await admin.close() } }
        for service in [BrokerAccess.client, BrokerAccess.gateway] {
            let forbidden = Self.forbidden(to: service)
            #expect(forbidden.contains("report.generate") && forbidden.contains("billing.refund-credit"))
            let witness = try await witness(admin, keys: forbidden)
            for header in ["CC", "BCC"] {
                let error = try await publish(
                    as: service,
                    to: Self.requestExchange(of: service),
                    routingKey: JobType.storyRead.rawValue,
                    header: header,
                    keys: forbidden,
                    jobID: JobID.random()
                )
                // Refused outright (a broker that checks topic permissions on these headers) or
                // delivered to story.read alone: either way no internal queue holds it.
                #expect(
                    error == nil || Self.isAccessRefused(error),
                    "\(service.user) \(header): \(String(describing: error))"
                )
            }
            try await Task.sleep(for: .milliseconds(300))
            let leaked = try await admin.queueState(witness).messageCount
            #expect(leaked == 0, "\(service.user): \(leaked) message(s) reached \(forbidden) through CC/BCC")
            try await admin.deleteQueue(witness)
        }
        // And the structure that makes it so: nothing but the queues of the job types every
        // user publishing there may name is bound to a client-facing exchange.
        for service in [BrokerAccess.client, BrokerAccess.gateway] {
            let exchange = Self.requestExchange(of: service)
            let bound = try await Self.bindings(from: exchange)
            #expect(!bound.isEmpty, "nothing is bound to \(exchange)")
            for binding in bound {
                #expect(
                    binding.kind == "queue",
                    "\(exchange) → \(binding.kind) \(binding.destination) (\(binding.key))"
                )
                #expect(
                    service.requests.map(\.rawValue).contains(binding.destination),
                    "\(exchange) → \(binding.destination): \(service.user) may not name it"
                )
            }
        }
        _ = try await admin.purgeQueue(JobType.storyRead.rawValue)
        for type in [JobType.reportGenerate, .billingRefundCredit] {
            #expect(try await admin.queueState(type.rawValue).messageCount == 0, "\(type.rawValue)")
        }
    }

    /// A broker declared before issue 29 routes `astro.requests` into `astro.jobs` through
    /// exchange-to-exchange bindings, the way CC/BCC reached internal queues; `astroctl migrate`
    /// removes them, and the hole is closed.
    @Test func migrateRemovesTheOldExchangeToExchangeRoute() async throws {
        let admin = try await RuntimeTestEnvironment.contractPublisher(purging: [.reportGenerate])
        defer { Task { await admin.close() } }
        // The bindings an earlier `astroctl migrate` made.
        try await admin.declare(
            Topology(
                exchangeBindings: JobType.requestable.map {
                    ExchangeBindingSpec(
                        destination: BrokerNames.jobsExchange,
                        source: BrokerNames.requestsExchange,
                        routingKey: $0.rawValue
                    )
                }
            )
        )
        let old = try await Self.bindings(from: BrokerNames.requestsExchange).filter { $0.kind == "exchange" }
        #expect(old.count == JobType.requestable.count, "\(old)")
        let witness = try await witness(admin, keys: ["report.generate"])
        func publishWithCC() async throws {
            _ = try await publish(
                as: BrokerAccess.client,
                to: BrokerNames.requestsExchange,
                routingKey: JobType.storyRead.rawValue,
                header: "CC",
                keys: ["report.generate"],
                jobID: JobID.random()
            )
        }
        // The old route is open: the test sees the hole it closes.
        try await publishWithCC()
        try await RuntimeTestEnvironment.eventually(
            "the CC copy reaches the report.generate witness through astro.requests → astro.jobs (messages)",
            timeout: .seconds(30),
            observe: { try await admin.queueState(witness).messageCount },
            until: { $0 >= 1 }
        )
        #expect(try await admin.purgeQueue(witness) == 1)
        let database = try await RuntimeTestEnvironment.database()
        let migrated = try await ProcessRunner.run(
            ProcessRunner.productPath("astroctl"),
            [
                "migrate", "--amqp-url", try RuntimeTestEnvironment.variable("AMQP_URL"), "--database-url",
                "postgres://\(database.user):\(database.password ?? "")@\(database.host):\(database.port)/\(database.database)",
            ]
        )
        #expect(migrated.status == 0, "astroctl migrate: \(migrated.error)")
        #expect(migrated.output.contains("astro.requests → astro.jobs"), "\(migrated.output)")
        let left = try await Self.bindings(from: BrokerNames.requestsExchange)
        #expect(!left.contains { $0.kind == "exchange" }, "\(left)")
        try await publishWithCC()
        // Pacing: time for a copy to arrive, were the route still open.
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await admin.purgeQueue(witness) == 0)
        try await admin.deleteQueue(witness)
        _ = try await admin.purgeQueue(JobType.storyRead.rawValue)
        // Again on a migrated broker: the removal is idempotent.
        let again = try await ProcessRunner.run(
            ProcessRunner.productPath("astroctl"),
            [
                "migrate", "--amqp-url", try RuntimeTestEnvironment.variable("AMQP_URL"), "--database-url",
                "postgres://\(database.user):\(database.password ?? "")@\(database.host):\(database.port)/\(database.database)",
            ]
        )
        #expect(again.status == 0, "astroctl migrate: \(again.error)")
    }

    @Test func aClientAsksForTheJobsPeopleAskForAndNoInternalOnes() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [
            .chartCalculate, .reportGenerate, .billingRefundCredit,
        ])
        defer { Task { await publisher.close() } }
        // Through astro.requests, which routes it on to the chart.calculate queue.
        #expect(
            try await refusal(
                as: BrokerAccess.client,
                exchange: BrokerNames.requestsExchange,
                routingKey: "chart.calculate",
                mandatory: true
            ) == nil
        )
        #expect(try await publisher.queueState("chart.calculate").messageCount == 1)
        for privileged in [JobType.billingRefundCredit, .reportGenerate] {
            let error = try await refusal(
                as: BrokerAccess.client,
                exchange: BrokerNames.requestsExchange,
                routingKey: privileged.rawValue
            )
            #expect(Self.isAccessRefused(error), "\(privileged.rawValue): \(String(describing: error))")
        }
        // Nor on astro.jobs itself, through the default exchange (straight into a queue), nor as
        // a retry, a dead letter or an event.
        for (exchange, key) in [
            (BrokerNames.jobsExchange, "chart.calculate"), (BrokerNames.jobsExchange, "billing.refund-credit"),
            ("", "billing.refund-credit"), (BrokerNames.retryExchange, "billing.refund-credit.retry.1000ms"),
            (BrokerNames.retryExchange, "billing.refund-credit.dead"),
            (BrokerNames.deadLetterExchange, "billing.refund-credit.dead"),
            (BrokerNames.eventsExchange, "billing.credits-issued"),
        ] {
            #expect(
                Self.isAccessRefused(try await refusal(as: BrokerAccess.client, exchange: exchange, routingKey: key)),
                "\(exchange) \(key)"
            )
        }
        _ = try await publisher.purgeQueue("chart.calculate")
        #expect(try await publisher.queueState(JobType.billingRefundCredit.rawValue).messageCount == 0)
        #expect(try await publisher.queueState(JobType.reportGenerate.rawValue).messageCount == 0)
    }

    /// The gateway's own user asks for the jobs people ask for, never the internal ones, and may
    /// declare its replicas' exclusive event queues (`gateway.events.*`) bound to every event —
    /// but not astroctl's queues, nor may astroctl's user declare the gateway's.
    @Test func theGatewayAsksForClientJobsAndReadsEventsOnItsOwnQueues() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [
            .chartCalculate, .reportGenerate, .billingRefundCredit,
        ])
        defer { Task { await publisher.close() } }
        #expect(
            try await refusal(
                as: BrokerAccess.gateway,
                exchange: BrokerNames.gatewayRequestsExchange,
                routingKey: "chart.calculate",
                mandatory: true
            ) == nil
        )
        // (Mandatory and confirmed: it reached the queue. Its count is not checked here, as a
        // chart-worker of a test running alongside may already have taken it.) On its own request
        // exchange only: astro.requests, astroctl's, is bound to billing.recover-notifications.
        for (exchange, key) in [
            (BrokerNames.gatewayRequestsExchange, "billing.refund-credit"),
            (BrokerNames.gatewayRequestsExchange, "report.generate"),
            (BrokerNames.gatewayRequestsExchange, "billing.recover-notifications"),
            (BrokerNames.requestsExchange, "chart.calculate"),
            (BrokerNames.jobsExchange, "chart.calculate"), (BrokerNames.eventsExchange, "chart.calculated"),
        ] {
            #expect(
                Self.isAccessRefused(try await refusal(as: BrokerAccess.gateway, exchange: exchange, routingKey: key)),
                "\(exchange) \(key)"
            )
        }
        func eventQueue(_ name: String) -> Topology {
            Topology(
                queues: [QueueSpec(name: name, durable: false, exclusive: true, autoDelete: true)],
                bindings: [BindingSpec(queue: name, exchange: BrokerNames.eventsExchange, routingKey: "#")]
            )
        }
        let suffix = UUID().uuidString.lowercased()
        #expect(try await declarationRefusal(as: BrokerAccess.gateway, eventQueue("gateway.events.\(suffix)")) == nil)
        let foreign = try await declarationRefusal(as: BrokerAccess.gateway, eventQueue("astroctl.wait.\(suffix)"))
        #expect(Self.isAccessRefused(foreign), "\(String(describing: foreign))")
        let client = try await declarationRefusal(as: BrokerAccess.client, eventQueue("gateway.events.x\(suffix)"))
        #expect(Self.isAccessRefused(client), "\(String(describing: client))")
        _ = try await publisher.purgeQueue("chart.calculate")
    }

    /// A queue's dead-letter exchange and routing key are not checked against topic permissions:
    /// the client's private queue may dead-letter only into astro.requests, where an internal
    /// job type routes nowhere.
    @Test func aClientsOwnQueueCannotDeadLetterIntoAnInternalJobQueue() async throws {
        let admin = try await RuntimeTestEnvironment.contractPublisher(purging: [.billingRefundCredit])
        defer { Task { await admin.close() } }
        let name = "astroctl.wait.dlx-\(UUID().uuidString.prefix(8).lowercased())"
        func waitQueue(deadLetterExchange: String) -> Topology {
            Topology(
                queues: [
                    QueueSpec(
                        name: name,
                        durable: false,
                        autoDelete: true,
                        deadLetterExchange: deadLetterExchange,
                        deadLetterRoutingKey: "billing.refund-credit",
                        messageTTL: .milliseconds(1)
                    )
                ],
                bindings: [BindingSpec(queue: name, exchange: BrokerNames.eventsExchange, routingKey: "test.dlx-probe")]
            )
        }
        // Dead-lettering into astro.jobs needs the right to publish there: refused.
        let direct = try await declarationRefusal(as: BrokerAccess.client, waitQueue(deadLetterExchange: "astro.jobs"))
        #expect(Self.isAccessRefused(direct), "\(String(describing: direct))")
        // Into astro.requests it is allowed, and goes nowhere.
        let client = try connection(as: BrokerAccess.client)
        defer { Task { await client.close() } }
        try await client.declare(waitQueue(deadLetterExchange: BrokerNames.requestsExchange))
        try await admin.publish(
            OutgoingMessage(
                exchange: BrokerNames.eventsExchange,
                routingKey: "test.dlx-probe",
                body: Data(#"{"jobId":"00000000-0000-4000-8000-000000000001","creditId":"x"}"#.utf8),
                mandatory: true
            )
        )
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await client.queueState(name).messageCount == 0, "the message expired from the wait queue")
        #expect(try await admin.queueState(JobType.billingRefundCredit.rawValue).messageCount == 0)
        // Nor can it bind astro.jobs to an exchange it reads (that needs the right to write astro.jobs).
        let bind = try await declarationRefusal(
            as: BrokerAccess.client,
            Topology(
                exchangeBindings: [
                    ExchangeBindingSpec(destination: "astro.jobs", source: "astro.events", routingKey: "#")
                ]
            )
        )
        #expect(Self.isAccessRefused(bind), "\(String(describing: bind))")
    }

    @Test func aWorkerPublishesOnlyItsOwnEventsFollowUpsRetriesAndDeadLetters() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [
            .billingRefundCredit, .reportGenerate,
        ])
        defer { Task { await publisher.close() } }
        let chart = BrokerAccess.chartWorker
        for (exchange, key) in [
            (BrokerNames.eventsExchange, "chart.calculated"),
            (BrokerNames.retryExchange, "chart.calculate.retry.1000ms"),
            (BrokerNames.retryExchange, "chart.calculate.dead"),
        ] {
            let error = try await refusal(as: chart, exchange: exchange, routingKey: key)
            #expect(error == nil, "\(exchange) \(key): \(String(describing: error))")
        }
        for (exchange, key) in [
            (BrokerNames.eventsExchange, "billing.credits-issued"), (BrokerNames.jobsExchange, "billing.refund-credit"),
            (BrokerNames.jobsExchange, "chart.calculate"), (BrokerNames.requestsExchange, "chart.calculate"),
            (BrokerNames.retryExchange, "billing.refund-credit.retry.1000ms"),
            (BrokerNames.retryExchange, "billing.refund-credit.dead"),
            (BrokerNames.deadLetterExchange, "chart.calculate.dead"),
            (BrokerNames.deadLetterExchange, "billing.refund-credit.dead"), ("", "billing.refund-credit"),
        ] {
            #expect(
                Self.isAccessRefused(try await refusal(as: chart, exchange: exchange, routingKey: key)),
                "\(exchange) \(key)"
            )
        }
        // The report-worker may ask for refunds; the billing-worker for reports; not the other way round.
        #expect(
            try await refusal(
                as: BrokerAccess.reportWorker,
                exchange: BrokerNames.jobsExchange,
                routingKey: "billing.refund-credit"
            )
                == nil
        )
        #expect(
            Self.isAccessRefused(
                try await refusal(
                    as: BrokerAccess.reportWorker,
                    exchange: BrokerNames.jobsExchange,
                    routingKey: "report.generate"
                )
            )
        )
        #expect(
            try await refusal(
                as: BrokerAccess.billingWorker,
                exchange: BrokerNames.jobsExchange,
                routingKey: "report.generate"
            )
                == nil
        )
        _ = try await publisher.purgeQueue(JobType.billingRefundCredit.rawValue)
        _ = try await publisher.purgeQueue(JobType.reportGenerate.rawValue)
        _ = try await publisher.purgeQueue("chart.calculate.retry.1000ms")
        _ = try await publisher.purgeQueue("chart.calculate.dead")
    }

    /// A worker's user configures nothing: it uses the topology `astroctl migrate` declared, and
    /// cannot declare a queue (whose dead-letter settings it would choose), bind one exchange to
    /// another, or delete a shared exchange.
    @Test func aWorkerUsesTheDeclaredTopologyAndCanChangeNothing() async throws {
        let admin = try await RuntimeTestEnvironment.contractPublisher(purging: [.billingRefundCredit])
        defer { Task { await admin.close() } }
        let retry = WorkerConfiguration(
            amqp: try RuntimeTestEnvironment.amqpConfiguration(),
            database: try await RuntimeTestEnvironment.database()
        ).retryPolicy
        let chart = BrokerAccess.chartWorker
        // Everything exists: looked up, nothing declared.
        #expect(
            try await declarationRefusal(as: chart, WorkerTopology.topology(queues: ["chart.calculate"], retry: retry))
                == nil
        )
        // A missing delay queue (another RETRY_* setting) is the administrator's to declare.
        let other = RetryPolicy(maxAttempts: 2, initialDelay: .milliseconds(777), maxDelay: .milliseconds(777))
        let missing = try await declarationRefusal(
            as: chart,
            WorkerTopology.topology(queues: ["chart.calculate"], retry: other)
        )
        #expect(Self.isAccessRefused(missing), "\(String(describing: missing))")
        // The dead-letter way into another service's queue.
        let forged = try await declarationRefusal(
            as: chart,
            Topology(
                queues: [
                    QueueSpec(
                        name: "chart.calculate.retry.1ms",
                        deadLetterExchange: BrokerNames.jobsExchange,
                        deadLetterRoutingKey: "billing.refund-credit",
                        messageTTL: .milliseconds(1)
                    )
                ]
            )
        )
        #expect(Self.isAccessRefused(forged), "\(String(describing: forged))")
        // The exchange-to-exchange way.
        let bound = try await declarationRefusal(
            as: chart,
            Topology(
                exchangeBindings: [
                    ExchangeBindingSpec(
                        destination: "astro.jobs",
                        source: "astro.dlx",
                        routingKey: "billing.refund-credit"
                    )
                ]
            )
        )
        #expect(Self.isAccessRefused(bound), "\(String(describing: bound))")
        let publisher = try connection(as: chart)
        defer { Task { await publisher.close() } }
        do {
            try await publisher.deleteExchange(BrokerNames.jobsExchange)
            Issue.record("the chart-worker's user deleted astro.jobs")
        } catch {
            #expect(error.replyCode == 403)
        }
        #expect(try await admin.queueState(JobType.billingRefundCredit.rawValue).messageCount == 0)
    }
}
