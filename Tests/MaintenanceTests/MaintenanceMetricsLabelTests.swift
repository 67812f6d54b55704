import AMQP
import AstroDomain
import Foundation
import Testing

@testable import Maintenance

/// The metrics' closed label sets (AstroDomain) name exactly what the task records, and a
/// dead letter the broker dropped is attributed to the queue it fell from.
@Suite struct MaintenanceMetricsLabelTests {
    @Test func theLabelSetsAreWhatTheTaskRecords() {
        #expect(MetricLabel.retentionTables == RetentionTable.allCases.map(\.rawValue))
        #expect(MetricLabel.deadLetterDropReasons == DroppedDeadLetter.Reason.allCases.map(\.rawValue))
        #expect(
            MetricLabel.maintenanceOutcomes
                == [MaintenanceRun.Outcome.completed, .partial, .failed].map(\.rawValue)
        )
        #expect(MetricLabel.deadLetterQueues == DeadLetterBound.contractQueues)
    }

    @Test func aBrokerDropIsAttributedToTheQueueItFellFrom() {
        let id = "0b0e4b8e-5d1e-4c57-9a53-6a1b1c1d1e1f"
        let delivery = Delivery(
            queue: BrokerNames.deadDroppedQueue,
            exchange: BrokerNames.deadLetterExchange,
            routingKey: BrokerNames.deadDroppedQueue,
            body: Data(#"{"jobId":"\#(id)"}"#.utf8),
            properties: MessageProperties(
                headers: [
                    // Newest first: the drop from the .dead queue, then the rejection that put it there.
                    "x-death": .array([
                        .table(["queue": "report.generate.dead", "reason": "maxlen", "count": .int(1)]),
                        .table(["queue": "report.generate", "reason": "rejected", "count": .int(1)]),
                    ])
                ]
            ),
            redelivered: false,
            deliveryTag: 1,
            generation: 1
        )
        let drop = DeadLetterBound.describeBrokerDrop(delivery)
        #expect(drop.queue == "report.generate.dead")
        #expect(drop.reason == .brokerMaxLength)
        #expect(drop.jobID == id)
        #expect(drop.deadLetterCode == "rejected")

        // The runtime's own reason code wins; a message with no x-death is `unknown` (label other).
        var coded = delivery.properties
        coded.headers[BrokerNames.Header.reasonCode] = "invalid-input"
        coded.headers["x-death"] = nil
        let bare = DeadLetterBound.describeBrokerDrop(
            Delivery(
                queue: delivery.queue,
                exchange: delivery.exchange,
                routingKey: delivery.routingKey,
                body: Data("not json".utf8),
                properties: coded,
                redelivered: false,
                deliveryTag: 2,
                generation: 1
            )
        )
        #expect(bare.queue == "unknown")
        #expect(bare.deadLetterCode == "invalid-input")
        #expect(bare.jobID == nil)
        #expect(MetricLabel.bounded(bare.queue, among: MetricLabel.deadLetterQueues) == MetricLabel.other)
    }
}
