import Foundation
import LoopbackHTTP
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Echoes what it received as JSON, so tests can see what the server parsed.
private struct Echo: Codable {
    var method: String
    var path: String
    var query: String?
    var token: String?
    var body: String
}

private func echoServer() throws -> LoopbackHTTPServer {
    try LoopbackHTTPServer { request in
        if request.path == "/slow" {
            try? await Task.sleep(for: .milliseconds(500))
            return .text("slow\n")
        }
        if request.path == "/close" { return .closeWithoutResponse }
        if request.path == "/hang" { return .hangUntilStopped }
        return .json(
            Echo(
                method: request.method,
                path: request.path,
                query: request.query,
                token: request.headers["x-TOKEN"],
                body: String(decoding: request.body, as: UTF8.self)
            ),
            headers: ["X-Echo": "1"]
        )
    }
}

@Suite("LoopbackHTTPServer", .timeLimit(.minutes(1)))
struct LoopbackHTTPServerTests {
    @Test("parses method, path, query, case-insensitive headers and a Content-Length body")
    func echoesRequests() async throws {
        let server = try echoServer()
        defer { server.stop() }
        let session = makeTestSession()
        let url = server.baseURL.appendingPathComponent("items/42")
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        components.query = "a=1&b=two"
        let result = await fetch(
            session,
            components.url!,
            method: "POST",
            headers: ["X-Token": "abc", "Content-Type": "text/plain"],
            body: Data("hello body".utf8)
        )
        #expect(result.error == nil)
        #expect(result.status == 200)
        #expect(result.headers["x-echo"] == "1")
        #expect(result.headers["content-type"] == "application/json")
        let echo = try JSONDecoder().decode(Echo.self, from: result.body)
        #expect(echo.method == "POST")
        #expect(echo.path == "/items/42")
        #expect(echo.query == "a=1&b=two")
        #expect(echo.token == "abc")
        #expect(echo.body == "hello body")
    }

    @Test("keeps a connection alive across requests, pipelined ones included")
    func keepAlive() async throws {
        let server = try echoServer()
        defer { server.stop() }
        let port = server.port
        let responses = await onThread { () -> [RawResponse?] in
            guard let connection = RawConnection(port: port) else { return [] }
            connection.send("GET /one HTTP/1.1\r\nHost: x\r\n\r\n")
            let first = connection.readResponse()
            connection.send("GET /two?x=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /three HTTP/1.1\r\nHost: x\r\n\r\n")
            return [first, connection.readResponse(), connection.readResponse()]
        }
        #expect(responses.count == 3)
        #expect(responses.map { $0?.status } == [200, 200, 200])
        #expect(responses[1]?.body.contains("\"query\":\"x=1\"") == true)
        #expect(responses[2]?.body.contains("/three") == true)
        #expect(responses.allSatisfy { $0?.headers["connection"] == nil })
        #expect(server.connectionsAccepted == 1)
        #expect(server.requestsReceived == 3)
    }

    @Test("URLSession reuses one connection for sequential requests")
    func urlSessionReusesConnection() async throws {
        let server = try echoServer()
        defer { server.stop() }
        let session = makeTestSession()
        for index in 0..<3 {
            let result = await fetch(session, server.baseURL.appendingPathComponent("n/\(index)"))
            #expect(result.status == 200)
        }
        #expect(server.requestsReceived == 3)
        #expect(server.connectionsAccepted == 1)
    }

    @Test("closes after `Connection: close` and after an HTTP/1.0 request without keep-alive")
    func connectionClose() async throws {
        let server = try echoServer()
        defer { server.stop() }
        let port = server.port
        let (closeResponse, closedAfterClose, oldResponse, closedAfterOld) = await onThread {
            () -> (RawResponse?, Bool, RawResponse?, Bool) in
            let first = RawConnection(port: port)
            first?.send("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let response = first?.readResponse()
            let closed = first?.closedByServer() ?? false
            let second = RawConnection(port: port)
            second?.send("GET /b HTTP/1.0\r\n\r\n")
            return (response, closed, second?.readResponse(), second?.closedByServer() ?? false)
        }
        #expect(closeResponse?.status == 200)
        #expect(closeResponse?.headers["connection"] == "close")
        #expect(closedAfterClose)
        #expect(oldResponse?.status == 200)
        #expect(closedAfterOld)
    }

    @Test("refuses a chunked request body with 411 and malformed requests with 400")
    func refusesChunkedAndMalformed() async throws {
        let server = try echoServer()
        defer { server.stop() }
        let port = server.port
        let results = await onThread { () -> [(RawResponse?, Bool)] in
            var results: [(RawResponse?, Bool)] = []
            for request in [
                "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
                "NONSENSE\r\n\r\n",
                "GET /x HTTP/2.0\r\n\r\n",
            ] {
                let connection = RawConnection(port: port)
                connection?.send(request)
                let response = connection?.readResponse()
                results.append((response, connection?.closedByServer() ?? false))
            }
            return results
        }
        #expect(results.map { $0.0?.status } == [411, 400, 400, 505])
        #expect(results[0].0?.body.contains("Content-Length") == true)
        #expect(results.allSatisfy { $0.1 })
    }

    @Test("serves concurrent requests in parallel, each on its own connection thread")
    func concurrentRequests() async throws {
        // How many handlers run at once, as the server sees it.
        let inFlight = Mutex((now: 0, most: 0))
        let server = try LoopbackHTTPServer { _ in
            inFlight.withLock { state in
                state.now += 1
                state.most = max(state.most, state.now)
            }
            try? await Task.sleep(for: .milliseconds(500))
            inFlight.withLock { $0.now -= 1 }
            return .text("slow\n")
        }
        defer { server.stop() }
        let session = makeTestSession()
        let url = server.baseURL.appendingPathComponent("slow")
        let start = ContinuousClock.now
        let statuses = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<16 { group.addTask { await fetch(session, url).status } }
            var statuses: [Int] = []
            for await status in group { statuses.append(status) }
            return statuses
        }
        let seconds = elapsed(since: start)
        #expect(statuses == Array(repeating: 200, count: 16))
        // Parallelism is what the server saw, not a duration: a loaded machine stretches durations.
        #expect(seconds >= 0.49)
        let most = inFlight.withLock { $0.most }
        #expect(most >= 2, "at most \(most) handler at once")
        #expect(server.connectionsAccepted >= 2)
    }

