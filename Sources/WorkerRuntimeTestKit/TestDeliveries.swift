import AMQP
import AstroDomain
import Foundation
import Synchronization
import UUIDText

/// Deliveries as the broker hands them to a worker, for tests: a job's body, the runtime's
/// headers, redelivery flags. Each gets a new delivery tag.
public enum TestDeliveries {
    private static let lastTag = Atomic<UInt64>(0)

    /// A delivery of a job of `type` from its queue.
    /// - Parameters:
    ///   - jobID: the body's `jobId`.
    ///   - userID: the body's `userId`, if any.
    ///   - fields: more fields of the body (the job's payload).
    ///   - attempt: the attempt it is (1 on the first delivery); a retry copy carries the attempts
    ///     before it in its `x-astro-attempt` header.
    ///   - redelivered: the broker's flag: delivered before without an acknowledgement.
    ///   - earlierDeliveries: a quorum queue's `x-delivery-count`, if any.
    public static func job(
        _ type: JobType,
        jobID: JobID = .random(),
        userID: UUID? = nil,
        fields: [String: JSONValue] = [:],
        attempt: Int = 1,
        redelivered: Bool = false,
        earlierDeliveries: Int? = nil
    ) -> Delivery {
        var body = fields
        body["jobId"] = .string(jobID.description)
        if let userID { body["userId"] = .string(userID.lowercasedText) }
        var headers: AMQPTable = [:]
        if attempt > 1 { headers[BrokerNames.Header.attempt] = .int(Int64(attempt - 1)) }
        if let earlierDeliveries { headers[BrokerNames.Header.deliveryCount] = .int(Int64(earlierDeliveries)) }
        return raw(
            queue: type.rawValue,
            body: JSONValue.object(body).jsonData(),
            headers: headers,
            redelivered: redelivered
        )
    }

    /// A delivery with any body and headers (unreadable bodies, forged headers).
    /// - Parameter bodySize: the announced size, when the consumer withheld a body over its limit
    ///   (`withheldExcerpts` are the ends it kept).
    public static func raw(
        queue: String,
        body: Data,
        headers: AMQPTable = [:],
        redelivered: Bool = false,
        correlationID: String? = nil,
        bodySize: UInt64? = nil,
        withheldExcerpts: [Data] = []
    ) -> Delivery {
        var properties = MessageProperties()
        properties.contentType = "application/json"
        properties.headers = headers
        properties.correlationID = correlationID
        return Delivery(
            queue: queue,
            exchange: BrokerNames.jobsExchange,
            routingKey: queue,
            body: body,
            bodySize: bodySize,
            properties: properties,
            redelivered: redelivered,
            deliveryTag: lastTag.add(1, ordering: .relaxed).newValue,
            generation: 1,
            withheldExcerpts: withheldExcerpts
        )
    }

    /// The same message delivered again by the broker (`redelivered`), with a new delivery tag.
    public static func redelivery(of delivery: Delivery) -> Delivery {
        Delivery(
            queue: delivery.queue,
            exchange: delivery.exchange,
            routingKey: delivery.routingKey,
            body: delivery.body,
            bodySize: delivery.bodySize,
            properties: delivery.properties,
            redelivered: true,
            deliveryTag: lastTag.add(1, ordering: .relaxed).newValue,
            generation: delivery.generation,
            withheldExcerpts: delivery.withheldExcerpts
        )
    }

    /// A retry copy the runtime published, as its delay queue hands it back to the work queue.
    public static func redelivery(ofRetry copy: OutgoingMessage, queue: String) -> Delivery {
        Delivery(
            queue: queue,
            exchange: BrokerNames.retryExchange,
            routingKey: queue,
            body: copy.body,
            properties: copy.properties,
            redelivered: false,
            deliveryTag: lastTag.add(1, ordering: .relaxed).newValue,
            generation: 1
        )
    }
}
