import AstroDomain
import Foundation
import Testing
import WorkerRuntime

@testable import Gateway

@Suite("Gateway rate limits")
struct RateLimitTests {
    static func key(_ number: UInt64) -> BucketKey { BucketKey(high: 1, low: number) }

    @Test func aBucketAllowsItsBurstThenRefillsAtItsRate() {
        let table = TokenBucketTable(limit: .init(ratePerSecond: 2, burst: 3), capacity: 10)
        let key = Self.key(1)
        for _ in 0..<3 { #expect(table.take(key, now: 100) == .allowed) }
        // Empty: one token takes half a second at 2/s, rounded up to whole seconds.
        #expect(table.take(key, now: 100) == .limited(retryAfter: 1))
        #expect(table.take(key, now: 100.4) == .limited(retryAfter: 1))
        #expect(table.take(key, now: 100.5) == .allowed)
        #expect(table.take(key, now: 100.5) == .limited(retryAfter: 1))
        // A long pause refills to the burst, never beyond.
        for _ in 0..<3 { #expect(table.take(key, now: 1000) == .allowed) }
        #expect(table.take(key, now: 1000) != .allowed)
    }

    @Test func retryAfterIsTheWholeSecondsUntilTheNextToken() {
        // 10 per minute: a token every 6 s.
        let table = TokenBucketTable(limit: .init(ratePerSecond: 10.0 / 60, burst: 1), capacity: 10)
        let key = Self.key(2)
        #expect(table.take(key, now: 0) == .allowed)
        #expect(table.take(key, now: 0) == .limited(retryAfter: 6))
        #expect(table.take(key, now: 4.5) == .limited(retryAfter: 2))
        #expect(table.take(key, now: 6) == .allowed)
    }

    @Test func aClockGoingBackwardsRefillsNothing() {
        let table = TokenBucketTable(limit: .init(ratePerSecond: 1, burst: 1), capacity: 10)
        let key = Self.key(3)
        #expect(table.take(key, now: 50) == .allowed)
        #expect(table.take(key, now: 10) != .allowed)
        #expect(table.take(key, now: 50.5) != .allowed)
        #expect(table.take(key, now: 51) == .allowed)
    }

    @Test func bucketsAreIndependent() {
        let table = TokenBucketTable(limit: .init(ratePerSecond: 1, burst: 1), capacity: 10)
        #expect(table.take(Self.key(1), now: 0) == .allowed)
        #expect(table.take(Self.key(1), now: 0) != .allowed)
        #expect(table.take(Self.key(2), now: 0) == .allowed)
    }

    @Test func aFloodOfDistinctKeysNeverGrowsTheTablePastItsCapacity() {
        let table = TokenBucketTable(limit: .init(ratePerSecond: 1, burst: 1), capacity: 1000)
        for number in 0..<50_000 { _ = table.take(Self.key(UInt64(number)), now: 0) }
        #expect(table.count == 1000)
        #expect(table.evictions == 49_000)
        // The last thousand are the ones kept.
        #expect(table.contains(Self.key(49_999)))
        #expect(table.contains(Self.key(49_000)))
        #expect(!table.contains(Self.key(48_999)))
        #expect(TokenBucketTable.bytesPerEntry < 100)
    }

    @Test func theLeastRecentlyUsedBucketIsEvictedAndALimitedKeyInUseIsKept() {
        let table = TokenBucketTable(limit: .init(ratePerSecond: 1, burst: 1), capacity: 3)
        let hammering = Self.key(100)
        #expect(table.take(hammering, now: 0) == .allowed)
        #expect(table.take(Self.key(1), now: 0) == .allowed)
        #expect(table.take(Self.key(2), now: 0) == .allowed)
        // The hammering key is used again: it is now the most recent, and still limited.
        #expect(table.take(hammering, now: 0) != .allowed)
        // Two new keys evict keys 1 and 2, the least recently used, not the hammering one.
        #expect(table.take(Self.key(3), now: 0) == .allowed)
        #expect(table.take(Self.key(4), now: 0) == .allowed)
        #expect(!table.contains(Self.key(1)) && !table.contains(Self.key(2)))
        #expect(table.contains(hammering))
        #expect(table.take(hammering, now: 0) != .allowed)
        // A key evicted comes back with a full bucket.
        #expect(table.take(Self.key(1), now: 0) == .allowed)
        #expect(table.count == 3)
    }

    @Test func addressesParseAndIPv6IsLimitedPerSlash64() throws {
        let four = try #require(BucketKey(address: "192.0.2.10"))
        #expect(four.isIPv4)
        #expect(four == BucketKey(address: "::ffff:192.0.2.10"))
        #expect(four.addressBucket == four)
        let six = try #require(BucketKey(address: "2001:db8:1:2:aaaa::1"))
        #expect(!six.isIPv4)
        #expect(six.addressBucket == BucketKey(address: "2001:db8:1:2:ffff::9")?.addressBucket)
        #expect(six.addressBucket != BucketKey(address: "2001:db8:1:3::1")?.addressBucket)
        for bad in ["", "localhost", "1.2.3", "1.2.3.4.5", "256.1.1.1", "fe80::1%eth0", "1.2.3.4:80", ":::", "x"] {
            #expect(BucketKey(address: bad) == nil, "\(bad)")
        }
        #expect(BucketKey(address: String(repeating: "1", count: 46)) == nil)
    }

    @Test func rangesContainTheirAddresses() throws {
        let ten = try #require(AddressRange("10.0.0.0/8"))
        #expect(ten.contains(try #require(BucketKey(address: "10.200.3.4"))))
        #expect(!ten.contains(try #require(BucketKey(address: "11.0.0.1"))))
        let one = try #require(AddressRange("192.0.2.7"))
        #expect(one.contains(try #require(BucketKey(address: "192.0.2.7"))))
        #expect(!one.contains(try #require(BucketKey(address: "192.0.2.8"))))
        let six = try #require(AddressRange("fd00::/8"))
        #expect(six.contains(try #require(BucketKey(address: "fd12::1"))))
        #expect(!six.contains(try #require(BucketKey(address: "fe80::1"))))
        // An IPv4 range never covers an IPv6 address outside the mapped space.
        #expect(!(try #require(AddressRange("0.0.0.0/0"))).contains(try #require(BucketKey(address: "2001:db8::1"))))
        #expect(try #require(AddressRange("::/0")).contains(try #require(BucketKey(address: "2001:db8::1"))))
        for bad in ["10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "fd00::/129", "10/8", "a/b/c", "10.0.0.0/0008"] {
            #expect(AddressRange(bad) == nil, "\(bad)")
        }
    }

    @Test func forwardedForIsBelievedOnlyFromATrustedProxy() throws {
        let resolver = ClientAddressResolver(trustedProxies: [try #require(AddressRange("10.0.0.0/8"))])
        let ingress = BucketKey(address: "10.1.2.3")
        let stranger = BucketKey(address: "203.0.113.9")
        let client = BucketKey(address: "198.51.100.7")
        // A peer that is not the ingress: its header is ignored.
        #expect(resolver.client(peer: stranger, forwardedFor: ["198.51.100.7"]) == stranger)
        // The ingress: the rightmost untrusted entry is the client; what the client wrote to
        // its left is never read.
        #expect(resolver.client(peer: ingress, forwardedFor: ["198.51.100.7"]) == client)
        #expect(resolver.client(peer: ingress, forwardedFor: ["1.1.1.1, 198.51.100.7"]) == client)
        #expect(resolver.client(peer: ingress, forwardedFor: ["1.1.1.1", "198.51.100.7, 10.9.9.9"]) == client)
        #expect(
            resolver.client(peer: ingress, forwardedFor: ["[2001:db8::5]:443"]) == BucketKey(address: "2001:db8::5")
        )
        #expect(resolver.client(peer: ingress, forwardedFor: ["198.51.100.7:5555"]) == client)
        // Garbage where the client's address should be: the last trusted hop stands.
        #expect(resolver.client(peer: ingress, forwardedFor: ["1.1.1.1, garbage"]) == ingress)
        #expect(resolver.client(peer: ingress, forwardedFor: ["198.51.100.7, 10.5.5.5, unknown"]) == ingress)
        #expect(
            resolver.client(peer: ingress, forwardedFor: ["198.51.100.7, garbage, 10.5.5.5"])
                == BucketKey(address: "10.5.5.5")
        )
        #expect(resolver.client(peer: ingress, forwardedFor: []) == ingress)
        // Over the length bound: ignored.
        let long = Array(repeating: "10.0.0.1", count: 300).joined(separator: ",") + ",198.51.100.7"
        #expect(resolver.client(peer: ingress, forwardedFor: [long]) == ingress)
        // Only the rightmost 16 entries are walked.
        let hops = Array(repeating: "10.0.0.1", count: 20).joined(separator: ",")
        #expect(
            resolver.client(peer: ingress, forwardedFor: ["198.51.100.7," + hops]) == BucketKey(address: "10.0.0.1")
        )
        #expect(resolver.client(peer: nil, forwardedFor: ["198.51.100.7"]) == nil)
        // No trusted proxies (the default): the socket's peer, always.
        #expect(
            ClientAddressResolver(trustedProxies: []).client(peer: ingress, forwardedFor: ["198.51.100.7"]) == ingress
        )
    }

