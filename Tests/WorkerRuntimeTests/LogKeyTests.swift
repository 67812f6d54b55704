import AMQP
import Testing
import WorkerRuntime

/// The package's one `LogKey` (the broker wrapper's keys in AMQP, the runtime's in an extension):
/// the strings are what log queries and dashboards filter on, so they never change, and no two
/// keys share one.
@Suite struct LogKeyTests {
    static let keys: [(name: String, key: String, value: String)] = [
        ("url", LogKey.url, "amqp.url"),
        ("role", LogKey.role, "amqp.role"),
        ("generation", LogKey.generation, "amqp.generation"),
        ("queue", LogKey.queue, "amqp.queue"),
        ("queues", LogKey.queues, "amqp.queues"),
        ("error", LogKey.error, "amqp.error"),
        ("reconnectAttempt", LogKey.reconnectAttempt, "amqp.attempt"),
        ("delayMilliseconds", LogKey.delayMilliseconds, "amqp.delay_ms"),
        ("replyCode", LogKey.replyCode, "amqp.reply_code"),
        ("count", LogKey.count, "amqp.count"),
        ("heartbeat", LogKey.heartbeat, "amqp.heartbeat_s"),
        ("jobID", LogKey.jobID, "job.id"),
        ("jobType", LogKey.jobType, "job.type"),
        ("attempt", LogKey.attempt, "job.attempt"),
        ("status", LogKey.status, "job.status"),
        ("reason", LogKey.reason, "error.message"),
        ("reasonCode", LogKey.reasonCode, "error.code"),
        ("messageBytes", LogKey.messageBytes, "message.bytes"),
        ("messageDeliveries", LogKey.messageDeliveries, "message.deliveries"),
        ("dependency", LogKey.dependency, "dependency"),
        ("startAttempt", LogKey.startAttempt, "attempt"),
        ("retryIn", LogKey.retryIn, "retry_in"),
    ]

    @Test func everyKeyKeepsItsName() {
        for key in Self.keys { #expect(key.key == key.value, "LogKey.\(key.name)") }
    }

    @Test func noTwoKeysShareAName() {
        #expect(Set(Self.keys.map(\.key)).count == Self.keys.count)
    }
}
