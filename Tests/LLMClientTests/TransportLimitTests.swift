import Foundation
import HTTPTransport
import LoopbackHTTP
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An answer body is outside input: the transport never holds more of it than its limit (issue 14).
@Suite(.timeLimit(.minutes(1)))
struct TransportLimitTests {
    @Test func anAnswerLargerThanTheLimitFailsInsteadOfBeingReadWhole() async throws {
        let server = try LoopbackHTTPServer { _ in
            HTTPResponse(status: 200, body: Data(repeating: UInt8(ascii: "x"), count: 4 << 20))
        }
        defer { server.stop() }
        let small = Transport(maxConnectionsPerHost: 2, maxResponseBytes: 1 << 20)
        let outcome = await small.send(URLRequest(url: server.baseURL), timeout: .seconds(10))
        guard case .failed(let code, let summary) = outcome else {
            Issue.record("a 4 MiB answer to a 1 MiB transport was read: \(outcome)")
            return
        }
        #expect(code == URLError.Code.dataLengthExceedsMaximum.rawValue)
        #expect(summary.contains("larger"))
        // Within the limit the same answer is read whole.
        let large = Transport(maxConnectionsPerHost: 2, maxResponseBytes: 8 << 20)
        guard
            case .response(200, _, let body) = await large.send(URLRequest(url: server.baseURL), timeout: .seconds(10))
        else {
            Issue.record("the answer within the limit was not read")
            return
        }
        #expect(body.count == 4 << 20)
    }

    @Test func durationsFromDoublesSaturate() {
        #expect(Duration.seconds(double: 1e300) == .nanoseconds(Int64.max))
        #expect(Duration.seconds(double: .nan) == .zero)
        #expect(Duration.seconds(double: 1.5) == .milliseconds(1500))
    }
}