    @Test func theConfigurationReadsItsVariables() throws {
        let defaults = try RateLimitConfiguration.fromEnvironment([:])
        #expect(defaults == RateLimitConfiguration())
        #expect(defaults.user == .init(ratePerSecond: 10, burst: 40))
        #expect(defaults.registration?.ratePerSecond == 10.0 / 60)
        #expect(defaults.tableSize == 20_000)
        let set = try RateLimitConfiguration.fromEnvironment([
            "RATE_LIMIT_USER_PER_SECOND": "0", "RATE_LIMIT_IP_PER_SECOND": "2.5", "RATE_LIMIT_IP_BURST": "5",
            "RATE_LIMIT_REGISTER_PER_MINUTE": "3", "RATE_LIMIT_TABLE_SIZE": "5000",
            "TRUSTED_PROXIES": " 10.0.0.0/8, fd00::/8 ,",
        ])
        #expect(set.user == nil)
        #expect(set.address == .init(ratePerSecond: 2.5, burst: 5))
        #expect(set.registration == .init(ratePerSecond: 0.05, burst: 20))
        #expect(set.tableSize == 5000)
        #expect(set.trustedProxies.count == 2)
        for (name, value) in [
            ("RATE_LIMIT_USER_PER_SECOND", "-1"), ("RATE_LIMIT_USER_BURST", "0"), ("RATE_LIMIT_IP_PER_SECOND", "nan"),
            ("RATE_LIMIT_TABLE_SIZE", "10"), ("TRUSTED_PROXIES", "10.0.0.0/8, ingress.local"),
            ("RATE_LIMIT_REGISTER_BURST", "lots"),
        ] {
            #expect(throws: ConfigurationError.self, "\(name)=\(value)") {
                try RateLimitConfiguration.fromEnvironment([name: value])
            }
        }
        // The gateway's configuration carries them.
        let gateway = try GatewayConfiguration.fromEnvironment(["RATE_LIMIT_IP_BURST": "7"])
        #expect(gateway.rateLimits.address?.burst == 7)
        #expect(RateLimitConfiguration.variables.map(\.name).contains("TRUSTED_PROXIES"))
    }

    @Test func theLimiterAnswers429WithRetryAfterAndCountsIt() throws {
        var configuration = RateLimitConfiguration()
        configuration.user = .init(ratePerSecond: 0.001, burst: 1)
        configuration.address = .init(ratePerSecond: 0.001, burst: 2)
        configuration.registration = .init(ratePerSecond: 0.001, burst: 1)
        let metrics = GatewayMetrics()
        let limiter = RateLimiter(configuration: configuration, metrics: metrics)
        let user = UserID.random()
        try limiter.check(user: user)
        do {
            try limiter.check(user: user)
            Issue.record("the second request was allowed")
        } catch {
            #expect(error.status == 429 && error.code == .rateLimited)
            #expect((error.retryAfter ?? 0) >= 1)
        }
        try limiter.check(user: UserID.random())
        let address = BucketKey(address: "192.0.2.1")
        try limiter.check(address: address, registration: true)
        // The address has a token left, the registration bucket none.
        #expect(throws: Problem.self) { try limiter.check(address: address, registration: true) }
        #expect(throws: Problem.self) { try limiter.check(address: address, registration: false) }
        let text = metrics.render()
        #expect(text.contains(#"gateway_rate_limited_total{limit="user"} 1"#))
        #expect(text.contains(#"gateway_rate_limited_total{limit="register"} 1"#))
        #expect(text.contains(#"gateway_rate_limited_total{limit="ip"} 1"#))
    }

    @Test func everyV1RouteMayAnswer429AndNoOtherDoes() {
        for route in GatewayAPI.routes {
            #expect(route.statuses.contains(429) == route.path.hasPrefix("/v1/"), "\(route.path)")
        }
    }
}
