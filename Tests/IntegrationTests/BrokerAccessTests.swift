import AMQP
import AstroDomain
import Foundation
import Testing
import WorkerRuntime

/// Each service's broker user (deploy/rabbitmq/definitions.json, loaded by scripts/stack.sh)
/// may publish exactly what its service produces (issue 14): a client allowed to publish
/// report.request cannot publish billing.refund-credit, a worker cannot reach another service's
/// queues through the retry exchange or the default exchange.
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

    @Test func aClientPublishesTheJobsPeopleAskForAndNoInternalOnes() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [
            .chartCalculate, .reportGenerate, .billingRefundCredit,
        ])
        defer { Task { await publisher.close() } }
        #expect(
            try await refusal(
                as: BrokerAccess.client,
                exchange: BrokerNames.jobsExchange,
                routingKey: "chart.calculate"
            ) == nil
        )
        for privileged in [JobType.billingRefundCredit, .reportGenerate] {
            let error = try await refusal(
                as: BrokerAccess.client,
                exchange: BrokerNames.jobsExchange,
                routingKey: privileged.rawValue
            )
            #expect(Self.isAccessRefused(error), "\(privileged.rawValue): \(String(describing: error))")
        }
        // Nor through the default exchange (straight into a queue), nor as a retry or an event.
        #expect(
            Self.isAccessRefused(
                try await refusal(as: BrokerAccess.client, exchange: "", routingKey: "billing.refund-credit")
            )
        )
        #expect(
            Self.isAccessRefused(
                try await refusal(
                    as: BrokerAccess.client,
                    exchange: BrokerNames.retryExchange,
                    routingKey: "billing.refund-credit.retry.1000ms"
                )
            )
        )
        #expect(
            Self.isAccessRefused(
                try await refusal(
                    as: BrokerAccess.client,
                    exchange: BrokerNames.eventsExchange,
                    routingKey: "billing.credits-issued"
                )
            )
        )
        _ = try await publisher.purgeQueue("chart.calculate")
        #expect(try await publisher.queueState(JobType.billingRefundCredit.rawValue).messageCount == 0)
        #expect(try await publisher.queueState(JobType.reportGenerate.rawValue).messageCount == 0)
    }

    @Test func aWorkerPublishesOnlyItsOwnEventsFollowUpsAndRetries() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [
            .billingRefundCredit, .reportGenerate,
        ])
        defer { Task { await publisher.close() } }
        let chart = BrokerAccess.chartWorker
        #expect(
            try await refusal(as: chart, exchange: BrokerNames.eventsExchange, routingKey: "chart.calculated") == nil
        )
        #expect(
            try await refusal(
                as: chart,
                exchange: BrokerNames.retryExchange,
                routingKey: "chart.calculate.retry.1000ms"
            ) == nil
        )
        for (exchange, key) in [
            (BrokerNames.eventsExchange, "billing.credits-issued"), (BrokerNames.jobsExchange, "billing.refund-credit"),
            (BrokerNames.jobsExchange, "chart.calculate"),
            (BrokerNames.retryExchange, "billing.refund-credit.retry.1000ms"),
            ("", "billing.refund-credit"),
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
    }

    @Test func aWorkerDeclaresItsOwnQueuesButNotAnotherServicesOrTheExchanges() async throws {
        let admin = try await RuntimeTestEnvironment.contractPublisher(purging: [])
        defer { Task { await admin.close() } }
        let retry = WorkerConfiguration(
            amqp: try RuntimeTestEnvironment.amqpConfiguration(),
            database: try await RuntimeTestEnvironment.database()
        ).retryPolicy
        let chart = AMQPPublisher(
            configuration: try AMQPConfiguration(url: try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.chartWorker)),
            logger: RuntimeTestEnvironment.logger
        )
        defer { Task { await chart.close() } }
        // Its own topology: the exchanges exist (looked up, not declared), its queues are its own.
        try await chart.declare(WorkerTopology.topology(queues: ["chart.calculate"], retry: retry))
        do {
            try await chart.declare(WorkerTopology.topology(queues: ["billing.refund-credit"], retry: retry))
            Issue.record("the chart-worker's user declared the billing queues")
        } catch {
            #expect(error.replyCode == 403)
        }
        do {
            try await chart.deleteExchange(BrokerNames.jobsExchange)
            Issue.record("the chart-worker's user deleted astro.jobs")
        } catch {
            #expect(error.replyCode == 403)
        }
    }
}
