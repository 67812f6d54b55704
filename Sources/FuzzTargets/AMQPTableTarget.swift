import CRabbitMQ
import Foundation

#if DEBUG || ASTRO_FUZZING
@testable import AMQP
@testable import WorkerRuntime

/// `amqp-table`: message headers and basic properties as they arrive on the wire, from any publisher.
///
/// Every input is decoded twice with librabbitmq, the way the connection decodes a content header
/// frame: as a field table (`amqp_decode_table`, the input starting with the table's 4-byte length)
/// and as the basic class's properties (`amqp_decode_properties`, the input starting with the 16-bit
/// property flags). What decodes is copied into Swift (`FieldTableDecoder.table`/`.properties`) and every
/// header value is read as the runtime reads its counters (`DeliveryHeaders.count`). Invariants:
/// - the properties a worker puts on a retry or dead letter of such a delivery
///   (`DeliveryCopies.properties`) encode (`ScratchPool.basicProperties`, `amqp_encode_properties`)
///   and decode to the same values: otherwise the message can be neither retried nor dead-lettered;
/// - the decoded table and properties, published again as they are, decode to the same values — unless
///   a short string (a table key, a property) no longer fits its 255 bytes, which happens when invalid
///   UTF-8 is repaired (one byte becomes the three of U+FFFD) and is why workers do not copy them whole.
/// "Same" counts NaN equal to NaN and ignores timestamps beyond 2^53 s, which a `Date` cannot hold exactly.
///
/// Needs `@testable import AMQP` (debug and fuzzing builds); in an ordinary release build it does nothing.
enum AMQPTableTarget {
    static let target = FuzzTarget(
        name: "amqp-table",
        summary: "amqp_decode_table/amqp_decode_properties → FieldTableDecoder, DeliveryHeaders, re-encoding",
        run: run
    )

    /// The basic class (60), whose content headers carry the message properties.
    private static let basicClass: UInt16 = 60
    /// The longest AMQP short string.
    private static let shortStringLimit = 255

    static func run(_ data: Data) {
        let bytes = [UInt8](data)
        let pool = CPool()
        // Re-encoding widens values (a 1-byte i8 becomes an 8-byte long, an f32 an f64): 16 times is ample.
        let capacity = bytes.count * 16 + 4096
        if let table = decodeTable(bytes, pool: pool) {
            readCounters(table)
            pool.recycle()
            if fitsShortStrings(table) {
                let copy = roundTrip(table, capacity: capacity, pool: pool)
                invariant(same(copy, table), "a field table changed when published again: \(table) became \(copy)")
            }
        }
        pool.recycle()
        if let properties = decodeProperties(bytes, pool: pool) {
            readCounters(properties.headers)
            pool.recycle()
            let delivery = Delivery(
                queue: "chart.calculate",
                exchange: "astro.jobs",
                routingKey: "chart.calculate",
                body: Data(),
                properties: properties,
                redelivered: false,
                deliveryTag: 1,
                generation: 1
            )
            let retry = DeliveryCopies.properties(of: delivery)
            let retryCopy = roundTrip(
                retry,
                capacity: capacity,
                pool: pool,
                what: "the properties of a retry or dead letter"
            )
            invariant(
                same(retryCopy, retry),
                "the retry/dead-letter copy of basic properties changed on the wire: \(retry) became \(retryCopy)"
            )
            if fitsShortStrings(properties) {
                let copy = roundTrip(properties, capacity: capacity, pool: pool, what: "decoded basic properties")
                invariant(
                    same(copy, properties),
                    "basic properties changed when published again: \(properties) became \(copy)"
                )
            }
        }
    }

    private static func fitsShortStrings(_ table: AMQPTable) -> Bool {
        table.allSatisfy { key, value in key.utf8.count <= shortStringLimit && fitsShortStrings(value) }
    }

    private static func fitsShortStrings(_ value: AMQPFieldValue) -> Bool {
        switch value {
        case .table(let table): fitsShortStrings(table)
        case .array(let array): array.allSatisfy(fitsShortStrings)
        default: true
        }
    }

    private static func fitsShortStrings(_ properties: MessageProperties) -> Bool {
        let strings = [
            properties.contentType, properties.contentEncoding, properties.correlationID, properties.replyTo,
            properties.expiration, properties.messageID, properties.type, properties.appID,
        ]
        return fitsShortStrings(properties.headers)
            && strings.allSatisfy { ($0?.utf8.count ?? 0) <= shortStringLimit }
    }

    private static func decodeTable(_ bytes: [UInt8], pool: CPool) -> AMQPTable? {
        var output = amqp_table_t()
        var offset = 0
        let status = bytes.withUnsafeBytes { raw in
            amqp_decode_table(
                amqp_bytes_t(len: raw.count, bytes: UnsafeMutableRawPointer(mutating: raw.baseAddress)),
                pool.pointer,
                &output,
                &offset
            )
        }
        guard status == AMQP_STATUS_OK.rawValue else { return nil }
        invariant(offset <= bytes.count, "amqp_decode_table read to offset \(offset) of \(bytes.count) bytes")
        return FieldTableDecoder.table(output)
    }

