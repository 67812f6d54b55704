import AstroDomain
import Crypto
import Foundation
import Gateway
import Synchronization
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Live results through the real gateway, broker, database and chart-worker: `GET /v1/events`
/// delivers the caller's events and no one else's, resumes with `Last-Event-ID` (or says
/// `reset`), and `GET /v1/jobs/{id}?wait=N` answers when the job ends or after N seconds.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct GatewayEventsTests {
    /// One Server-Sent Event as a client reads it.
    struct SSEEvent {
        var id: String?
        var type: String
        var data: JSONValue?
    }

    /// A `curl -N` reading an event stream; what it read so far, parsed.
    final class SSEClient: Sendable {
        private let process: ChildProcess

        /// - Parameter interface: the local address to connect from (another loopback address is
        ///   another client address to the gateway).
        init(_ base: String, token: String, lastEventID: String? = nil, interface: String? = nil) async throws {
            var arguments = ["-sS", "-N", "-i", "-H", "Authorization: Bearer \(token)"]
            if let lastEventID { arguments += ["-H", "Last-Event-ID: \(lastEventID)"] }
            if let interface { arguments += ["--interface", interface] }
            // What curl reads goes to a file (`text` reads it back), its errors to another.
            process = try await ChildProcess.start(
                executable: "/usr/bin/curl",
                arguments: arguments + ["\(base)/v1/events"],
                environment: ProcessInfo.processInfo.environment,
                label: "curl-events",
                separateError: true
            )
        }

        var text: String { process.output }

        /// The status line's code, once the head arrived.
        var status: Int? {
            let text = self.text
            guard text.hasPrefix("HTTP/1.1 "), text.count >= 12 else { return nil }
            return Int(text.dropFirst(9).prefix(3))
        }

        /// The events read so far (comments skipped).
        var events: [SSEEvent] {
            let text = self.text.replacingOccurrences(of: "\r\n", with: "\n")
            guard let head = text.range(of: "\n\n") else { return [] }
            var events: [SSEEvent] = []
            // Only complete blocks (each ends with a blank line).
            var blocks = text[head.upperBound...].components(separatedBy: "\n\n")
            blocks.removeLast()
            for block in blocks {
                var event = SSEEvent(id: nil, type: "message", data: nil)
                var isEvent = false
                for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                    if line.hasPrefix("id:") {
                        event.id = line.dropFirst(3).trimmingCharacters(in: .whitespaces)
                    } else if line.hasPrefix("event:") {
                        event.type = line.dropFirst(6).trimmingCharacters(in: .whitespaces)
                        isEvent = true
                    } else if line.hasPrefix("data:") {
                        event.data = try? JSONValue.parse(Data(line.dropFirst(5).utf8))
                        isEvent = true
                    }
                }
                if isEvent { events.append(event) }
            }
            return events
        }

        var isRunning: Bool { process.isRunning }

        /// Disconnects (SIGKILL: nothing of curl's is worth a graceful end).
        func close() {
            process.kill()
        }

        /// Waits until the stream answered 200 and wrote its first line.
        func waitUntilOpen() async throws {
            try await RuntimeTestEnvironment.eventually("the stream is open", timeout: .seconds(10)) {
                self.status == 200 && self.text.contains("retry: 3000")
            }
        }

        /// Waits for an event matching `match`.
        func waitFor(
            _ what: String,
            timeout: Duration = .seconds(30),
            _ match: (SSEEvent) -> Bool
        ) async throws
            -> SSEEvent
        {
            var found: SSEEvent?
            try await RuntimeTestEnvironment.eventually(what, timeout: timeout) {
                found = self.events.first(where: match)
                return found != nil
            }
            return try #require(found)
        }
    }

    static func postProfile(_ base: String, token: String, name: String) async throws -> String {
        guard case .object(var profile)? = GatewayHarness.profile["profile"] else { throw CancellationError() }
        profile["name"] = .string(name)
        let body: JSONValue = ["profile": .object(profile)]
        let answer = try await GatewayHarness.request("POST", "\(base)/v1/profiles", token: token, body: body)
        #expect(answer.status == 202)
        return try #require(answer.json?["jobId"]?.stringValue)
    }

    @Test func theStreamDeliversTheCallersEventsOnlyAndResumes() async throws {
        _ = try await RuntimeTestEnvironment.contractPublisher(purging: [.chartCalculate])
        let running = try await GatewayHarness.launch(chartWorker: true, label: "gateway-events")
        defer { running.processes.stop() }
        let base = running.base
        let alice = try await GatewayHarness.register(base)
        let bob = try await GatewayHarness.register(base)

        // Without a token: 401.
        #expect(try await GatewayHarness.request("GET", "\(base)/v1/events").status == 401)

        let aliceStream = try await SSEClient(base, token: alice.token)
        defer { aliceStream.close() }
        let bobStream = try await SSEClient(base, token: bob.token)
        defer { bobStream.close() }
        try await aliceStream.waitUntilOpen()
        try await bobStream.waitUntilOpen()
        #expect(aliceStream.text.lowercased().contains("content-type: text/event-stream"))

        // Alice's chart arrives on her stream, with her userId and a stable id.
        let aliceJob = try await Self.postProfile(base, token: alice.token, name: "Alice")
        let first = try await aliceStream.waitFor("alice's chart.calculated") {
            $0.type == "chart.calculated" && $0.data?["jobId"]?.stringValue == aliceJob
        }
        #expect(first.data?["userId"]?.stringValue == alice.user)
        #expect(first.data?["chartId"]?.stringValue != nil)
        let firstID = try #require(first.id)
        #expect(!firstID.isEmpty)

        // Bob's reaches Bob, never Alice.
        let bobJob = try await Self.postProfile(base, token: bob.token, name: "Bob")
        let bobs = try await bobStream.waitFor("bob's chart.calculated") {
            $0.data?["jobId"]?.stringValue == bobJob
        }
        #expect(bobs.data?["userId"]?.stringValue == bob.user)
        #expect(!bobStream.events.contains { $0.data?["jobId"]?.stringValue == aliceJob })
        #expect(!aliceStream.events.contains { $0.data?["jobId"]?.stringValue == bobJob })
        #expect(aliceStream.events.allSatisfy { $0.data?["userId"]?.stringValue == alice.user })

        // Alice disconnects; two more jobs end while she is away (the long poll waits for each).
        aliceStream.close()
        var missed: [String] = []
        for name in ["Alice 2", "Alice 3"] {
            let job = try await Self.postProfile(base, token: alice.token, name: name)
            let polled = try await GatewayHarness.request(
                "GET",
                "\(base)/v1/jobs/\(job)?wait=20",
                token: alice.token,
                timeout: 30
            )
            #expect(polled.status == 200)
            #expect(polled.json?["status"] == "succeeded")
            missed.append(job)
        }
        // Resuming from her first event: exactly the two she missed, in order, then live ones.
        let resumed = try await SSEClient(base, token: alice.token, lastEventID: firstID)
        defer { resumed.close() }
        try await resumed.waitUntilOpen()
        try await RuntimeTestEnvironment.eventually("the missed events are replayed", timeout: .seconds(10)) {
            resumed.events.count >= 2
        }
        #expect(resumed.events.map { $0.data?["jobId"]?.stringValue } == missed.map { Optional($0) })
        #expect(resumed.events.allSatisfy { $0.type == "chart.calculated" && $0.id != nil && $0.id != firstID })
        let live = try await Self.postProfile(base, token: alice.token, name: "Alice 4")
        _ = try await resumed.waitFor("a live event after the replay") { $0.data?["jobId"]?.stringValue == live }

        // An id the server does not hold: a reset first, with an empty id.
        let unknown = try await SSEClient(base, token: alice.token, lastEventID: UUID().uuidString.lowercased())
        defer { unknown.close() }
        try await unknown.waitUntilOpen()
        let reset = try await unknown.waitFor("a reset", timeout: .seconds(5)) { $0.type == "reset" }
        #expect(reset.data?["code"] == "unknown-last-event-id")
        #expect(reset.id == "")
        #expect(unknown.events.first?.type == "reset")

        // At most four streams per user: the fifth is refused with 429.
        let carol = try await GatewayHarness.register(base)
        var streams: [SSEClient] = []
        defer { for stream in streams { stream.close() } }
        for _ in 0..<4 {
            let stream = try await SSEClient(base, token: carol.token)
            streams.append(stream)
            try await stream.waitUntilOpen()
        }
        let refused = try await GatewayHarness.request("GET", "\(base)/v1/events", token: carol.token)
        #expect(refused.status == 429)
        #expect(refused.json?["code"] == "too-many-streams")
        #expect(refused.headers["retry-after"] != nil)
        // A closed stream frees its place: the refusal probes the user's streams, so the dead one
        // is noticed at once rather than at its next heartbeat.
        streams.removeFirst().close()
        var another: SSEClient?
        try await RuntimeTestEnvironment.eventually("a place is free again", timeout: .seconds(5)) {
            let attempt = try await SSEClient(base, token: carol.token)
            try await RuntimeTestEnvironment.eventually("an answer", timeout: .seconds(5)) { attempt.status != nil }
            if attempt.status == 200 {
                another = attempt
                return true
            }
            attempt.close()
            return false
        }
        let reopened = try #require(another)
        streams.append(reopened)
        try await reopened.waitUntilOpen()

        let metrics = try await GatewayHarness.rawGet(GatewayHarness.metricsURL(base))
        #expect(metrics.contains("gateway_events_delivered_total"))
        #expect(metrics.contains("gateway_event_streams_open"))

        // A graceful shutdown ends the open streams cleanly and the gateway exits 0.
        let gateway = running.processes.processes[0]
        gateway.send(SIGTERM)
        try await RuntimeTestEnvironment.eventually("the streams end on shutdown", timeout: .seconds(30)) {
            !resumed.isRunning && !reopened.isRunning && !gateway.isRunning
        }
        #expect(gateway.exitCode == 0, "\(running.processes.output)")
        #expect(!running.processes.output.contains("status not in the route table"))
    }

    /// The broker drops the gateway's connections: the subscription comes back on a new queue,
    /// and the open stream is told with a reset (events in between may be lost), not left silent.
    @Test func aLostSubscriptionResetsOpenStreams() async throws {
        let running = try await GatewayHarness.launch(chartWorker: false, label: "gateway-events-gap")
        defer { running.processes.stop() }
        let base = running.base
        let alice = try await GatewayHarness.register(base)
        let stream = try await SSEClient(base, token: alice.token)
        defer { stream.close() }
        try await stream.waitUntilOpen()
        try await AMQPTestEnvironment.stack(
            "rabbit-ctl",
            ["close_all_user_connections", "gateway", "test: broker gap"]
        )
        let reset = try await stream.waitFor("a reset after the gap", timeout: .seconds(30)) { $0.type == "reset" }
        #expect(reset.data?["code"] == "events-interrupted")
        #expect(reset.id == "")
        try await RuntimeTestEnvironment.eventually("the gateway is ready again", timeout: .seconds(30)) {
            (try? await GatewayHarness.request("GET", "\(base)/readyz"))?.status == 200
        }
        #expect(!running.processes.output.contains("status not in the route table"))
    }

    @Test func aLongPollAnswersWhenTheJobEndsOrWhenTheWaitIsOver() async throws {
        _ = try await RuntimeTestEnvironment.contractPublisher(purging: [.chartCalculate])
        // No chart-worker yet: jobs stay queued.
        let running = try await GatewayHarness.launch(chartWorker: false, label: "gateway-wait")
        defer { running.processes.stop() }
        let base = running.base
        let alice = try await GatewayHarness.register(base)
        let bob = try await GatewayHarness.register(base)
        let job = try await Self.postProfile(base, token: alice.token, name: "Waiting")

        // Out of range or not a number: 400 invalid-wait.
        for wait in ["31", "-1", "abc", "1.5", "", "100", "5&wait=6"] {
            let answer = try await GatewayHarness.request(
                "GET",
                "\(base)/v1/jobs/\(job)?wait=\(wait)",
                token: alice.token
            )
            #expect(answer.status == 400, "wait=\(wait)")
            #expect(answer.json?["code"] == "invalid-wait", "wait=\(wait)")
            #expect(answer.json?["field"] == "wait", "wait=\(wait)")
        }
        // Another user's job: 404, at once.
        let foreign = try await GatewayHarness.request("GET", "\(base)/v1/jobs/\(job)?wait=5", token: bob.token)
        #expect(foreign.status == 404)
        // wait=0 answers at once.
        let clock = ContinuousClock()
        var started = clock.now
        let immediate = try await GatewayHarness.request("GET", "\(base)/v1/jobs/\(job)?wait=0", token: alice.token)
        #expect(immediate.status == 200)
        #expect(immediate.json?["status"] == "queued")
        #expect(clock.now - started < .seconds(1))

        // A job that does not end: the answer comes after the wait, with its current state.
        started = clock.now
        let timedOut = try await GatewayHarness.request("GET", "\(base)/v1/jobs/\(job)?wait=2", token: alice.token)
        let waited = clock.now - started
        #expect(timedOut.status == 200)
        #expect(timedOut.json?["status"] == "queued")
        #expect(waited >= .milliseconds(1900) && waited < .seconds(5), "\(waited)")

        // A long poll in flight answers as soon as a worker finishes the job, well before its 25 s.
        let url = "\(base)/v1/jobs/\(job)?wait=25"
        let token = alice.token
        started = clock.now
        let poll = Task { try await GatewayHarness.request("GET", url, token: token, timeout: 40) }
        try await Task.sleep(for: .seconds(1))
        let worker = try await GatewayHarness.start(
            "chart-worker",
            environment: try await GatewayHarness.chartWorkerEnvironment(logLevel: "warning"),
            label: "gateway-wait-chart-worker"
        )
        let workers = GatewayHarness.Processes(processes: [worker])
        defer { workers.stop() }
        let finished = try await poll.value
        let elapsed = clock.now - started
        #expect(finished.status == 200)
        #expect(finished.json?["status"] == "succeeded", "\(workers.output)")
        #expect(elapsed < .seconds(15), "\(elapsed)")
        #expect(!running.processes.output.contains("status not in the route table"))
    }
}

