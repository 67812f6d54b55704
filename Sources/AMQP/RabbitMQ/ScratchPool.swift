import CRabbitMQ
import Foundation

/// A librabbitmq memory pool for building outgoing C structures (field tables, basic properties).
///
/// Everything built from it points into the pool and stays valid until `recycle()`; recycling keeps the
/// pool's pages, so steady-state publishing allocates nothing here.
///
/// - Important: Not thread-safe; each connection loop owns one and uses it on its own thread only.
final class ScratchPool {
    private let pool: UnsafeMutablePointer<amqp_pool_t>

    init(pageSize: Int = 4096) {
        pool = .allocate(capacity: 1)
        init_amqp_pool(pool, pageSize)
    }

    deinit {
        empty_amqp_pool(pool)
        pool.deallocate()
    }

    /// Releases everything built since the last recycle (keeps the memory for reuse).
    func recycle() {
        recycle_amqp_pool(pool)
    }

    private func allocate(_ byteCount: Int) -> UnsafeMutableRawPointer {
        guard let pointer = amqp_pool_alloc(pool, byteCount) else {
            fatalError("librabbitmq pool allocation of \(byteCount) bytes failed (out of memory)")
        }
        return pointer
    }

    /// A copy of `string`'s UTF-8 bytes in the pool (not NUL-terminated, as AMQP short strings are).
    func bytes(_ string: String) -> amqp_bytes_t {
        var string = string
        return string.withUTF8 { utf8 in
            guard let base = utf8.baseAddress, utf8.count > 0 else { return amqp_empty_bytes }
            let copy = allocate(utf8.count)
            copy.copyMemory(from: base, byteCount: utf8.count)
            return amqp_bytes_t(len: utf8.count, bytes: copy)
        }
    }

    /// `table` as a librabbitmq field table in the pool.
    func table(_ table: AMQPTable) -> amqp_table_t {
        guard !table.isEmpty else { return amqp_table_t(num_entries: 0, entries: nil) }
        let entries = allocate(MemoryLayout<amqp_table_entry_t>.stride * table.count)
            .bindMemory(to: amqp_table_entry_t.self, capacity: table.count)
        var i = 0
        for (key, value) in table {
            (entries + i).initialize(to: amqp_table_entry_t(key: bytes(key), value: fieldValue(value)))
            i += 1
        }
        return amqp_table_t(num_entries: Int32(table.count), entries: entries)
    }

    /// `value` as a librabbitmq field value in the pool.
    func fieldValue(_ value: AMQPFieldValue) -> amqp_field_value_t {
        var field = amqp_field_value_t()
        switch value {
        case .string(let string):
            field.kind = FieldKind.utf8
            field.value.bytes = bytes(string)
        case .int(let int):
            field.kind = FieldKind.i64
            field.value.i64 = int
        case .bool(let bool):
            field.kind = FieldKind.boolean
            field.value.boolean = bool ? 1 : 0
        case .double(let double):
            field.kind = FieldKind.f64
            field.value.f64 = double
        case .table(let table):
            field.kind = FieldKind.table
            field.value.table = self.table(table)
        case .array(let array):
            field.kind = FieldKind.array
            if array.isEmpty {
                field.value.array = amqp_array_t(num_entries: 0, entries: nil)
            } else {
                let entries = allocate(MemoryLayout<amqp_field_value_t>.stride * array.count)
                    .bindMemory(to: amqp_field_value_t.self, capacity: array.count)
                for (i, element) in array.enumerated() {
                    (entries + i).initialize(to: fieldValue(element))
                }
                field.value.array = amqp_array_t(num_entries: Int32(array.count), entries: entries)
            }
        case .void:
            field.kind = FieldKind.void
        }
        return field
    }

