import AstroDomain
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTPTypes
import Prometheus
import Synchronization
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// Abuse limits (issue 16, item 7): token buckets per user, per client address, and a stricter one
// per address for registration. The buckets live in this process: with N replicas behind the
// ingress a client gets up to N times the configured rates (README, "Rate limits").

/// A 128-bit key of a bucket: an IP address (IPv4 as an IPv4-mapped IPv6 address) or a user id.
public struct BucketKey: Hashable, Sendable, CustomStringConvertible {
    /// The first and last 64 bits, big-endian.
    public var high: UInt64
    public var low: UInt64

    /// A key from its two halves.
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The key of a user's bucket.
    public init(user: UserID) {
        let bytes = withUnsafeBytes(of: user.uuid.uuid) { Array($0) }
        self.init(bytes: bytes)
    }

    init(bytes: [UInt8]) {
        var high: UInt64 = 0
        var low: UInt64 = 0
        for index in 0..<8 { high = high << 8 | UInt64(bytes[index]) }
        for index in 8..<16 { low = low << 8 | UInt64(bytes[index]) }
        self.init(high: high, low: low)
    }

    /// An IPv4 (`192.0.2.1`) or IPv6 (`2001:db8::1`) address in its textual form; nil for
    /// anything else (host names, zone ids, ports, over 45 characters).
    public init?(address text: some StringProtocol) {
        // INET6_ADDRSTRLEN is 46 with the terminator; anything longer is not an address.
        guard !text.isEmpty, text.utf8.count <= 45,
            text.utf8.allSatisfy({ byte in
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
                    UInt8(ascii: "A")...UInt8(ascii: "F"), UInt8(ascii: "."), UInt8(ascii: ":"):
                    true
                default: false
                }
            })
        else { return nil }
        var bytes = [UInt8](repeating: 0, count: 16)
        let string = String(text)
        if string.contains(":") {
            let parsed = bytes.withUnsafeMutableBytes { inet_pton(AF_INET6, string, $0.baseAddress) }
            guard parsed == 1 else { return nil }
        } else {
            var four = [UInt8](repeating: 0, count: 4)
            let parsed = four.withUnsafeMutableBytes { inet_pton(AF_INET, string, $0.baseAddress) }
            guard parsed == 1 else { return nil }
            bytes[10] = 0xFF
            bytes[11] = 0xFF
            bytes.replaceSubrange(12..<16, with: four)
        }
        self.init(bytes: bytes)
    }

    /// Whether this is an IPv4 address (IPv4-mapped).
    public var isIPv4: Bool { high == 0 && low >> 32 == 0xFFFF }

    /// The key a client address is limited under: an IPv4 address itself, an IPv6 address's /64
    /// (one subscriber usually holds a whole /64, and could otherwise rotate through it).
    public var addressBucket: BucketKey {
        isIPv4 ? self : BucketKey(high: high, low: 0)
    }

    /// Hexadecimal halves, for logs.
    public var description: String {
        String(high, radix: 16) + ":" + String(low, radix: 16)
    }
}

/// An address range (`10.0.0.0/8`, `2001:db8::/32`, or a single address).
public struct AddressRange: Hashable, Sendable {
    /// The network address, masked.
    public var network: BucketKey
    /// Prefix length over the 128-bit form (an IPv4 /8 is /104 here).
    public var prefixLength: Int

