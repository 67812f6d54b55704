import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `gateway_event_streams_open` counts the streams open now: it goes up as clients connect and
/// back to 0 soon after they went away (not at the next heartbeat, not never).
@Suite(.serialized, .timeLimit(.minutes(2)))
struct GatewayEventStreamGaugeTests {
    /// The value of an unlabelled sample in a Prometheus text exposition.
    static func sample(_ name: String, in text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    static func openStreams(_ base: String) async throws -> Double? {
        sample("gateway_event_streams_open", in: try await GatewayHarness.rawGet(GatewayHarness.metricsURL(base)))
    }

    /// The streams open now, and every stream the gateway ever started: open plus ended, whatever
    /// the reason.
    struct StreamCounts: Equatable, CustomStringConvertible {
        var open: Double
        var started: Double
        var description: String { "\(open) open of \(started) started" }
    }

    static func streamCounts(_ base: String) async throws -> StreamCounts {
        let text = try await GatewayHarness.rawGet(GatewayHarness.metricsURL(base))
        let ended = text.split(separator: "\n").filter { $0.hasPrefix("gateway_event_streams_closed_total{") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
        let open = sample("gateway_event_streams_open", in: text) ?? 0
        return StreamCounts(open: open, started: open + ended)
    }

    /// Sends `GET /v1/events` on a new TCP connection and closes it with a reset (SO_LINGER 0).
    static func requestAndReset(_ base: String, token: String) throws {
        guard let url = URL(string: base), let port = url.port else { throw POSIXError(.EINVAL) }
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw POSIXError(.EMFILE) }
        defer { Glibc.close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        let request = Array("GET /v1/events HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer \(token)\r\n\r\n".utf8)
        guard Glibc.send(socket, request, request.count, 0) == request.count else { throw POSIXError(.EIO) }
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(socket, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    @Test func theGaugeFallsBackToZeroOnceTheClientsAreGone() async throws {
        let running = try await GatewayHarness.launch(chartWorker: false, label: "gateway-stream-gauge")
        defer { running.processes.stop() }
        let base = running.base
        // Four streams per user at most: 6 users × 4 = 24 streams.
        var clients: [GatewayEventsTests.SSEClient] = []
        defer { for client in clients { client.close() } }
        for _ in 0..<6 {
            let user = try await GatewayHarness.register(base)
            for _ in 0..<4 { clients.append(try await GatewayEventsTests.SSEClient(base, token: user.token)) }
        }
        for client in clients { try await client.waitUntilOpen() }
        #expect(try await Self.openStreams(base) == Double(clients.count))

        for client in clients { client.close() }
        // The heartbeat comes every 15 s; a closed connection must be noticed well before.
        let clock = ContinuousClock()
        let started = clock.now
        var last: Double?
        while clock.now - started < .seconds(5) {
            last = try await Self.openStreams(base)
            if last == 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(last == 0, "gateway_event_streams_open is \(String(describing: last)) 5 s after the clients left")

        // Clients that reset the connection right after sending the request: the server reads the
        // request, but the response's head can no longer be written, so the body that would close
        // the stream never runs. Such streams used to stay counted (and hold their user's places)
        // for good.
        for _ in 0..<4 {
            let user = try await GatewayHarness.register(base)
            for _ in 0..<4 { try Self.requestAndReset(base, token: user.token) }
        }
        // Whether the gateway has read a reset request yet cannot be seen from here; so it waits
        // until no stream is open and none has started for a second: a read of 0 before a
        // request was read would otherwise pass at once.
        var since: (counts: StreamCounts, at: ContinuousClock.Instant)?
        try await RuntimeTestEnvironment.eventually(
            "no reset stream counted as open, and none started for 1 s",
            timeout: .seconds(30),
            observe: { () async throws -> (counts: StreamCounts, unchangedFor: Duration) in
                let counts = try await Self.streamCounts(base)
                if since?.counts != counts { since = (counts, ContinuousClock.now) }
                return (counts, ContinuousClock.now - (since?.at ?? ContinuousClock.now))
            },
            until: { $0.counts.open == 0 && $0.unchangedFor >= .seconds(1) }
        )
        #expect(try await Self.openStreams(base) == 0)

        // And again: a second round ends at 0 too (no stream is counted twice or left behind).
        let user = try await GatewayHarness.register(base)
        let again = try await GatewayEventsTests.SSEClient(base, token: user.token)
        try await again.waitUntilOpen()
        #expect(try await Self.openStreams(base) == 1)
        again.close()
        try await RuntimeTestEnvironment.eventually("the last stream is no longer counted", timeout: .seconds(5)) {
            try await Self.openStreams(base) == 0
        }
    }
}