    /// `properties` as librabbitmq basic properties in the pool.
    func basicProperties(_ properties: MessageProperties) -> amqp_basic_properties_t {
        var c = amqp_basic_properties_t()
        var flags: amqp_flags_t = CRABBITMQ_BASIC_DELIVERY_MODE_FLAG
        c.delivery_mode = properties.persistent ? 2 : 1
        if let value = properties.contentType {
            flags |= CRABBITMQ_BASIC_CONTENT_TYPE_FLAG
            c.content_type = bytes(value)
        }
        if let value = properties.contentEncoding {
            flags |= CRABBITMQ_BASIC_CONTENT_ENCODING_FLAG
            c.content_encoding = bytes(value)
        }
        if !properties.headers.isEmpty {
            flags |= CRABBITMQ_BASIC_HEADERS_FLAG
            c.headers = table(properties.headers)
        }
        if let value = properties.priority {
            flags |= CRABBITMQ_BASIC_PRIORITY_FLAG
            c.priority = value
        }
        if let value = properties.correlationID {
            flags |= CRABBITMQ_BASIC_CORRELATION_ID_FLAG
            c.correlation_id = bytes(value)
        }
        if let value = properties.replyTo {
            flags |= CRABBITMQ_BASIC_REPLY_TO_FLAG
            c.reply_to = bytes(value)
        }
        if let value = properties.expiration {
            flags |= CRABBITMQ_BASIC_EXPIRATION_FLAG
            c.expiration = bytes(value)
        }
        if let value = properties.messageID {
            flags |= CRABBITMQ_BASIC_MESSAGE_ID_FLAG
            c.message_id = bytes(value)
        }
        if let value = properties.timestamp {
            flags |= CRABBITMQ_BASIC_TIMESTAMP_FLAG
            // Dates copied from a delivery can be anything a publisher sent: clamped, never trapped.
            let seconds = value.timeIntervalSince1970.rounded(.down)
            c.timestamp = seconds.isFinite && seconds > 0 ? UInt64(exactly: seconds) ?? UInt64.max : 0
        }
        if let value = properties.type {
            flags |= CRABBITMQ_BASIC_TYPE_FLAG
            c.type = bytes(value)
        }
        if let value = properties.appID {
            flags |= CRABBITMQ_BASIC_APP_ID_FLAG
            c.app_id = bytes(value)
        }
        c._flags = flags
        return c
    }
}

/// The field kinds of `amqp_field_value_t`, as the byte the struct stores.
enum FieldKind {
    static let boolean = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_BOOLEAN.rawValue)
    static let i8 = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_I8.rawValue)
    static let u8 = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_U8.rawValue)
    static let i16 = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_I16.rawValue)
    static let u16 = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_U16.rawValue)
    static let i32 = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_I32.rawValue)
    static let u32 = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_U32.rawValue)
    static let i64 = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_I64.rawValue)
    static let u64 = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_U64.rawValue)
    static let f32 = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_F32.rawValue)
    static let f64 = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_F64.rawValue)
    static let decimal = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_DECIMAL.rawValue)
    static let utf8 = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_UTF8.rawValue)
    static let array = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_ARRAY.rawValue)
    static let timestamp = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_TIMESTAMP.rawValue)
    static let table = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_TABLE.rawValue)
    static let void = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_VOID.rawValue)
    static let bytes = UInt8(truncatingIfNeeded: AMQP_FIELD_KIND_BYTES.rawValue)
}

// MARK: - C to Swift

extension amqp_bytes_t {
    /// The bytes as a Swift string (invalid UTF-8 is repaired), copied.
    var string: String {
        String(decoding: UnsafeRawBufferPointer(start: bytes, count: len), as: UTF8.self)
    }
}

enum FieldTableDecoder {
    /// Tables and arrays nested deeper than this (headers come from any publisher) become
    /// `.void` instead of being copied, so the copy's recursion is bounded.
    static let maximumDepth = 16

    /// Copies a librabbitmq field table into Swift values.
    static func table(_ table: amqp_table_t, depth: Int = 0) -> AMQPTable {
        guard table.num_entries > 0, let entries = table.entries else { return [:] }
        var result = AMQPTable(minimumCapacity: Int(table.num_entries))
        for i in 0..<Int(table.num_entries) {
            result[entries[i].key.string] = value(entries[i].value, depth: depth)
        }
        return result
    }

    /// Copies a librabbitmq field value into a Swift value.
    static func value(_ field: amqp_field_value_t, depth: Int = 0) -> AMQPFieldValue {
        switch field.kind {
        case FieldKind.utf8, FieldKind.bytes: return .string(field.value.bytes.string)
        case FieldKind.boolean: return .bool(field.value.boolean != 0)
        case FieldKind.i8: return .int(Int64(field.value.i8))
        case FieldKind.u8: return .int(Int64(field.value.u8))
        case FieldKind.i16: return .int(Int64(field.value.i16))
        case FieldKind.u16: return .int(Int64(field.value.u16))
        case FieldKind.i32: return .int(Int64(field.value.i32))
        case FieldKind.u32: return .int(Int64(field.value.u32))
        case FieldKind.i64: return .int(field.value.i64)
        case FieldKind.u64, FieldKind.timestamp: return .int(Int64(clamping: field.value.u64))
        case FieldKind.f32: return .double(Double(field.value.f32))
        case FieldKind.f64: return .double(field.value.f64)
        case FieldKind.decimal:
            let decimal = field.value.decimal
            var divisor = 1.0
            for _ in 0..<decimal.decimals { divisor *= 10 }
            return .double(Double(Int32(bitPattern: decimal.value)) / divisor)
        case FieldKind.table:
            guard depth < maximumDepth else { return .void }
            return .table(table(field.value.table, depth: depth + 1))
        case FieldKind.array:
            guard depth < maximumDepth else { return .void }
            let array = field.value.array
            guard array.num_entries > 0, let entries = array.entries else { return .array([]) }
            return .array((0..<Int(array.num_entries)).map { value(entries[$0], depth: depth + 1) })
        default: return .void
        }
    }