    /// Parses `address/prefix` or a bare address; nil for anything else.
    public init?(_ text: some StringProtocol) {
        let parts = String(text).split(separator: "/", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let address = BucketKey(address: parts[0]) else { return nil }
        let width = address.isIPv4 ? 32 : 128
        var length = width
        if parts.count == 2 {
            guard (1...3).contains(parts[1].utf8.count), let value = Int(parts[1]), (0...width).contains(value) else {
                return nil
            }
            length = value
        }
        prefixLength = length + (128 - width)
        network = Self.masked(address, prefixLength)
    }

    /// Whether `address` lies in the range.
    public func contains(_ address: BucketKey) -> Bool {
        Self.masked(address, prefixLength) == network
    }

    static func masked(_ key: BucketKey, _ length: Int) -> BucketKey {
        let highMask: UInt64 = length >= 64 ? ~0 : (length <= 0 ? 0 : ~0 << UInt64(64 - length))
        let lowMask: UInt64 = length <= 64 ? 0 : (length >= 128 ? ~0 : ~0 << UInt64(128 - length))
        return BucketKey(high: key.high & highMask, low: key.low & lowMask)
    }
}

/// Who the client is: the socket's peer, or — only when the peer is one of `TRUSTED_PROXIES` (the
/// ingress) — the address that proxy recorded in `X-Forwarded-For`.
public struct ClientAddressResolver: Sendable {
    /// The proxies whose `X-Forwarded-For` is believed.
    public var trustedProxies: [AddressRange]
    /// `X-Forwarded-For` longer than this (all its fields together) is ignored.
    public static let maxForwardedBytes = 2048
    /// At most this many entries are walked from the right.
    public static let maxForwardedEntries = 16

    /// A resolver trusting `trustedProxies`.
    public init(trustedProxies: [AddressRange]) {
        self.trustedProxies = trustedProxies
    }

    func isTrusted(_ address: BucketKey) -> Bool {
        trustedProxies.contains { $0.contains(address) }
    }

    /// The client's address.
    ///
    /// With a trusted peer, `X-Forwarded-For` is read from the right (each proxy appends the
    /// address it saw), skipping trusted proxies; the first untrusted address is the client. A
    /// malformed entry ends the walk: the last address known good (a trusted proxy) stands, so
    /// a client cannot pick its own key by writing garbage. Anything the client sent left of its
    /// own address is never read.
    /// - Parameters:
    ///   - peer: the socket's peer (nil when unknown).
    ///   - forwardedFor: the values of every `X-Forwarded-For` field, in order.
    public func client(peer: BucketKey?, forwardedFor: [String]) -> BucketKey? {
        guard let peer, isTrusted(peer), !forwardedFor.isEmpty else { return peer }
        guard forwardedFor.reduce(0, { $0 + $1.utf8.count }) <= Self.maxForwardedBytes else { return peer }
        let entries = forwardedFor.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
        var client = peer
        for entry in entries.reversed().prefix(Self.maxForwardedEntries) {
            guard let address = Self.address(entry) else { return client }
            client = address
            if !isTrusted(address) { return address }
        }
        return client
    }

    /// One `X-Forwarded-For` entry: an address, `[IPv6]`, `[IPv6]:port` or `IPv4:port`.
    static func address(_ entry: Substring) -> BucketKey? {
        var text = entry.trimmingCharacters(in: .whitespaces)[...]
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.count > 1 && rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isASCIIDigit))
            else {
                return nil
            }
            text = text[text.index(after: text.startIndex)..<close]
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            let port = text[text.index(after: colon)...]
            guard !port.isEmpty, port.allSatisfy(\.isASCIIDigit) else { return nil }
            text = text[..<colon]
        }
        return BucketKey(address: text)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

/// A fixed-capacity table of token buckets, one per key, evicting the least recently used bucket
/// when full: a flood of distinct keys (addresses, users) costs at most `capacity` entries.
///
/// Memory: at most `bytesPerEntry` (93) bytes per entry — the entry (key, token count, time of
/// its last use, two list links: 40 bytes) and its share of the index (key and slot number, 20
/// bytes, in a power-of-two table at most 3/4 and at least 3/8 full: 27 to 53 bytes) — so under
/// 2 MB per table at the default 20,000 entries, under 6 MB for the three tables. Both arrays are
/// reserved once, at the first use, and never grow past `capacity`.
///
/// Evicting a bucket forgets what its key spent: a bucket that was idle long enough to refill
/// is the same as none, and a drained one starts full again — eviction can only let a key
/// through earlier, never refuse one. The least recently used bucket is the idlest, so a key
/// being limited right now is the last to go.
public final class TokenBucketTable: Sendable {
    /// Tokens per second, and the most a bucket holds (at least 1).
    public struct Limit: Sendable, Hashable {
        public var ratePerSecond: Double
        public var burst: Double

