import AMQP
import AstroDomain
import Foundation
import Testing

@testable import Maintenance

@Suite struct RetentionConfigurationTests {
    @Test func unsetOrEmptyVariablesTakeTheDefaults() throws {
        #expect(try RetentionConfiguration.fromEnvironment([:]) == .defaults)
        #expect(try RetentionConfiguration.fromEnvironment(["JOB_RETENTION": "", "OUTBOX_RETENTION": ""]) == .defaults)
        #expect(RetentionConfiguration.defaults.jobRetention == .seconds(604_800))
        #expect(RetentionConfiguration.defaults.outboxRetention == .seconds(86_400))
    }

    @Test func durationsTakeAUnit() throws {
        let configuration = try RetentionConfiguration.fromEnvironment([
            "JOB_RETENTION": "14d", "OUTBOX_RETENTION": "36h", "RETENTION_MAX_DURATION": "90m",
            "DEAD_LETTER_MAX_AGE": "3d", "RETENTION_BATCH_SIZE": "5000", "DEAD_LETTER_MAX_LENGTH": "250",
        ])
        #expect(configuration.jobRetention == .seconds(14 * 86_400))
        #expect(configuration.outboxRetention == .seconds(36 * 3600))
        #expect(configuration.maxDuration == .seconds(5400))
        #expect(configuration.deadLetterMaxAge == .seconds(3 * 86_400))
        #expect(configuration.batchSize == 5000)
        #expect(configuration.deadLetterMaxLength == 250)
    }

    @Test(
        "a value that does not parse or is out of bounds names its variable",
        arguments: [
            ("JOB_RETENTION", "7"),  // no unit
            ("JOB_RETENTION", "7w"),  // unknown unit
            ("JOB_RETENTION", "-7d"),
            ("JOB_RETENTION", "1.5d"),
            ("JOB_RETENTION", "59m"),  // under 1 hour
            ("JOB_RETENTION", "366d"),
            ("JOB_RETENTION", "9999999999d"),  // too many digits, never overflows
            ("OUTBOX_RETENTION", "30s"),
            ("OUTBOX_RETENTION", "d"),
            ("RETENTION_BATCH_SIZE", "9"),
            ("RETENTION_BATCH_SIZE", "10001"),
            ("RETENTION_BATCH_SIZE", "1e3"),
            ("RETENTION_BATCH_SIZE", " 100"),
            ("RETENTION_MAX_DURATION", "5s"),
            ("RETENTION_MAX_DURATION", "7h"),
            ("DEAD_LETTER_MAX_LENGTH", "0"),
            ("DEAD_LETTER_MAX_LENGTH", "1000001"),
            ("DEAD_LETTER_MAX_AGE", "30m"),
        ]
    )
    func invalidValues(variable: String, value: String) {
        #expect(throws: RetentionConfigurationError.self) {
            try RetentionConfiguration.fromEnvironment([variable: value])
        }
        do {
            _ = try RetentionConfiguration.fromEnvironment([variable: value])
        } catch {
            #expect(error.variable == variable)
            #expect(!error.message.isEmpty)
        }
    }

    @Test func aDeadLetterMayNotOutliveItsJobsRow() {
        do {
            _ = try RetentionConfiguration.fromEnvironment(["JOB_RETENTION": "2d", "DEAD_LETTER_MAX_AGE": "3d"])
            Issue.record("a dead-letter age above the job retention was accepted")
        } catch {
            #expect(error.variable == "DEAD_LETTER_MAX_AGE")
            #expect(error.message.contains("JOB_RETENTION"))
        }
        // Equal is fine; and the default DEAD_LETTER_MAX_AGE (7d) with a shorter JOB_RETENTION is not.
        #expect(throws: Never.self) {
            try RetentionConfiguration.fromEnvironment(["JOB_RETENTION": "3d", "DEAD_LETTER_MAX_AGE": "3d"])
        }
        #expect(throws: RetentionConfigurationError.self) {
            try RetentionConfiguration.fromEnvironment(["JOB_RETENTION": "3d"])
        }
    }
}