    @Test("answers late when the handler sleeps")
    func delayedResponse() async throws {
        let server = try echoServer()
        defer { server.stop() }
        let start = ContinuousClock.now
        let result = await fetch(makeTestSession(), server.baseURL.appendingPathComponent("slow"))
        #expect(result.status == 200)
        #expect(elapsed(since: start) >= 0.49)
    }

    @Test("closeWithoutResponse drops the connection without a byte")
    func closeWithoutResponse() async throws {
        let server = try echoServer()
        defer { server.stop() }
        let port = server.port
        let closed = await onThread { () -> Bool in
            let connection = RawConnection(port: port)
            connection?.send("GET /close HTTP/1.1\r\nHost: x\r\n\r\n")
            return connection?.closedByServer() ?? false
        }
        #expect(closed)
        let result = await fetch(makeTestSession(), server.baseURL.appendingPathComponent("close"))
        #expect(result.error != nil)
        #expect(result.status == 0)
    }

    @Test("hangUntilStopped stays silent until stop(), which returns promptly and closes it")
    func hangUntilStopped() async throws {
        let server = try echoServer()
        let port = server.port
        let silentThenClosed = Mutex<(silent: Bool, closed: Bool)>((false, false))
        let client = Task {
            await onThread {
                let connection = RawConnection(port: port)
                connection?.send("GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
                let silent = connection?.readResponse(timeoutMilliseconds: 400) == nil
                let closed = connection?.closedByServer(timeoutMilliseconds: 5_000) ?? false
                silentThenClosed.withLock { $0 = (silent, closed) }
            }
        }
        try await Task.sleep(for: .milliseconds(600))
        #expect(server.openConnections == 1)
        let start = ContinuousClock.now
        await onThread { server.stop() }
        // The handler hangs until the server stops: a stop that waited for it would never return.
        #expect(elapsed(since: start) < 30)
        await client.value
        #expect(silentThenClosed.withLock { $0.silent })
        #expect(silentThenClosed.withLock { $0.closed })
        #expect(server.openConnections == 0)
        #expect(server.isStopped)
    }

    @Test("releasing the server stops it and frees the port")
    func deinitStops() async throws {
        let holder = Mutex<LoopbackHTTPServer?>(try echoServer())
        let (port, url) = holder.withLock { ($0!.port, $0!.baseURL) }
        let before = await fetch(makeTestSession(), url.appendingPathComponent("x"))
        #expect(before.status == 200)
        // The last reference goes away on a thread of ours (deinit joins the server's threads).
        await onThread { holder.withLock { $0 = nil } }
        let refused = await onThread { RawConnection(port: port) == nil }
        #expect(refused)
    }

    @Test("JSON and text helpers, header lookups")
    func helpers() throws {
        let response = HTTPResponse.json(status: 201, ["a": 1])
        #expect(response.status == 201)
        #expect(response.headers["content-type"] == "application/json")
        #expect(String(decoding: response.body, as: UTF8.self) == "{\"a\":1}")
        var headers: HTTPHeaders = ["Set-Thing": "1", "set-thing": "2"]
        #expect(headers.values(for: "SET-THING") == ["1", "2"])
        headers.replaceOrAdd(name: "Set-Thing", value: "3")
        #expect(headers.values(for: "set-thing") == ["3"])
        let request = HTTPRequest(method: "GET", path: "/a/b%20c", query: "x=1&y=h%C3%A9")
        #expect(request.pathSegments == ["a", "b c"])
        #expect(request.queryItems.map(\.value) == ["1", "hé"])
        #expect(HTTPResponse.closeWithoutResponse.closesWithoutResponse)
        #expect(HTTPResponse.hangUntilStopped.hangsUntilStopped)
        #expect(!HTTPResponse.text("x").hangsUntilStopped)
    }
}