        /// A refill rate (> 0) and a burst (≥ 1).
        public init(ratePerSecond: Double, burst: Double) {
            self.ratePerSecond = ratePerSecond
            self.burst = max(1, burst)
        }
    }

    /// The outcome of taking a token.
    public enum Decision: Sendable, Hashable {
        case allowed
        /// No token: the whole seconds until one is there (at least 1), for `Retry-After`.
        case limited(retryAfter: Int)
    }

    struct Entry {
        var key: BucketKey
        var tokens: Double
        var updated: Double
        var newer: Int32
        var older: Int32
    }

    struct State {
        var index: [BucketKey: Int32] = [:]
        var entries: [Entry] = []
        var newest: Int32 = -1
        var oldest: Int32 = -1
        var evictions = 0
    }

    /// The limit every bucket of the table follows.
    public let limit: Limit
    /// The most buckets kept.
    public let capacity: Int
    private let state = Mutex(State())

    /// The most bytes an entry costs (see the type's comment): the entry, and its index slot at
    /// the index's lowest load (3/8).
    public static var bytesPerEntry: Int {
        MemoryLayout<Entry>.stride + (MemoryLayout<BucketKey>.stride + MemoryLayout<Int32>.stride) * 8 / 3
    }

    /// An empty table.
    /// - Parameters:
    ///   - limit: the rate and burst of every bucket.
    ///   - capacity: the most buckets kept (at least 1).
    public init(limit: Limit, capacity: Int) {
        self.limit = limit
        self.capacity = max(1, capacity)
    }

    /// The number of buckets held.
    public var count: Int { state.withLock { $0.entries.count } }
    /// How many buckets were evicted to make room.
    public var evictions: Int { state.withLock { $0.evictions } }
    /// Whether `key` has a bucket.
    public func contains(_ key: BucketKey) -> Bool { state.withLock { $0.index[key] != nil } }

    /// Takes a token from `key`'s bucket (a new bucket starts full).
    /// - Parameter now: monotonic seconds; a clock going backwards refills nothing.
    public func take(_ key: BucketKey, now: Double) -> Decision {
        let limit = self.limit
        let capacity = self.capacity
        return state.withLock { state in
            if let slot = state.index[key] {
                var entry = state.entries[Int(slot)]
                let elapsed = max(0, now - entry.updated)
                entry.tokens = min(limit.burst, entry.tokens + elapsed * limit.ratePerSecond)
                entry.updated = max(entry.updated, now)
                let decision: Decision
                // A hair of tolerance: refills computed from time differences land a rounding
                // error short of a whole token.
                if entry.tokens >= 1 - 1e-9 {
                    entry.tokens = max(0, entry.tokens - 1)
                    decision = .allowed
                } else {
                    let wait = ((1 - entry.tokens) / limit.ratePerSecond - 1e-9).rounded(.up)
                    decision = .limited(retryAfter: max(1, Int(min(wait, 86_400))))
                }
                state.entries[Int(slot)].tokens = entry.tokens
                state.entries[Int(slot)].updated = entry.updated
                Self.moveToFront(slot, &state)
                return decision
            }
            let entry = Entry(key: key, tokens: limit.burst - 1, updated: now, newer: -1, older: -1)
            let slot: Int32
            if state.entries.count < capacity {
                if state.entries.isEmpty {
                    state.entries.reserveCapacity(capacity)
                    state.index.reserveCapacity(capacity)
                }
                slot = Int32(state.entries.count)
                state.entries.append(entry)
            } else {
                slot = state.oldest
                Self.unlink(slot, &state)
                state.index[state.entries[Int(slot)].key] = nil
                state.entries[Int(slot)] = entry
                state.evictions += 1
            }
            state.index[key] = slot
            Self.pushFront(slot, &state)
            return .allowed
        }
    }

    private static func unlink(_ slot: Int32, _ state: inout State) {
        let newer = state.entries[Int(slot)].newer
        let older = state.entries[Int(slot)].older
        if newer >= 0 { state.entries[Int(newer)].older = older } else { state.newest = older }
        if older >= 0 { state.entries[Int(older)].newer = newer } else { state.oldest = newer }
    }