@Suite struct DeadLetterBoundTests {
    func delivery(headers: AMQPTable = [:], body: String = "{}") -> Delivery {
        Delivery(
            queue: "chart.calculate.dead",
            exchange: "astro.retry",
            routingKey: "chart.calculate.dead",
            body: Data(body.utf8),
            properties: MessageProperties(headers: headers),
            redelivered: false,
            deliveryTag: 1,
            generation: 1
        )
    }

    @Test func theOldestBeyondTheLengthGoFirstThenWhatIsTooOld() {
        let now = Date(timeIntervalSince1970: 2_000_000_000)
        let old = delivery(headers: [BrokerNames.Header.deadLetteredAt: .string(ISO8601.string(from: now - 8 * 86_400))]
        )
        let young = delivery(headers: [BrokerNames.Header.deadLetteredAt: .string(ISO8601.string(from: now - 3600))])
        let week = Duration.seconds(7 * 86_400)
        #expect(DeadLetterBound.reason(index: 0, excess: 2, delivery: young, now: now, maxAge: week) == .maxLength)
        #expect(DeadLetterBound.reason(index: 2, excess: 2, delivery: old, now: now, maxAge: week) == .maxAge)
        #expect(DeadLetterBound.reason(index: 2, excess: 2, delivery: young, now: now, maxAge: week) == nil)
        // Without any time on it, a dead letter is kept until the length bound reaches it.
        #expect(DeadLetterBound.reason(index: 0, excess: 0, delivery: delivery(), now: now, maxAge: week) == nil)
    }

    @Test func theBrokersXDeathTimeCountsWhenTheRuntimeSetNone() {
        let now = Date(timeIntervalSince1970: 2_000_000_000)
        let death: AMQPFieldValue = .array([
            .table(["time": .int(Int64(now.timeIntervalSince1970) - 9 * 86_400), "reason": "rejected"])
        ])
        let message = delivery(headers: ["x-death": death])
        #expect(
            DeadLetterBound.reason(index: 0, excess: 0, delivery: message, now: now, maxAge: .seconds(7 * 86_400))
                == .maxAge
        )
        #expect(DeadLetterBound.describe(message, queue: "q.dead", reason: .maxAge).deadLetterCode == "rejected")
    }

    @Test func aDroppedDeadLetterIsNamedByItsJobId() {
        let id = UUID().uuidString
        #expect(DeadLetterBound.jobID(Data("{\"jobId\":\"\(id)\"}".utf8)) == id.lowercased())
        #expect(DeadLetterBound.jobID(Data("{\"jobId\":\"not-a-uuid\"}".utf8)) == nil)
        #expect(DeadLetterBound.jobID(Data("[1,2]".utf8)) == nil)
        #expect(DeadLetterBound.jobID(Data([0xff, 0xfe])) == nil)
    }
}

/// Issue 29, F7: results nobody reads are kept a shorter time.
@Suite struct ChartResultUnreadRetentionConfigurationTests {
    @Test func theDefaultIsTwoDaysAndItCanBeSetOrTurnedOff() throws {
        #expect(RetentionConfiguration.defaults.chartResultUnreadRetention == .seconds(2 * 86_400))
        let set = try RetentionConfiguration.fromEnvironment(["CHART_RESULT_UNREAD_RETENTION": "6h"])
        #expect(set.chartResultUnreadRetention == .seconds(6 * 3600))
        #expect(
            try RetentionConfiguration.fromEnvironment(["CHART_RESULT_UNREAD_RETENTION": "off"])
                .chartResultUnreadRetention == nil
        )
        for bad in ["30m", "3651d", "2", "OFF"] {
            #expect(throws: RetentionConfigurationError.self, "\(bad)") {
                try RetentionConfiguration.fromEnvironment(["CHART_RESULT_UNREAD_RETENTION": bad])
            }
        }
    }
}
