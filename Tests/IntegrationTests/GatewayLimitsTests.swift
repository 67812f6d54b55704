import AstroDomain
import Foundation
import Testing
import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The gateway's rate limits on the real process, with low limits set through its environment:
/// 429 `rate-limited` with `Retry-After`, then recovery once the bucket refills; X-Forwarded-For
/// counts only from a trusted proxy.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GatewayLimitsTests {
    typealias HTTPAnswer = GatewayHarness.HTTPAnswer

    static func request(
        _ method: String,
        _ url: String,
        token: String? = nil,
        headers: [String: String] = [:]
    ) async throws -> HTTPAnswer {
        try await GatewayHarness.request(method, url, token: token, headers: headers)
    }

    static func expectLimited(_ answer: HTTPAnswer, _ comment: Comment? = nil) {
        #expect(answer.status == 429, comment)
        #expect(answer.headers["content-type"] == "application/problem+json")
        #expect(answer.json?["code"] == "rate-limited")
        #expect(answer.json?["status"] == 429)
        #expect(answer.headers["retry-after"].flatMap(Int.init).map { $0 >= 1 } == true, "\(answer.headers)")
        #expect(answer.headers["x-request-id"] != nil)
    }

    @Test func registrationAndUsersAreLimitedAndRecover() async throws {
        let gateway = try await GatewayHarness.launch(
            environment: [
                // One registration a second after a burst of two; a user: 2/s after a burst of 3.
                "RATE_LIMIT_REGISTER_PER_MINUTE": "60", "RATE_LIMIT_REGISTER_BURST": "2",
                "RATE_LIMIT_USER_PER_SECOND": "2", "RATE_LIMIT_USER_BURST": "3",
                "RATE_LIMIT_IP_PER_SECOND": "1000", "RATE_LIMIT_IP_BURST": "1000",
            ],
            label: "gateway-limits"
        )
        defer { gateway.processes.stop() }
        let base = gateway.base

        // Registration: two, then 429 with Retry-After, then one more after a second.
        let (_, token) = try await GatewayHarness.register(base)
        let (_, otherToken) = try await GatewayHarness.register(base)
        let refused = try await Self.request("POST", "\(base)/v1/devices")
        Self.expectLimited(refused)
        #expect(refused.headers["retry-after"] == "1")
        // The router ignores empty segments and a trailing slash; the limit follows the route,
        // so another spelling of the path is the same registration.
        Self.expectLimited(try await Self.request("POST", "\(base)//v1/devices"))
        Self.expectLimited(try await Self.request("POST", "\(base)/v1/devices/"))
        try await Task.sleep(for: .milliseconds(1100))
        #expect(try await Self.request("POST", "\(base)/v1/devices").status == 201)

        // A user: three requests, then 429; another user is not affected; a second later the
        // first may ask again.
        let job = "\(base)/v1/jobs/\(UUID().uuidString.lowercased())"
        for _ in 0..<3 { #expect(try await Self.request("GET", job, token: token).status == 404) }
        Self.expectLimited(try await Self.request("GET", job, token: token))
        #expect(try await Self.request("GET", job, token: otherToken).status == 404)
        try await Task.sleep(for: .milliseconds(600))
        #expect(try await Self.request("GET", job, token: token).status == 404)

        // Probes are never limited, and the refusals are counted (on the metrics port).
        for _ in 0..<5 { #expect(try await Self.request("GET", "\(base)/healthz").status == 200) }
        let metrics = try await GatewayHarness.rawGet(GatewayHarness.metricsURL(base))
        #expect(metrics.contains(#"gateway_rate_limited_total{limit="register"} 3"#), "\(metrics)")
        #expect(metrics.contains(#"gateway_rate_limited_total{limit="user"} 1"#), "\(metrics)")
        #expect(!gateway.processes.output.contains("status not in the route table"), "\(gateway.processes.output)")
    }

    @Test func addressesAreLimitedAndForwardedForCountsOnlyFromATrustedProxy() async throws {
        let limits = ["RATE_LIMIT_IP_PER_SECOND": "1", "RATE_LIMIT_IP_BURST": "3"]
        // No trusted proxy: a client that writes X-Forwarded-For is still itself.
        let direct = try await GatewayHarness.launch(environment: limits, label: "gateway-limits-ip")
        do {
            let job = "\(direct.base)/v1/jobs/\(UUID().uuidString.lowercased())"
            for index in 0..<3 {
                let answer = try await Self.request("GET", job, headers: ["X-Forwarded-For": "198.51.100.\(index)"])
                #expect(answer.status == 401)
            }
            Self.expectLimited(try await Self.request("GET", job, headers: ["X-Forwarded-For": "198.51.100.99"]))
            // Not /v1: not limited.
            #expect(try await Self.request("GET", "\(direct.base)/readyz").status == 200)
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await Self.request("GET", job).status == 401)
            #expect(!direct.processes.output.contains("status not in the route table"))
        } catch {
            direct.processes.stop()
            throw error
        }
        direct.processes.stop()

        // Behind a trusted proxy (this host plays the ingress): each forwarded client has its own
        // bucket; the proxy's own requests share the proxy's.
        let proxied = try await GatewayHarness.launch(
            environment: limits.merging(["TRUSTED_PROXIES": "127.0.0.0/8, ::1"]) { _, new in new },
            label: "gateway-limits-proxy"
        )
        defer { proxied.processes.stop() }
        let job = "\(proxied.base)/v1/jobs/\(UUID().uuidString.lowercased())"
        for client in ["198.51.100.1", "198.51.100.2"] {
            for _ in 0..<3 {
                #expect(try await Self.request("GET", job, headers: ["X-Forwarded-For": client]).status == 401)
            }
            Self.expectLimited(try await Self.request("GET", job, headers: ["X-Forwarded-For": client]))
        }
        // What a client wrote left of the address the proxy appended is not read.
        Self.expectLimited(
            try await Self.request("GET", job, headers: ["X-Forwarded-For": "203.0.113.5, 198.51.100.1"])
        )
        // A malformed entry: the proxy itself is the client.
        for _ in 0..<3 {
            #expect(try await Self.request("GET", job, headers: ["X-Forwarded-For": "not-an-address"]).status == 401)
        }
        Self.expectLimited(try await Self.request("GET", job))
        #expect(!proxied.processes.output.contains("status not in the route table"))
    }
}