    private static func pushFront(_ slot: Int32, _ state: inout State) {
        state.entries[Int(slot)].newer = -1
        state.entries[Int(slot)].older = state.newest
        if state.newest >= 0 { state.entries[Int(state.newest)].newer = slot }
        state.newest = slot
        if state.oldest < 0 { state.oldest = slot }
    }

    private static func moveToFront(_ slot: Int32, _ state: inout State) {
        guard state.newest != slot else { return }
        unlink(slot, &state)
        pushFront(slot, &state)
    }
}

/// The rate limits' settings (`RATE_LIMIT_*`, `TRUSTED_PROXIES`); a nil limit is off.
public struct RateLimitConfiguration: Sendable, Hashable {
    /// Requests per user (authenticated routes).
    public var user: TokenBucketTable.Limit? = .init(ratePerSecond: 10, burst: 40)
    /// Requests per client address (every `/v1/` route).
    public var address: TokenBucketTable.Limit? = .init(ratePerSecond: 50, burst: 200)
    /// Registrations (`POST /v1/devices`) per client address.
    public var registration: TokenBucketTable.Limit? = .init(ratePerSecond: 10.0 / 60, burst: 20)
    /// App Store notifications (`POST /v1/appstore/notifications`) per client address: Apple
    /// sends a few a minute per app and retries a refusal, so a low limit delays nothing that
    /// matters and keeps a forger from spending the gateway's CPU on signature checks.
    public var appStore: TokenBucketTable.Limit? = .init(ratePerSecond: 1, burst: 60)
    /// The most buckets each table keeps.
    public var tableSize = 20_000
    /// Proxies whose `X-Forwarded-For` is believed.
    public var trustedProxies: [AddressRange] = []

    /// Defaults.
    public init() {}

    /// The settings, with their defaults (the README's table mirrors them).
    public static let variables: [ConfigurationVariable] = [
        .init(
            name: "RATE_LIMIT_USER_PER_SECOND",
            defaultValue: "10",
            meaning: "requests per second per user; 0 turns it off"
        ),
        .init(name: "RATE_LIMIT_USER_BURST", defaultValue: "40", meaning: "a user's burst"),
        .init(
            name: "RATE_LIMIT_IP_PER_SECOND",
            defaultValue: "50",
            meaning: "requests per second per client address (IPv6: per /64) on /v1; 0 turns it off"
        ),
        .init(name: "RATE_LIMIT_IP_BURST", defaultValue: "200", meaning: "an address's burst"),
        .init(
            name: "RATE_LIMIT_REGISTER_PER_MINUTE",
            defaultValue: "10",
            meaning: "POST /v1/devices per minute per client address; 0 turns it off"
        ),
        .init(name: "RATE_LIMIT_REGISTER_BURST", defaultValue: "20", meaning: "an address's registration burst"),
        .init(
            name: "RATE_LIMIT_APPSTORE_PER_MINUTE",
            defaultValue: "60",
            meaning:
                "POST /v1/appstore/notifications per minute per client address (Apple retries a 429); 0 turns it off"
        ),
        .init(name: "RATE_LIMIT_APPSTORE_BURST", defaultValue: "60", meaning: "an address's notification burst"),
        .init(
            name: "RATE_LIMIT_TABLE_SIZE",
            defaultValue: "20000",
            meaning: "buckets kept per table (users, addresses, registrations), least recently used evicted"
        ),
        .init(
            name: "TRUSTED_PROXIES",
            defaultValue: "none",
            meaning: "comma-separated CIDRs of the ingress; only their X-Forwarded-For is believed"
        ),
    ]

