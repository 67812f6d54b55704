import AMQP
import AstroDomain
import Foundation
import Postgres
import Schema
import TestProcesses
import Testing
import WorkerRuntime

/// The operator's tools and the maintenance task have broker users of their own (issue 17),
/// not the administrator: `astro-operator` reads the `.dead` queues and republishes jobs (what
/// `astroctl dead` does; OperatorActionsTests run it as this user), `maintenance` reads the
/// `.dead` queues and `astro.dead-dropped` (MaintenanceMetricsTests run it as this user). Neither
/// may read a work queue, publish an event or a request, or declare anything.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ToolBrokerAccessTests {
    func configuration(_ service: BrokerAccess.Service) throws -> AMQPConfiguration {
        try AMQPConfiguration(url: try RuntimeTestEnvironment.amqpURL(as: service))
    }

    /// Publishes one message as `service`; the broker's refusal, or nil when it was confirmed.
    func publishRefusal(
        as service: BrokerAccess.Service,
        exchange: String,
        routingKey: String,
        body: String = #"{"jobId":"00000000-0000-4000-8000-000000000000"}"#,
        headers: AMQPTable = [:]
    ) async throws -> AMQPError? {
        let publisher = AMQPPublisher(configuration: try configuration(service), logger: RuntimeTestEnvironment.logger)
        defer { Task { await publisher.close() } }
        do {
            try await publisher.publish(
                OutgoingMessage(
                    exchange: exchange,
                    routingKey: routingKey,
                    body: Data(body.utf8),
                    properties: MessageProperties(headers: headers)
                ),
                timeout: .seconds(10)
            )
            return nil
        } catch {
            return error
        }
    }

    /// Starts consuming `queue` as `service` and stops at once (a message delivered meanwhile
    /// goes back unacknowledged); the broker's refusal, or nil when it let the user consume.
    func consumeRefusal(as service: BrokerAccess.Service, queue: String) async throws -> AMQPError? {
        let consumer = AMQPConsumer(
            configuration: try configuration(service),
            topology: Topology(),
            queues: [queue],
            prefetch: 1,
            logger: RuntimeTestEnvironment.logger
        )
        do {
            try await consumer.start()
            await consumer.close()
            return nil
        } catch {
            await consumer.close()
            return error
        }
    }

    static func isAccessRefused(_ error: AMQPError?) -> Bool { error?.replyCode == 403 }

    @Test func theOperatorReadsDeadLettersAndNothingElse() async throws {
        let admin = try await RuntimeTestEnvironment.contractPublisher(purging: [])
        defer { Task { await admin.close() } }
        let user = BrokerAccess.operator
        for queue in ["story.read.dead", "billing.store-notification.dead"] {
            let error = try await consumeRefusal(as: user, queue: queue)
            #expect(error == nil, "\(queue): \(String(describing: error))")
        }
        for queue in ["chart.calculate", "report.generate", BrokerNames.deadDroppedQueue] {
            #expect(Self.isAccessRefused(try await consumeRefusal(as: user, queue: queue)), "\(queue)")
        }
        for (exchange, key) in [
            (BrokerNames.eventsExchange, "chart.calculated"), (BrokerNames.eventsExchange, "billing.credits-issued"),
            (BrokerNames.requestsExchange, "chart.calculate"),
            (BrokerNames.retryExchange, "chart.calculate.retry.1000ms"),
            (BrokerNames.deadLetterExchange, "chart.calculate.dead"), ("", "chart.calculate"),
        ] {
            #expect(
                Self.isAccessRefused(try await publishRefusal(as: user, exchange: exchange, routingKey: key)),
                "\(exchange) \(key)"
            )
        }
        let declared = AMQPPublisher(configuration: try configuration(user), logger: RuntimeTestEnvironment.logger)
        defer { Task { await declared.close() } }
        do {
            try await declared.declare(Topology(queues: [QueueSpec(name: "astro-operator.private")]))
            Issue.record("the operator declared a queue")
        } catch {
            #expect(Self.isAccessRefused(error), "\(error)")
        }
    }

    /// `astroctl dead` as an operator runs it: the astro-operator broker user and the
    /// astro_operator database role. A dead letter it moves into a contract `.dead` queue (through
    /// astro.retry, as astroctl does with a worn one) is listed, then purged by its job id alone.
    @Test func astroctlDeadWorksAsTheOperatorUser() async throws {
        let admin = try await RuntimeTestEnvironment.contractPublisher(purging: [])
        defer { Task { await admin.close() } }
        let id = UUID().uuidString.lowercased()
        let moved = try await publishRefusal(
            as: BrokerAccess.operator,
            exchange: BrokerNames.retryExchange,
            routingKey: "story.read.dead",
            body: #"{"jobId":"\#(id)","userId":"\#(UUID().uuidString.lowercased())"}"#,
            headers: [
                BrokerNames.Header.reasonCode: "invalid-input",
                BrokerNames.Header.deadLetteredAt: .string(ISO8601.string(from: Date())),
            ]
        )
        #expect(moved == nil, "\(String(describing: moved))")
        let database = try await RuntimeTestEnvironment.databaseURL(as: .operator)
        let environment = [
            "ASTRO_OPERATOR": "tool-access-test",
            "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.operator),
        ]
        let astroctl = ProcessRunner.productPath("astroctl")
        let listed = try await ProcessRunner.run(
            astroctl,
            ["dead", "list", "--queue", "story.read", "--database-url", database],
            environment: environment
        )
        #expect(listed.status == 0, "\(listed.error)")
        #expect(listed.output.contains(id), "\(listed.output)")
        let purged = try await ProcessRunner.run(
            astroctl,
            [
                "dead", "purge", id, "--queue", "story.read", "--yes", "--why", "least-privilege test",
                "--database-url", database,
            ],
            environment: environment
        )
        #expect(purged.status == 0, "\(purged.error)")
        #expect(purged.output.contains("purged 1 dead letters"), "\(purged.output)")
        let again = try await ProcessRunner.run(
            astroctl,
            ["dead", "list", "--queue", "story.read", "--database-url", database],
            environment: environment
        )
        #expect(again.status == 0, "\(again.error)")
        #expect(!again.output.contains(id))
        let owner = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        let recorded = try await owner.withConnection { database in
            try database.query(
                """
                SELECT count(*)::int AS n FROM operator_actions
                WHERE action = 'dead.purge' AND operator = 'tool-access-test' AND outcome = 'done'
                    AND detail->'jobIds' ? $1
                """,
                [id]
            ).first?.decode(Int.self, "n")
        }
        await owner.close()
        #expect(recorded == 1)
    }

    @Test func theMaintenanceTaskReadsDeadLettersAndPublishesNothing() async throws {
        let admin = try await RuntimeTestEnvironment.contractPublisher(purging: [])
        defer { Task { await admin.close() } }
        let user = BrokerAccess.maintenance
        for queue in ["story.read.dead", BrokerNames.deadDroppedQueue] {
            let error = try await consumeRefusal(as: user, queue: queue)
            #expect(error == nil, "\(queue): \(String(describing: error))")
        }
        for queue in ["chart.calculate", "billing.verify-purchase"] {
            #expect(Self.isAccessRefused(try await consumeRefusal(as: user, queue: queue)), "\(queue)")
        }
        for (exchange, key) in [
            (BrokerNames.jobsExchange, "chart.calculate"), (BrokerNames.eventsExchange, "chart.calculated"),
            (BrokerNames.requestsExchange, "chart.calculate"), (BrokerNames.retryExchange, "chart.calculate.dead"),
            (BrokerNames.deadLetterExchange, BrokerNames.deadDroppedQueue), ("", "chart.calculate.dead"),
        ] {
            #expect(
                Self.isAccessRefused(try await publishRefusal(as: user, exchange: exchange, routingKey: key)),
                "\(exchange) \(key)"
            )
        }
    }
}
