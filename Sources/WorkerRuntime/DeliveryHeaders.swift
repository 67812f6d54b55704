import AMQP
import AstroDomain

/// The message headers the runtime reads. Any publisher can set them, to any type and value:
/// each reading gives a defined result and never traps.
enum DeliveryHeaders {
    /// The largest count a header is believed to carry; larger values count as this much.
    static let countCeiling = 1_000_000

    /// A non-negative count from a header value: an integer, a decimal string or a whole finite
    /// number, negative values as 0, huge ones as `countCeiling`; nil for anything else.
    static func count(_ value: AMQPFieldValue?) -> Int? {
        switch value {
        case .int(let number)?:
            return Int(min(max(number, 0), Int64(countCeiling)))
        case .double(let number)?:
            guard number.isFinite, number.rounded(.towardZero) == number else { return nil }
            return Int(min(max(number, 0), Double(countCeiling)))
        case .string(let text)?:
            let digits = text.utf8
            guard !digits.isEmpty, digits.count <= 32 else { return nil }
            var sign: Int64 = 1
            var rest = Substring(text)
            if rest.first == "-" {
                sign = -1
                rest = rest.dropFirst()
            } else if rest.first == "+" {
                rest = rest.dropFirst()
            }
            guard !rest.isEmpty, rest.utf8.allSatisfy({ (48...57).contains($0) }) else { return nil }
            // Any run of digits longer than the ceiling's is over it.
            guard rest.count <= 7, let magnitude = Int64(rest) else { return sign < 0 ? 0 : countCeiling }
            return Int(min(max(sign * magnitude, 0), Int64(countCeiling)))
        default:
            return nil
        }
    }

    /// The attempt number of a delivery: the attempt header of a retried copy plus one; 1 when
    /// the header is missing or unusable. A forged negative header counts as no attempt (it
    /// cannot buy extra retries), a huge one as the ceiling (no retry is left).
    static func attempt(of delivery: Delivery) -> Int {
        (count(delivery.properties.headers[BrokerNames.Header.attempt]) ?? 0) + 1
    }

    /// The deliveries before this one that the broker reports (`x-delivery-count`, set by
    /// quorum queues when a message is returned without an acknowledgement), or 0.
    static func earlierDeliveries(of delivery: Delivery) -> Int {
        count(delivery.properties.headers[BrokerNames.Header.deliveryCount]) ?? 0
    }
}