    /// Reads the settings.
    /// - Throws: `ConfigurationError` naming the variable at fault.
    public static func fromEnvironment(
        _ environment: [String: String]
    ) throws(ConfigurationError) -> RateLimitConfiguration {
        let reader = EnvironmentReader(environment)
        func limit(
            _ rateName: String,
            _ rate: Double,
            perMinute: Bool,
            _ burstName: String,
            _ burst: Double
        )
            throws(ConfigurationError) -> TokenBucketTable.Limit?
        {
            let perUnit = try reader.number(rateName, default: rate, range: 0...1_000_000)
            let burst = try reader.number(burstName, default: burst, range: 1...1_000_000)
            guard perUnit > 0 else { return nil }
            return .init(ratePerSecond: perMinute ? perUnit / 60 : perUnit, burst: burst)
        }
        var configuration = RateLimitConfiguration()
        configuration.user = try limit("RATE_LIMIT_USER_PER_SECOND", 10, perMinute: false, "RATE_LIMIT_USER_BURST", 40)
        configuration.address = try limit("RATE_LIMIT_IP_PER_SECOND", 50, perMinute: false, "RATE_LIMIT_IP_BURST", 200)
        configuration.registration = try limit(
            "RATE_LIMIT_REGISTER_PER_MINUTE",
            10,
            perMinute: true,
            "RATE_LIMIT_REGISTER_BURST",
            20
        )
        configuration.appStore = try limit(
            "RATE_LIMIT_APPSTORE_PER_MINUTE",
            60,
            perMinute: true,
            "RATE_LIMIT_APPSTORE_BURST",
            60
        )
        configuration.tableSize = try reader.int("RATE_LIMIT_TABLE_SIZE", default: 20_000, range: 1000...1_000_000)
        if let list = reader.value("TRUSTED_PROXIES") {
            guard list.utf8.count <= 4096 else {
                throw ConfigurationError(variable: "TRUSTED_PROXIES", problem: "longer than 4096 bytes")
            }
            let items = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
            guard items.count <= 64 else {
                throw ConfigurationError(variable: "TRUSTED_PROXIES", problem: "more than 64 ranges")
            }
            for item in items {
                guard let range = AddressRange(item) else {
                    throw ConfigurationError(
                        variable: "TRUSTED_PROXIES",
                        problem: "\(item.debugDescription) is not an address or CIDR (10.0.0.0/8, fd00::/8)"
                    )
                }
                configuration.trustedProxies.append(range)
            }
        }
        return configuration
    }
}

/// The gateway's rate limits: one table per limit, and the metrics of what they refused.
public final class RateLimiter: Sendable {
    let users: TokenBucketTable?
    let addresses: TokenBucketTable?
    let registrations: TokenBucketTable?
    let appStoreNotifications: TokenBucketTable?
    /// How the client's address is found.
    public let resolver: ClientAddressResolver
    let metrics: GatewayMetrics
    private let start = ContinuousClock.now

    /// Tables for the configured limits.
    public init(configuration: RateLimitConfiguration, metrics: GatewayMetrics) {
        users = configuration.user.map { TokenBucketTable(limit: $0, capacity: configuration.tableSize) }
        addresses = configuration.address.map { TokenBucketTable(limit: $0, capacity: configuration.tableSize) }
        registrations = configuration.registration.map {
            TokenBucketTable(limit: $0, capacity: configuration.tableSize)
        }
        appStoreNotifications = configuration.appStore.map {
            TokenBucketTable(limit: $0, capacity: configuration.tableSize)
        }
        resolver = ClientAddressResolver(trustedProxies: configuration.trustedProxies)
        self.metrics = metrics
    }

    private var now: Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// Spends one of the user's requests.
    /// - Throws: `Problem` 429 `rate-limited` with `Retry-After`.
    public func check(user: UserID) throws(Problem) {
        guard let users else { return }
        if case .limited(let seconds) = users.take(BucketKey(user: user), now: now) {
            throw refusal("user", seconds, "this user's")
        }
    }

    /// Spends one of the address's requests, and one of its registrations when `registration`.
    /// - Parameter address: the client (nil: unknown, all such clients share one bucket).
    /// - Throws: `Problem` 429 `rate-limited` with `Retry-After`.
    public func check(address: BucketKey?, registration: Bool) throws(Problem) {
        let key = Self.bucket(of: address)
        let now = self.now
        if let addresses, case .limited(let seconds) = addresses.take(key, now: now) {
            throw refusal("ip", seconds, "this address's")
        }
        if registration, let registrations, case .limited(let seconds) = registrations.take(key, now: now) {
            throw refusal("register", seconds, "this address's registration")
        }
    }