    /// Copies librabbitmq basic properties into Swift values.
    static func properties(_ c: UnsafePointer<amqp_basic_properties_t>) -> MessageProperties {
        let p = c.pointee
        let flags = p._flags
        var result = MessageProperties()
        func has(_ flag: amqp_flags_t) -> Bool { flags & flag != 0 }
        if has(CRABBITMQ_BASIC_CONTENT_TYPE_FLAG) { result.contentType = p.content_type.string }
        if has(CRABBITMQ_BASIC_CONTENT_ENCODING_FLAG) { result.contentEncoding = p.content_encoding.string }
        if has(CRABBITMQ_BASIC_HEADERS_FLAG) { result.headers = table(p.headers) }
        result.persistent = has(CRABBITMQ_BASIC_DELIVERY_MODE_FLAG) && p.delivery_mode == 2
        if has(CRABBITMQ_BASIC_PRIORITY_FLAG) { result.priority = p.priority }
        if has(CRABBITMQ_BASIC_CORRELATION_ID_FLAG) { result.correlationID = p.correlation_id.string }
        if has(CRABBITMQ_BASIC_REPLY_TO_FLAG) { result.replyTo = p.reply_to.string }
        if has(CRABBITMQ_BASIC_EXPIRATION_FLAG) { result.expiration = p.expiration.string }
        if has(CRABBITMQ_BASIC_MESSAGE_ID_FLAG) { result.messageID = p.message_id.string }
        if has(CRABBITMQ_BASIC_TIMESTAMP_FLAG) {
            result.timestamp = Date(timeIntervalSince1970: Double(p.timestamp))
        }
        if has(CRABBITMQ_BASIC_TYPE_FLAG) { result.type = p.type.string }
        if has(CRABBITMQ_BASIC_APP_ID_FLAG) { result.appID = p.app_id.string }
        return result
    }
}

// MARK: - Wire round trip (tests)

enum FieldTableCodec {
    /// Encodes `table` as librabbitmq would send it, decodes the bytes with librabbitmq, and returns
    /// the result: Swift → `amqp_table_t` → wire → `amqp_table_t` → Swift.
    static func wireRoundTrip(_ table: AMQPTable) throws(AMQPError) -> AMQPTable {
        let pool = ScratchPool()
        var encodedTable = pool.table(table)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        let status = buffer.withUnsafeMutableBytes { raw in
            amqp_encode_table(amqp_bytes_t(len: raw.count, bytes: raw.baseAddress), &encodedTable, &offset)
        }
        guard status == AMQP_STATUS_OK.rawValue else {
            throw AMQPError(kind: .protocolError, message: "encoding a field table failed: \(statusText(status))")
        }
        let decodePool = ScratchPool()
        return try decodePool.decodeWire(Array(buffer[..<offset]))
    }
}

extension ScratchPool {
    fileprivate func decodeWire(_ wire: [UInt8]) throws(AMQPError) -> AMQPTable {
        var output = amqp_table_t()
        var offset = 0
        let status = withPool { pool in
            wire.withUnsafeBytes { raw in
                amqp_decode_table(
                    amqp_bytes_t(len: raw.count, bytes: UnsafeMutableRawPointer(mutating: raw.baseAddress)),
                    pool,
                    &output,
                    &offset
                )
            }
        }
        guard status == AMQP_STATUS_OK.rawValue else {
            throw AMQPError(kind: .protocolError, message: "decoding a field table failed: \(statusText(status))")
        }
        return FieldTableDecoder.table(output)
    }

    fileprivate func withPool<R>(_ body: (UnsafeMutablePointer<amqp_pool_t>) -> R) -> R {
        body(pool)
    }
}

/// librabbitmq's text for a status code.
func statusText(_ status: Int32) -> String {
    guard let text = amqp_error_string2(status) else { return "status \(status)" }
    return String(cString: text)
}