/// Issue 29, F6 and F12 on the real gateway: streams from one client address are capped (429
/// `too-many-address-streams`, `Retry-After`) while another address still opens one; a zone
/// name with a NUL byte is refused with 422 and publishes nothing.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GatewayStreamAndZoneLimitsTests {
    typealias SSEClient = GatewayEventsTests.SSEClient

    @Test func streamsFromOneAddressAreCappedWhileAnotherAddressStillOpensOne() async throws {
        let gateway = try await GatewayHarness.launch(
            environment: ["EVENT_STREAMS_PER_ADDRESS": "6"],
            label: "gateway-stream-address"
        )
        defer { gateway.processes.stop() }
        let base = gateway.base
        // Two anonymous users from 127.0.0.1, four streams each: six open, two refused.
        var streams: [SSEClient] = []
        defer { for stream in streams { stream.close() } }
        var refusals: [GatewayHarness.HTTPAnswer] = []
        for _ in 0..<2 {
            let (_, token) = try await GatewayHarness.register(base)
            for _ in 0..<4 {
                if streams.count < 6 {
                    let stream = try await SSEClient(base, token: token, interface: "127.0.0.1")
                    streams.append(stream)
                    try await stream.waitUntilOpen()
                } else {
                    refusals.append(try await GatewayHarness.request("GET", "\(base)/v1/events", token: token))
                }
            }
        }
        #expect(refusals.count == 2)
        for refused in refusals {
            #expect(refused.status == 429)
            #expect(refused.json?["code"] == "too-many-address-streams")
            #expect(refused.headers["content-type"] == "application/problem+json")
            #expect(refused.headers["retry-after"].flatMap(Int.init).map { $0 >= 1 } == true, "\(refused.headers)")
        }
        // A third user from the same address is refused too: the cap is the address's.
        let (_, third) = try await GatewayHarness.register(base)
        #expect(try await GatewayHarness.request("GET", "\(base)/v1/events", token: third).status == 429)
        // Another client address still opens one, for the same user.
        let other = try await SSEClient(base, token: third, interface: "127.0.0.2")
        defer { other.close() }
        try await other.waitUntilOpen()
        // A closed stream frees its address's place.
        streams.removeFirst().close()
        var reopened: SSEClient?
        try await RuntimeTestEnvironment.eventually("a place is free again", timeout: .seconds(10)) {
            let attempt = try await SSEClient(base, token: third, interface: "127.0.0.1")
            try await RuntimeTestEnvironment.eventually("an answer", timeout: .seconds(5)) { attempt.status != nil }
            if attempt.status == 200 {
                reopened = attempt
                return true
            }
            attempt.close()
            return false
        }
        if let reopened { streams.append(reopened) }
        let metrics = try await GatewayHarness.rawGet(GatewayHarness.metricsURL(base))
        #expect(metrics.contains(#"gateway_rate_limited_total{limit="streams-ip"} 3"#), "\(metrics)")
        #expect(!gateway.processes.output.contains("status not in the route table"))
    }

    @Test func aZoneWithANulByteIsRefusedAndPublishesNothing() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [.chartCalculate])
        // No chart-worker: what the gateway publishes stays in the queue to be counted.
        let gateway = try await GatewayHarness.launch(label: "gateway-nul-zone")
        defer { gateway.processes.stop() }
        let (_, token) = try await GatewayHarness.register(gateway.base)
        guard case .object(var profile)? = GatewayHarness.profile["profile"] else { throw CancellationError() }
        for zone in ["Europe/Kyiv\u{0}", "Europe/Kyiv\u{0}" + String(repeating: "x", count: 40), "\u{0}Europe/Kyiv"] {
            profile["timezone"] = .string(zone)
            let answer = try await GatewayHarness.request(
                "POST",
                "\(gateway.base)/v1/profiles",
                token: token,
                body: ["profile": .object(profile)]
            )
            #expect(answer.status == 422, "\(zone.debugDescription)")
            #expect(answer.json?["code"] == "unknown-timezone")
            #expect(answer.json?["field"] == "profile.timezone")
        }
        #expect(try await publisher.queueState(JobType.chartCalculate.rawValue).messageCount == 0)
        // The same request with the zone as it should be is published: the count could be 1.
        profile["timezone"] = "Europe/Kyiv"
        let accepted = try await GatewayHarness.request(
            "POST",
            "\(gateway.base)/v1/profiles",
            token: token,
            body: ["profile": .object(profile)]
        )
        #expect(accepted.status == 202)
        #expect(try await publisher.queueState(JobType.chartCalculate.rawValue).messageCount == 1)
        await publisher.close()
    }
}
