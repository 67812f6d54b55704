/// The identity of one span in a W3C Trace Context trace: what the `traceparent` and `tracestate`
/// headers carry between services (HTTP requests, AMQP messages).
///
/// Parsing is strict and never traps: a header that is not exactly what the specification allows
/// gives `nil`, and the receiver starts a new trace instead. Nothing here does I/O.
public struct TraceContext: Sendable, Hashable {
    /// The trace every span of one request shares (16 bytes, never all zero).
    public var traceID: TraceID
    /// This span's id (8 bytes, never all zero).
    public var spanID: SpanID
    /// The trace flags byte; bit 0 is `sampled`.
    public var flags: UInt8
    /// The vendors' `tracestate` entries, validated and bounded (`TraceState`).
    public var traceState: TraceState

    public init(traceID: TraceID, spanID: SpanID, flags: UInt8 = 1, traceState: TraceState = TraceState()) {
        self.traceID = traceID
        self.spanID = spanID
        self.flags = flags
        self.traceState = traceState
    }

    /// Whether the caller may have recorded its span (flag bit 0).
    public var sampled: Bool {
        get { flags & 1 == 1 }
        set { flags = newValue ? flags | 1 : flags & ~1 }
    }

    /// A new trace: random trace and span ids, no `tracestate`.
    public static func newRoot(sampled: Bool) -> TraceContext {
        TraceContext(traceID: .random(), spanID: .random(), flags: sampled ? 1 : 0)
    }

    /// A span inside this one's trace: the same trace id, flags and `tracestate`, a new span id.
    public func child() -> TraceContext {
        TraceContext(traceID: traceID, spanID: .random(), flags: flags, traceState: traceState)
    }

    /// The `traceparent` header value: `00-<trace id>-<span id>-<flags>`, lowercase hex.
    public var traceparent: String {
        "00-\(traceID.hex)-\(spanID.hex)-\(Hex.byte(flags))"
    }

    /// The `tracestate` header value, or nil when there are no entries (the header is then left out).
    public var tracestate: String? { traceState.isEmpty ? nil : traceState.headerValue }

    /// The longest `traceparent` value read; longer ones are refused unread (a future version may
    /// append fields, but not kilobytes of them).
    public static let maxTraceparentLength = 512

    /// Reads a `traceparent` header (and its `tracestate`), by the W3C Trace Context rules.
    ///
    /// Version `00` must be exactly `00-<32 hex>-<16 hex>-<2 hex>`, lowercase; a later version may
    /// add fields after a `-`, which are ignored; version `ff` is invalid. All-zero trace or span
    /// ids are invalid. A `tracestate` that breaks its rules is dropped, the `traceparent` kept.
    /// - Returns: the caller's span, or nil when `traceparent` is absent or invalid (start a new
    ///   trace then; its `tracestate` is not read).
    public static func parse(traceparent: String?, tracestate: String? = nil) -> TraceContext? {
        guard let traceparent, traceparent.utf8.count <= maxTraceparentLength else { return nil }
        let bytes = Array(traceparent.utf8)
        guard bytes.count >= 55 else { return nil }
        guard let version = Hex.parseByte(bytes[0], bytes[1]), version != 0xff, bytes[2] == UInt8(ascii: "-")
        else { return nil }
        if version == 0 {
            guard bytes.count == 55 else { return nil }
        } else if bytes.count > 55 {
            // A later version's extra fields must start with a separator.
            guard bytes[55] == UInt8(ascii: "-") else { return nil }
        }
        guard bytes[35] == UInt8(ascii: "-"), bytes[52] == UInt8(ascii: "-"),
            let high = Hex.parseUInt64(bytes[3..<19]),
            let low = Hex.parseUInt64(bytes[19..<35]),
            let span = Hex.parseUInt64(bytes[36..<52]),
            let flags = Hex.parseByte(bytes[53], bytes[54])
        else { return nil }
        guard high != 0 || low != 0, span != 0 else { return nil }
        // Version 00 defines only the sampled bit; other bits of a later version are not ours to keep.
        let kept = version == 0 ? flags : flags & 1
        return TraceContext(
            traceID: TraceID(high: high, low: low),
            spanID: SpanID(span),
            flags: kept,
            traceState: TraceState(parsing: tracestate) ?? TraceState()
        )
    }
}

/// A 16-byte trace id.
public struct TraceID: Sendable, Hashable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A random id, never all zero.
    public static func random() -> TraceID {
        var generator = SystemRandomNumberGenerator()
        while true {
            let id = TraceID(high: generator.next(), low: generator.next())
            if id.high != 0 || id.low != 0 { return id }
        }
    }

    /// 32 lowercase hex digits.
    public var hex: String { Hex.uint64(high) + Hex.uint64(low) }
    public var description: String { hex }
}

/// An 8-byte span id.
public struct SpanID: Sendable, Hashable, CustomStringConvertible {
    public var value: UInt64

    public init(_ value: UInt64) { self.value = value }

    /// A random id, never zero.
    public static func random() -> SpanID {
        var generator = SystemRandomNumberGenerator()
        while true {
            let value: UInt64 = generator.next()
            if value != 0 { return SpanID(value) }
        }
    }

    /// 16 lowercase hex digits.
    public var hex: String { Hex.uint64(value) }
    public var description: String { hex }
}

/// Lowercase hexadecimal, both ways, without Foundation's formatting.
enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    static func uint64(_ value: UInt64) -> String {
        String(unsafeUninitializedCapacity: 16) { buffer in
            for index in 0..<16 {
                buffer[index] = digits[Int((value >> UInt64(60 - index * 4)) & 0xf)]
            }
            return 16
        }
    }

    static func byte(_ value: UInt8) -> String {
        String(decoding: [digits[Int(value >> 4)], digits[Int(value & 0xf)]], as: UTF8.self)
    }

    /// One lowercase hex digit's value; uppercase is not allowed by the specification.
    static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    static func parseByte(_ first: UInt8, _ second: UInt8) -> UInt8? {
        guard let high = nibble(first), let low = nibble(second) else { return nil }
        return high << 4 | low
    }

    /// 16 lowercase hex digits as a number.
    static func parseUInt64(_ characters: ArraySlice<UInt8>) -> UInt64? {
        guard characters.count == 16 else { return nil }
        var value: UInt64 = 0
        for character in characters {
            guard let digit = nibble(character) else { return nil }
            value = value << 4 | UInt64(digit)
        }
        return value
    }
}