    /// The client's address (the connection's peer, and `X-Forwarded-For` from a trusted
    /// proxy): what every per-address limit is keyed by.
    func client(of request: Request, context: some RemoteAddressRequestContext) -> BucketKey? {
        let peer = context.remoteAddress?.ipAddress.flatMap { BucketKey(address: $0) }
        return resolver.client(peer: peer, forwardedFor: request.headers[values: RateLimitMiddleware.forwardedFor])
    }

    /// The key a client address is limited under: the address (IPv4) or its /64 (IPv6); every
    /// unknown client shares one key.
    static func bucket(of address: BucketKey?) -> BucketKey {
        address?.addressBucket ?? BucketKey(high: 0, low: 0)
    }

    /// The bucket of a request's client (`client(of:)`, `bucket(of:)`), as the event streams'
    /// per-address limit counts it.
    func clientBucket(of request: Request, context: some RemoteAddressRequestContext) -> BucketKey {
        Self.bucket(of: client(of: request, context: context))
    }

    /// Spends one of the address's App Store notifications (after its general per-address request).
    /// - Throws: `Problem` 429 `rate-limited` with `Retry-After` (limit `appstore`).
    public func check(appStoreNotificationFrom address: BucketKey?) throws(Problem) {
        let key = Self.bucket(of: address)
        if let appStoreNotifications, case .limited(let seconds) = appStoreNotifications.take(key, now: now) {
            throw refusal("appstore", seconds, "this address's App Store notification")
        }
    }

    private func refusal(_ limit: String, _ seconds: Int, _ whose: String) -> Problem {
        metrics.recordRateLimited(limit: limit)
        return Problem(
            .rateLimited,
            "\(whose) request rate is over its limit; retry after \(seconds) s",
            retryAfter: seconds
        )
    }
}

extension GatewayMetrics {
    /// Counts one request refused by a rate limit (`user`, `ip`, `register`, `appstore`;
    /// `streams-ip` for an event stream over its address's maximum).
    public func recordRateLimited(limit: String) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "gateway",
                metricName: "rate_limited",
                unitName: "total",
                helpText: "Requests refused with 429, by limit (user, ip, register, appstore, streams-ip)"
            ),
            labels: [("limit", limit)]
        ).increment()
    }
}

/// Applies the per-address limits to every `/v1/` request (the per-user limit is applied where
/// the access token is verified, `Authenticator`, so a token is verified once and a
/// forged token cannot spend another user's budget). Probes and the document are never limited
/// (`/metrics` has a port of its own, `MetricsServer`).
struct RateLimitMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    static let forwardedFor = HTTPFields.Element.Name("X-Forwarded-For")!
    /// Routes no limit applies to: probes and the document.
    static let unlimited: Set<String> = ["/healthz", "/readyz", "/openapi.yaml"]
    let limiter: RateLimiter

    func handle(
        _ request: Request,
        context: GatewayRequestContext,
        next: (Request, GatewayRequestContext) async throws -> Response
    ) async throws -> Response {
        // By the route the router matched, not the raw path: the router ignores empty segments
        // and a trailing slash, so `//v1/devices` or `/v1/devices/` must count as `/v1/devices`.
        // A request no route matched is limited too.
        let route = context.endpointPath
        if let route, Self.unlimited.contains(route) { return try await next(request, context) }
        let client = limiter.client(of: request, context: context)
        do {
            try limiter.check(
                address: client,
                registration: request.method == .post
                    && (route == "/v1/devices" || route == "/v1/devices/challenge")
            )
            if request.method == .post, route == "/v1/appstore/notifications" {
                try limiter.check(appStoreNotificationFrom: client)
            }
        } catch {
            context.logger.debug("rate limited", metadata: ["client.key": "\(client?.description ?? "unknown")"])
            throw error
        }
        return try await next(request, context)
    }
}
