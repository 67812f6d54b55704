import AMQP
import AstroDomain
import Foundation
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
                exchange: BrokerNames.requestsExchange,
                routingKey: "chart.calculate",
                mandatory: true
            ) == nil
        )
        // (Mandatory and confirmed: it reached the queue. Its count is not checked here, as a
        // chart-worker of a test running alongside may already have taken it.)
        for (exchange, key) in [
            (BrokerNames.requestsExchange, "billing.refund-credit"), (BrokerNames.requestsExchange, "report.generate"),
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