    private static func decodeProperties(_ bytes: [UInt8], pool: CPool) -> MessageProperties? {
        var decoded: UnsafeMutableRawPointer?
        let status = bytes.withUnsafeBytes { raw in
            amqp_decode_properties(
                basicClass,
                pool.pointer,
                amqp_bytes_t(len: raw.count, bytes: UnsafeMutableRawPointer(mutating: raw.baseAddress)),
                &decoded
            )
        }
        guard status == AMQP_STATUS_OK.rawValue, let decoded else { return nil }
        return FieldTableDecoder.properties(decoded.assumingMemoryBound(to: amqp_basic_properties_t.self))
    }

    /// `table` as a publisher sends it and a consumer reads it back.
    private static func roundTrip(_ table: AMQPTable, capacity: Int, pool: CPool) -> AMQPTable {
        let scratch = ScratchPool()
        var c = scratch.table(table)
        var buffer = [UInt8](repeating: 0, count: capacity)
        var offset = 0
        // `c` points into the scratch pool: keep it alive until librabbitmq has read it.
        let status = withExtendedLifetime(scratch) {
            buffer.withUnsafeMutableBytes { raw in
                amqp_encode_table(amqp_bytes_t(len: raw.count, bytes: raw.baseAddress), &c, &offset)
            }
        }
        guard status == AMQP_STATUS_OK.rawValue else {
            fatalError("a decoded field table does not encode again (\(statusText(status))): \(table)")
        }
        guard let copy = decodeTable(Array(buffer[..<offset]), pool: pool) else {
            fatalError("a re-encoded field table does not decode: \(table)")
        }
        return copy
    }

    /// `properties` as a publisher sends them and a consumer reads them back.
    private static func roundTrip(
        _ properties: MessageProperties,
        capacity: Int,
        pool: CPool,
        what: String
    ) -> MessageProperties {
        let scratch = ScratchPool()
        var c = scratch.basicProperties(properties)
        var buffer = [UInt8](repeating: 0, count: capacity)
        let length = withExtendedLifetime(scratch) {
            buffer.withUnsafeMutableBytes { raw in
                amqp_encode_properties(basicClass, &c, amqp_bytes_t(len: raw.count, bytes: raw.baseAddress))
            }
        }
        guard length >= 0 else {
            fatalError("\(what) do not encode (\(statusText(length))): \(properties)")
        }
        guard let copy = decodeProperties(Array(buffer[..<Int(length)]), pool: pool) else {
            fatalError("\(what), encoded, do not decode: \(properties)")
        }
        return copy
    }

    /// Reads every value of the table, nested ones too, as the runtime reads its counter headers.
    private static func readCounters(_ table: AMQPTable) {
        for value in table.values {
            readCounters(value)
        }
    }

    private static func readCounters(_ value: AMQPFieldValue) {
        if let count = DeliveryHeaders.count(value) {
            invariant(
                (0...DeliveryHeaders.countCeiling).contains(count),
                "DeliveryHeaders.count(\(value)) is \(count), outside 0...\(DeliveryHeaders.countCeiling)"
            )
        }
        switch value {
        case .table(let table): readCounters(table)
        case .array(let array):
            for element in array { readCounters(element) }
        default: break
        }
    }

    // MARK: - Equality with NaN equal to itself

    static func same(_ a: AMQPTable, _ b: AMQPTable) -> Bool {
        a.count == b.count && a.allSatisfy { key, value in b[key].map { same(value, $0) } ?? false }
    }

    static func same(_ a: AMQPFieldValue, _ b: AMQPFieldValue) -> Bool {
        switch (a, b) {
        case (.double(let x), .double(let y)): return x == y || (x.isNaN && y.isNaN)
        case (.table(let x), .table(let y)): return same(x, y)
        case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
        default: return a == b
        }
    }

    static func same(_ a: MessageProperties, _ b: MessageProperties) -> Bool {
        var a = a
        var b = b
        // Seconds beyond 2^53 do not survive Double: compare only timestamps a Date holds exactly.
        if let x = a.timestamp, let y = b.timestamp, x.timeIntervalSince1970 >= 0x20_0000_0000_0000,
            y.timeIntervalSince1970 >= 0x20_0000_0000_0000
        {
            a.timestamp = nil
            b.timestamp = nil
        }
        guard same(a.headers, b.headers) else { return false }
        a.headers = [:]
        b.headers = [:]
        return a == b
    }
}

/// A librabbitmq pool for the decoders' output.
private final class CPool {
    let pointer: UnsafeMutablePointer<amqp_pool_t>

    init() {
        pointer = .allocate(capacity: 1)
        init_amqp_pool(pointer, 4096)
    }

    func recycle() {
        recycle_amqp_pool(pointer)
    }

    deinit {
        empty_amqp_pool(pointer)
        pointer.deallocate()
    }
}

#else
import AMQP

/// `amqp-table` needs `@testable import AMQP`, which an ordinary release build does not allow: there it
/// does nothing (fuzzing builds and debug builds, tests included, have the real target).
enum AMQPTableTarget {
    static let target = FuzzTarget(
        name: "amqp-table",
        summary: "unavailable in this build (needs a debug or fuzzing build)",
        run: { _ in }
    )
}
#endif