/// Issue 29, F11 on the real gateway: an open stream ends when the access token that opened it
/// expires, and when its user's deletion starts — on the replica that accepted the deletion at
/// once, and on another replica once it reads the deletion the billing-worker recorded.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct GatewayEventStreamEndTests {
    typealias SSEClient = GatewayEventsTests.SSEClient

    /// A signing key the test and the gateways share, so that the test can sign a token that
    /// expires within seconds (the configured lifetime is at least 60 s) and two replicas accept
    /// each other's tokens.
    static func sharedKey() throws -> (environment: [String: String], signer: AccessTokenSigner) {
        let key = P256.Signing.PrivateKey()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("stream-end-key-\(UUID()).pem")
        try Data(key.pemRepresentation.utf8).write(to: file)
        let signer = AccessTokenSigner(
            keyID: "stream-end-test",
            key: key,
            issuer: "astrosvitla-gateway",
            audience: "astrosvitla-app",
            lifetime: .seconds(60)
        )
        return (["GATEWAY_SIGNING_KEY_FILE": file.path, "GATEWAY_SIGNING_KEY_ID": "stream-end-test"], signer)
    }

    static func endEvent(_ stream: SSEClient, _ what: String) async throws -> GatewayEventsTests.SSEEvent {
        try await stream.waitFor(what, timeout: .seconds(20)) { $0.type == "end" }
    }

    @Test func aStreamEndsWhenItsTokenExpires() async throws {
        let (keyEnvironment, signer) = try Self.sharedKey()
        let running = try await GatewayHarness.launch(environment: keyEnvironment, label: "gateway-stream-expiry")
        defer { running.processes.stop() }
        let base = running.base
        let (user, _) = try await GatewayHarness.register(base)
        // Issued 86 s ago with the 60 s lifetime: past its `exp`, and accepted for about 4 s more
        // (the gateway's 30 s leeway for clock skew).
        let userID = try #require(UserID(user))
        let token = try signer.sign(user: userID, now: Date().addingTimeInterval(-86))
        let stream = try await SSEClient(base, token: token)
        defer { stream.close() }
        try await stream.waitUntilOpen()
        let opened = ContinuousClock.now
        let end = try await Self.endEvent(stream, "the end of the stream at the token's expiry")
        #expect(end.data?["code"] == "token-expired")
        #expect(end.id == nil, "the end event leaves the client's last event id as it was")
        // The body ends after it: curl exits on its own.
        try await RuntimeTestEnvironment.eventually("the stream's connection ends", timeout: .seconds(10)) {
            !stream.isRunning
        }
        #expect(ContinuousClock.now - opened < .seconds(15))
        // The same token can no longer open one.
        #expect(try await GatewayHarness.request("GET", "\(base)/v1/events", token: token).status == 401)
        let metrics = try await GatewayHarness.rawGet(GatewayHarness.metricsURL(base))
        #expect(metrics.contains(#"gateway_event_streams_closed_total{reason="token-expired"} 1"#), "\(metrics)")
    }

    @Test func aStreamEndsOnEveryReplicaWhenItsUserIsDeleted() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [.userDelete])
        await publisher.close()
        let (keyEnvironment, signer) = try Self.sharedKey()
        let first = try await GatewayHarness.launch(environment: keyEnvironment, label: "gateway-stream-delete-a")
        defer { first.processes.stop() }
        let second = try await GatewayHarness.launch(environment: keyEnvironment, label: "gateway-stream-delete-b")
        defer { second.processes.stop() }
        // The billing-worker runs user.delete and records the deletion, which the other replica reads.
        let billing = try await GatewayHarness.start(
            "billing-worker",
            environment: [
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.billingWorker),
                "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .billingWorker),
                "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "warning", "MIGRATE_ON_START": "false",
                "BILLING_ENVIRONMENT": "Sandbox",
                "BILLING_TRUSTED_ROOTS": BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der").path,
            ],
            label: "gateway-stream-delete-billing"
        )
        defer { billing.stopWaiting() }
        let (alice, aliceToken) = try await GatewayHarness.register(first.base)
        let (_, bobToken) = try await GatewayHarness.register(first.base)
        // Alice on both replicas (the first replica's token is good on the second: one key).
        let onFirst = try await SSEClient(first.base, token: aliceToken)
        defer { onFirst.close() }
        let onSecond = try await SSEClient(second.base, token: try signer.sign(user: try #require(UserID(alice))))
        defer { onSecond.close() }
        let bobs = try await SSEClient(first.base, token: bobToken)
        defer { bobs.close() }
        for stream in [onFirst, onSecond, bobs] { try await stream.waitUntilOpen() }

        // Alice deletes her account through the second replica: its stream ends at once.
        let deletion = try await GatewayHarness.request("DELETE", "\(second.base)/v1/me", token: aliceToken)
        #expect(deletion.status == 202)
        let local = try await Self.endEvent(onSecond, "the end on the replica that accepted the deletion")
        #expect(local.data?["code"] == "user-deleted")
        // The first replica learns of it from user_deletions (the billing-worker's mark).
        let remote = try await Self.endEvent(onFirst, "the end on the other replica")
        #expect(remote.data?["code"] == "user-deleted")
        try await RuntimeTestEnvironment.eventually("both of alice's connections end", timeout: .seconds(10)) {
            !onFirst.isRunning && !onSecond.isRunning
        }
        // Bob's stream on the same replica is untouched.
        #expect(bobs.isRunning)
        #expect(!bobs.events.contains { $0.type == "end" })
        for running in [first, second] {
            let metrics = try await GatewayHarness.rawGet(GatewayHarness.metricsURL(running.base))
            #expect(metrics.contains(#"gateway_event_streams_closed_total{reason="user-deleted"} 1"#), "\(metrics)")
        }
    }
}
