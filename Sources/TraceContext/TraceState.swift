/// The `tracestate` header: vendors' key=value entries, in order, validated by the W3C Trace
/// Context rules and bounded.
///
/// Bounds: a header value longer than `maxInputLength` is not read; more than `maxEntries`
/// entries, a malformed entry or a key twice make the whole header invalid (it is dropped, as
/// the specification says); the entries kept are cut from the end until the value fits in
/// `maxLength` characters, so what is passed on never grows.
public struct TraceState: Sendable, Hashable {
    /// The entries, first is the most recent vendor's.
    public private(set) var entries: [(key: String, value: String)]

    /// The most entries the specification allows.
    public static let maxEntries = 32
    /// The longest value passed on (the specification asks to propagate at least 512 characters).
    public static let maxLength = 512
    /// The longest header value read at all.
    public static let maxInputLength = 8_192

    public init() { entries = [] }

    /// Reads a header value; nil for an invalid one (an empty or absent value is an empty state).
    public init?(parsing header: String?) {
        entries = []
        guard let header else { return }
        guard header.utf8.count <= Self.maxInputLength else { return nil }
        var seen = Set<String>()
        for member in header.split(separator: ",", omittingEmptySubsequences: false) {
            let trimmed = member.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }
            let text = String(trimmed.reversed())
            // Empty members (", ,") are allowed and skipped.
            if text.isEmpty { continue }
            guard let equals = text.firstIndex(of: "=") else { return nil }
            let key = String(text[..<equals])
            let value = String(text[text.index(after: equals)...])
            guard Self.isValidKey(key), Self.isValidValue(value), seen.insert(key).inserted else { return nil }
            entries.append((key: key, value: value))
            guard entries.count <= Self.maxEntries else { return nil }
        }
        while !entries.isEmpty, headerValue.utf8.count > Self.maxLength { entries.removeLast() }
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// The entries joined as the header carries them.
    public var headerValue: String { entries.map { "\($0.key)=\($0.value)" }.joined(separator: ",") }

    public static func == (lhs: TraceState, rhs: TraceState) -> Bool { lhs.headerValue == rhs.headerValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(headerValue) }

    /// `simple-key` (`[a-z][a-z0-9_*/-]{0,255}`) or `tenant@system` (`[a-z0-9][a-z0-9_*/-]{0,240}`
    /// `@` `[a-z][a-z0-9_*/-]{0,13}`).
    static func isValidKey(_ key: String) -> Bool {
        let bytes = Array(key.utf8)
        func allowed(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            case UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "*"), UInt8(ascii: "/"): true
            default: false
            }
        }
        func isLower(_ byte: UInt8) -> Bool { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) }
        func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        if let at = bytes.firstIndex(of: UInt8(ascii: "@")) {
            let tenant = bytes[..<at]
            let system = bytes[(at + 1)...]
            guard let tenantFirst = tenant.first, isLower(tenantFirst) || isDigit(tenantFirst), tenant.count <= 241,
                let systemFirst = system.first, isLower(systemFirst), system.count <= 14
            else { return false }
            return tenant.allSatisfy(allowed) && system.allSatisfy(allowed)
        }
        guard let first = bytes.first, isLower(first), bytes.count <= 256 else { return false }
        return bytes.allSatisfy(allowed)
    }

    /// 1–256 printable ASCII characters other than `,` and `=`, not ending in a space.
    static func isValidValue(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard !bytes.isEmpty, bytes.count <= 256, bytes.last != UInt8(ascii: " ") else { return false }
        return bytes.allSatisfy { (0x20...0x7e).contains($0) && $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: "=") }
    }
}
