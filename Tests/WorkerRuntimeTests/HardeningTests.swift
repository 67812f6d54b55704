import AMQP
import AstroDomain
import Foundation
import Postgres
import Synchronization
import Testing

@testable import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

/// Headers of any type and value give a defined result (issue 14: `x-astro-attempt:
/// 9223372036854775807` killed every chart-worker that read it).
@Suite struct PoisonHeaderTests {
    static func delivery(headers: AMQPTable, redelivered: Bool = false) -> Delivery {
        Delivery(
            queue: "chart.calculate",
            exchange: "astro.jobs",
            routingKey: "chart.calculate",
            body: Data("{}".utf8),
            properties: MessageProperties(headers: headers),
            redelivered: redelivered,
            deliveryTag: 1,
            generation: 1
        )
    }

    static let poisonValues: [AMQPFieldValue] = [
        .int(.max), .int(.min), .int(-1), .int(0), .int(4), .double(.nan), .double(.infinity), .double(-.infinity),
        .double(1e300), .double(-1e300), .double(2.5), .double(3), .string("9223372036854775807"),
        .string("99999999999999999999999999"), .string("-9223372036854775808"), .string("-5"), .string("+7"),
        .string(""), .string("abc"), .string(String(repeating: "9", count: 100_000)), .string("\u{0}"),
        .bool(true), .void, .table(["a": .int(1)]), .array([.int(1), .int(2)]),
    ]

    @Test(arguments: poisonValues)
    func anAttemptHeaderOfAnyValueGivesABoundedAttempt(_ value: AMQPFieldValue) {
        let attempt = DeliveryHeaders.attempt(of: Self.delivery(headers: [BrokerNames.Header.attempt: value]))
        #expect((1...DeliveryHeaders.countCeiling + 1).contains(attempt))
        let earlier = DeliveryHeaders.earlierDeliveries(
            of: Self.delivery(headers: [BrokerNames.Header.deliveryCount: value])
        )
        #expect((0...DeliveryHeaders.countCeiling).contains(earlier))
    }

    @Test func countsReadTheUsualEncodingsAndClampTheRest() {
        #expect(DeliveryHeaders.count(.int(4)) == 4)
        #expect(DeliveryHeaders.count(.string("4")) == 4)
        #expect(DeliveryHeaders.count(.double(4)) == 4)
        // A negative attempt header cannot buy extra attempts; a huge one leaves none.
        #expect(DeliveryHeaders.count(.int(-100)) == 0)
        #expect(DeliveryHeaders.count(.string("-100")) == 0)
        #expect(DeliveryHeaders.count(.int(.max)) == DeliveryHeaders.countCeiling)
        #expect(DeliveryHeaders.count(.string("99999999999999999999")) == DeliveryHeaders.countCeiling)
        #expect(DeliveryHeaders.count(.double(2.5)) == nil)
        #expect(DeliveryHeaders.count(.string("1e3")) == nil)
        #expect(DeliveryHeaders.count(nil) == nil)
        let policy = RetryPolicy(maxAttempts: 5, initialDelay: .seconds(1), maxDelay: .seconds(60))
        let forged = DeliveryHeaders.attempt(of: Self.delivery(headers: [BrokerNames.Header.attempt: .int(.max)]))
        #expect(!policy.allowsAttempt(after: forged))
        let negative = DeliveryHeaders.attempt(of: Self.delivery(headers: [BrokerNames.Header.attempt: .int(-50)]))
        #expect(negative == 1)
    }

    @Test func copiesOfADeliveryKeepOnlyIdentifyingPropertiesAndTheRuntimesHeaders() {
        let original = Delivery(
            queue: "chart.calculate",
            exchange: "astro.jobs",
            routingKey: "chart.calculate",
            body: Data("{}".utf8),
            properties: MessageProperties(
                contentType: "application/json",
                headers: [
                    "CC": .array([.string("billing.refund-credit")]), "BCC": .array([.string("report.generate")]),
                    BrokerNames.Header.attempt: .int(2), BrokerNames.Header.deliveryCount: .int(3),
                    "x-anything": .table(["deep": .array([.int(1)])]),
                ],
                persistent: false,
                correlationID: "c-1",
                expiration: "5",
                messageID: "m-1",
                timestamp: Date(timeIntervalSince1970: 1.8e19)
            ),
            redelivered: false,
            deliveryTag: 1,
            generation: 1
        )
        let copy = DeliveryCopies.properties(of: original)
        #expect(copy.headers.keys.sorted() == [BrokerNames.Header.attempt])
        #expect(copy.contentType == "application/json")
        #expect(copy.messageID == "m-1")
        #expect(copy.correlationID == "c-1")
        #expect(copy.persistent)
        #expect(copy.expiration == nil)
        #expect(copy.timestamp == nil)
    }

    /// Fuzzing found a reply-to of 86 invalid UTF-8 bytes, read as 86 U+FFFD (258 bytes), kept
    /// whole by a cut at 255 characters: the copy could not be encoded, so the job could neither
    /// be retried nor dead-lettered. Every copied property now fits an AMQP short string.
    @Test func copiedPropertiesFitShortStringsInBytes() {
        let replacement = String(repeating: "\u{FFFD}", count: 86)
        let emoji = String(repeating: "🪐", count: 100)
        let original = Delivery(
            queue: "q",
            exchange: "",
            routingKey: "q",
            body: Data(),
            properties: MessageProperties(
                contentType: emoji,
                contentEncoding: replacement,
                correlationID: replacement,
                replyTo: replacement,
                messageID: emoji,
                type: String(repeating: "é", count: 200),
                appID: replacement
            ),
            redelivered: false,
            deliveryTag: 1,
            generation: 1
        )
        let copy = DeliveryCopies.properties(of: original)
        for value in [
            copy.contentType, copy.contentEncoding, copy.correlationID, copy.replyTo, copy.messageID, copy.type,
            copy.appID,
        ] {
            #expect((value?.utf8.count ?? 0) <= 255)
            #expect((value?.utf8.count ?? 0) > 250, "cut shorter than needed: \(value?.utf8.count ?? 0)")
        }
        #expect(copy.messageID == String(repeating: "🪐", count: 63))
    }
}

@Suite struct FailureClassificationTests {
    static func server(_ state: String) -> PostgresError {
        PostgresError(kind: .server, message: "x", sqlState: state)
    }

    @Test(arguments: ["22P05", "22021", "22001", "23514", "23502", "23503", "42501", "42P01", "54000", "P0001"])
    func failuresNoRetryCanMendAreDeadLetteredAtOnce(_ state: String) {
        guard case .permanent(let error) = FailureClassifier.classify(Self.server(state)) else {
            Issue.record("\(state) should be permanent")
            return
        }
        #expect(error.code == "database-error-\(state)")
    }

    @Test(arguments: [
        "40001", "40P01", "57014", "55P03", "53300", "53100", "08006", "57P01", "23505", "XX000", "0A000",
    ])
    func failuresThatMayPassAreRetried(_ state: String) {
        guard case .transient = FailureClassifier.classify(Self.server(state)) else {
            Issue.record("\(state) should be transient")
            return
        }
    }

    @Test func errorKindsAndOtherTypesAreSorted() {
        #expect(
            FailureClassifier.classify(PostgresError(kind: .encoding, message: "NUL"))
                == .permanent(JobError(code: "database-encoding-error", message: "postgres encoding error: NUL"))
        )
        if case .transient(let error) = FailureClassifier.classify(PostgresError(kind: .connectionLost, message: "")) {
            #expect(error.code == "database-unavailable")
        } else {
            Issue.record("connection loss should be transient")
        }
        if case .transient(let error) = FailureClassifier.classify(Self.server("57014")) {
            #expect(error.code == "database-timeout")
        } else {
            Issue.record("a statement timeout should be transient")
        }
        #expect(
            FailureClassifier.classify(JobRejection(code: "invalid-payload", message: "m"))
                == .permanent(JobError(code: "invalid-payload", message: "m"))
        )
        struct Outage: RetryClassifiedError {
            var failureCode: String
            var isTransient: Bool
        }
        #expect(
            FailureClassifier.classify(Outage(failureCode: "llm-rate-limited", isTransient: true)).jobError.code
                == "llm-rate-limited"
        )
        if case .permanent(let error) = FailureClassifier.classify(
            Outage(failureCode: "llm-unauthorized", isTransient: false)
        ) {
            #expect(error.code == "llm-unauthorized")
        } else {
            Issue.record("a permanent classified error should be permanent")
        }
        struct Unknown: Error {}
        if case .transient(let error) = FailureClassifier.classify(Unknown()) {
            #expect(error.code == "transient-error")
        } else {
            Issue.record("unknown errors keep being retried")
        }
        let long = FailureClassifier.classify(JobRejection(code: "c", message: String(repeating: "x", count: 10_000)))
        #expect(long.jobError.message.count <= FailureClassifier.maximumMessageLength + 1)
    }

    @Test func aClaimTheStoreLeftUnansweredIsTransient() {
        let jobID = JobID.random()
        let error = JobStoreError(code: .claimMissing, jobID: jobID)
        #expect(
            FailureClassifier.classify(error)
                == .transient(JobError(code: "job-claim-missing", message: "\(error)"))
        )
        #expect("\(error)".contains(jobID.description))
    }
}

@Suite struct HealthRequestTests {
    static func parse(_ text: String) -> HealthRequest { HealthRequest.parse(Array(text.utf8)) }

    @Test func readsGetAndHeadRequests() {
        #expect(Self.parse("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") == .request(method: .get, path: "/healthz"))
        #expect(Self.parse("HEAD /readyz?x=1 HTTP/1.0\r\n\r\n") == .request(method: .head, path: "/readyz"))
        #expect(Self.parse("GET /metrics HTTP/1.1\n\n") == .request(method: .get, path: "/metrics"))
    }

    @Test func waitsForTheRestOfAHead() {
        #expect(Self.parse("") == .incomplete)
        #expect(Self.parse("GET /healthz HTTP/1.1\r\nHost: x\r\n") == .incomplete)
        #expect(Self.parse("GE") == .incomplete)
    }

    @Test func refusesWhatCanNeverBeValid() {
        func status(_ text: String) -> Int? {
            if case .invalid(let status, _) = Self.parse(text) { return status }
            return nil
        }
        #expect(status("POST /healthz HTTP/1.1\r\n\r\n") == 405)
        #expect(status("GET /healthz HTTP/2.0\r\n\r\n") == 505)
        #expect(status("GET healthz HTTP/1.1\r\n\r\n") == 400)
        #expect(status("GET /a b HTTP/1.1\r\n\r\n") == 400)
        #expect(status("GET /\u{1B}[2J HTTP/1.1\r\n\r\n") == 400)
        #expect(status("GET /healthz HTTP/1.1\r\nno colon here\r\n\r\n") == 400)
        #expect(status("\u{0}\u{0}") == 400)
        #expect(status("get / HTTP/1.1\r\n\r\n") == 400)
        // A request line that is already wrong is refused before the head ends.
        #expect(status("DELETE / HTTP/1.1\r\nX: y\r\n") == 405)
        let flood =
            "GET /healthz HTTP/1.1\r\n" + String(repeating: "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n", count: 400)
        #expect(status(flood) == 431)
    }

    /// Fuzzing found a request line ending in two CRs accepted whole but refused in pieces: the
    /// verdict must not depend on how TCP cut the bytes.
    @Test func theVerdictDoesNotDependOnHowTheBytesArrive() {
        for text in [
            "GET / HTTP/1.1\r\r\n\n", "GET / HTTP/1.1\r\n\r\n", "GET /x HTTP/1.0\n\n",
            "GET / HTTP/1.1\r\nA: b\r\r\n\r\n",
        ] {
            let bytes = Array(text.utf8)
            let whole = Self.parse(text)
            for cut in 1..<bytes.count {
                if case .invalid = HealthRequest.parse(bytes[..<cut]) {
                    #expect(whole == HealthRequest.parse(bytes[..<cut]), "\(text.debugDescription) cut at \(cut)")
                }
            }
        }
        if case .invalid(let status, _) = Self.parse("GET / HTTP/1.1\r\r\n\n") {
            #expect(status == 400)
        } else {
            Issue.record("a request line with a stray CR was accepted")
        }
    }
}

/// The health endpoint keeps answering probes while clients misbehave (issue 14).
@Suite(.serialized) struct HealthServerAbuseTests {
    static func server() throws -> (HealthServer, Int) {
        let server = HealthServer(
            host: "127.0.0.1",
            port: 0,
            limits: .init(maxConnections: 64, requestDeadline: .seconds(2)),
            logger: .init(label: "test")
        ) { path in
            path == "/healthz" ? .init(status: 200, body: "ok\n") : nil
        }
        try server.start()
        return (server, try #require(server.boundPort))
    }

    /// A blocking client socket connected to the server.
    static func connect(_ port: Int) -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var timeout = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return connected == 0 ? descriptor : -1
    }

    static func send(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if count <= 0 { return false }
            sent += count
        }
        return true
    }

    static func readAll(_ descriptor: Int32) -> String {
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            data += buffer[0..<count]
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// One probe: connect, GET /healthz, read the answer; how long it took.
    static func probe(_ port: Int) -> (answer: String, seconds: Double) {
        let start = ContinuousClock.now
        let descriptor = connect(port)
        guard descriptor >= 0 else { return ("connect failed", 0) }
        defer { close(descriptor) }
        _ = send(descriptor, Array("GET /healthz HTTP/1.1\r\nHost: probe\r\n\r\n".utf8))
        let answer = readAll(descriptor)
        let elapsed = ContinuousClock.now - start
        return (answer, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    @Test(.timeLimit(.minutes(1))) func probesAreAnsweredWhileClientsTrickleOneByteASecond() async throws {
        let (server, port) = try Self.server()
        defer { Task { await server.stop() } }
        // 40 clients that each send one byte a second and never finish their request.
        let tricklers = (0..<40).map { _ in Self.connect(port) }
        let stop = Atomic<Bool>(false)
        let trickle = Thread {
            var sent = 0
            while !stop.load(ordering: .relaxed), sent < 20 {
                for descriptor in tricklers { _ = Self.send(descriptor, Array("G".utf8)) }
                sent += 1
                usleep(1_000_000)
            }
        }
        trickle.start()
        defer {
            stop.store(true, ordering: .relaxed)
            for descriptor in tricklers { close(descriptor) }
        }
        for _ in 0..<5 {
            let (answer, seconds) = Self.probe(port)
            #expect(answer.hasPrefix("HTTP/1.1 200 OK"), "answer: \(answer.prefix(60))")
            #expect(seconds < 1.0, "a probe took \(seconds) s")
            try await Task.sleep(for: .milliseconds(700))
        }
        // Past the deadline the tricklers were cut off: their sockets read EOF.
        try await Task.sleep(for: .seconds(2))
        var buffer = [UInt8](repeating: 0, count: 16)
        let cut = tricklers.filter { descriptor in
            buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) } == 0
        }
        #expect(cut.count == tricklers.count, "\(cut.count) of \(tricklers.count) slow clients were cut off")
    }

    @Test(.timeLimit(.minutes(1))) func aMegabyteOfHeadersIsRefusedWithoutReadingItAll() throws {
        let (server, port) = try Self.server()
        defer { Task { await server.stop() } }
        let descriptor = Self.connect(port)
        defer { close(descriptor) }
        var flood = Array("GET /healthz HTTP/1.1\r\n".utf8)
        let line = Array("X-Flood: \(String(repeating: "a", count: 1000))\r\n".utf8)
        while flood.count < 1_048_576 { flood += line }
        // The server answers 431 after 8 KiB and closes; the rest of the send may fail.
        _ = Self.send(descriptor, flood)
        let answer = Self.readAll(descriptor)
        #expect(answer.hasPrefix("HTTP/1.1 431"), "answer: \(answer.prefix(60))")
        #expect(Self.probe(port).answer.hasPrefix("HTTP/1.1 200 OK"))
    }

    /// Connections keep arriving (a few thousand a second, each held open) while probes come in:
    /// a probe's request, in its socket when it is accepted, is answered before the flood can
    /// push its connection out.
    @Test(.timeLimit(.minutes(1))) func probesAreAnsweredDuringASustainedConnectionFlood() async throws {
        let (server, port) = try Self.server()
        defer { Task { await server.stop() } }
        let stop = Atomic<Bool>(false)
        let opened = Atomic<Int>(0)
        for _ in 0..<2 {
            Thread {
                var held: [Int32] = []
                while !stop.load(ordering: .relaxed) {
                    let descriptor = Self.connect(port)
                    if descriptor >= 0 {
                        held.append(descriptor)
                        opened.add(1, ordering: .relaxed)
                    }
                    if held.count > 100 { close(held.removeFirst()) }
                }
                for descriptor in held { close(descriptor) }
            }.start()
        }
        defer { stop.store(true, ordering: .relaxed) }
        try await Task.sleep(for: .milliseconds(300))
        for _ in 0..<20 {
            let (answer, seconds) = Self.probe(port)
            #expect(answer.hasPrefix("HTTP/1.1 200 OK"), "answer: \(answer.prefix(60))")
            // (Generous: the tests share two cores; a probe locked out would not be answered at all.)
            #expect(seconds < 2.5, "a probe took \(seconds) s")
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(opened.load(ordering: .relaxed) > 200, "the flood opened only \(opened.load(ordering: .relaxed))")
    }

    @Test(.timeLimit(.minutes(1))) func probesAreAnsweredWith500ConnectionsOpen() throws {
        let (server, port) = try Self.server()
        defer { Task { await server.stop() } }
        var idle: [Int32] = []
        defer { for descriptor in idle { close(descriptor) } }
        for _ in 0..<500 {
            let descriptor = Self.connect(port)
            if descriptor >= 0 { idle.append(descriptor) }
        }
        #expect(idle.count == 500)
        for _ in 0..<5 {
            let (answer, seconds) = Self.probe(port)
            #expect(answer.hasPrefix("HTTP/1.1 200 OK"), "answer: \(answer.prefix(60))")
            #expect(seconds < 1.0, "a probe took \(seconds) s")
        }
    }
}

@Suite struct DatabaseTimeoutConfigurationTests {
    @Test func defaultsBoundEveryWait() throws {
        let configuration = try WorkerConfiguration.fromEnvironment([:], defaultHTTPPort: 8081)
        let database = configuration.database
        #expect(database.statementTimeout == .seconds(30))
        #expect(database.lockTimeout == .seconds(10))
        #expect(database.idleInTransactionTimeout == .seconds(60))
        #expect(database.effectiveResponseTimeout == .seconds(45))
        #expect(database.keepalive == .init(idle: .seconds(10), interval: .seconds(5), count: 3))
        #expect(database.tcpUserTimeout == .seconds(20))
        #expect(configuration.deliveryLimit == 10)
        #expect(configuration.amqp.maxBodyBytes == 262_144)
        #expect(configuration.developmentDefaults == ["AMQP_URL", "DATABASE_URL"])
    }

    @Test func everyTimeoutCanBeSetOrTurnedOff() throws {
        let configuration = try WorkerConfiguration.fromEnvironment(
            [
                "AMQP_URL": "amqp://u:p@h/v", "DATABASE_URL": "postgres://u:p@h/d", "DB_STATEMENT_TIMEOUT_MS": "0",
                "DB_LOCK_TIMEOUT_MS": "1500", "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS": "0", "DB_TCP_KEEPALIVE_SECONDS": "0",
                "DB_TCP_USER_TIMEOUT_MS": "5000", "DELIVERY_LIMIT": "3", "MAX_MESSAGE_BYTES": "4096",
            ],
            defaultHTTPPort: 8081
        )
        #expect(configuration.database.statementTimeout == nil)
        #expect(configuration.database.lockTimeout == .milliseconds(1500))
        #expect(configuration.database.idleInTransactionTimeout == nil)
        #expect(configuration.database.effectiveResponseTimeout == nil)
        #expect(configuration.database.keepalive == nil)
        #expect(configuration.database.tcpUserTimeout == .seconds(5))
        #expect(configuration.deliveryLimit == 3)
        #expect(configuration.amqp.maxBodyBytes == 4096)
        #expect(configuration.developmentDefaults.isEmpty)
        #expect(throws: ConfigurationError.self) {
            try WorkerConfiguration.fromEnvironment(["DB_RESPONSE_TIMEOUT_MS": "1000"], defaultHTTPPort: 1)
        }
        #expect(throws: ConfigurationError.self) {
            try WorkerConfiguration.fromEnvironment(["DELIVERY_LIMIT": "0"], defaultHTTPPort: 1)
        }
        #expect(throws: ConfigurationError.self) {
            try WorkerConfiguration.fromEnvironment(["MAX_MESSAGE_BYTES": "-1"], defaultHTTPPort: 1)
        }
    }

    @Test func theDeliveryLimitOfQuorumQueuesIsAPolicyNotAnArgument() throws {
        // An argument cannot be changed on an existing quorum queue (redeclaring with a new one
        // is refused, 406), so the broker's limit is a policy over the work queues.
        let retry = RetryPolicy(maxAttempts: 3, initialDelay: .seconds(1), maxDelay: .seconds(4))
        let quorum = WorkerTopology.contract(retry: retry, queueType: .quorum)
        #expect(quorum.queues.allSatisfy { $0.arguments["x-delivery-limit"] == nil })
        let policies = try #require(BrokerAccess.definitionsTemplate()["policies"]?.arrayValue)
        let policy = try #require(policies.first)
        #expect(policy["definition"]?["delivery-limit"] == .number(Double(BrokerAccess.brokerDeliveryLimit)))
        #expect(BrokerAccess.brokerDeliveryLimit > WorkerConfiguration.defaultDeliveryLimit)
        let pattern = try Regex(try #require(policy["pattern"]?.stringValue))
        for type in JobType.all { #expect(type.rawValue.firstMatch(of: pattern) != nil, "\(type.rawValue)") }
        for other in ["chart.calculate.dead", "chart.calculate.retry.1000ms", "astroctl.wait.1"] {
            #expect(other.firstMatch(of: pattern) == nil, "\(other)")
        }
    }
}

/// A body too large to read is named by the job id in its kept ends.
@Suite struct WithheldBodyTests {
    @Test func theJobIDIsFoundInEitherEnd() throws {
        let id = "0b0e4b8e-5d1e-4c57-9a53-6a1b1c1d1e1f"
        let user = "11111111-2222-4333-8444-555555555555"
        let front = Data(#"{"jobId" :  "\#(id)", "pad":"xxxx"#.utf8)
        #expect(JobHead.find(in: [front, Data()])?.jobID.description == id)
        let back = Data(#"xxxx", "userId":"\#(user)","jobId":"\#(id)"}"#.utf8)
        let found = try #require(JobHead.find(in: [Data("{\"pad\":\"xxxx".utf8), back]))
        #expect(found.jobID.description == id)
        #expect(found.userID?.uuidString.lowercased() == user)
        for nothing in [#"{"pad":"x"#, #""jobId": 12"#, #""jobId":"not-a-uuid"#, #""jobId""#, "\u{FF}\u{FE}"] {
            #expect(JobHead.find(in: [Data(nothing.utf8)]) == nil, "\(nothing)")
        }
        #expect(JobHead.find(in: []) == nil)
    }
}

/// The broker users' permissions are defined once (BrokerAccess); the definitions file the local
/// stack and compose load is generated from them.
@Suite struct BrokerDefinitionsFileTests {
    @Test func theCommittedDefinitionsAreTheGeneratedTemplate() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("deploy/rabbitmq/definitions.json")
        let committed = try JSONDecoder().decode(JSONValue.self, from: Data(contentsOf: file))
        #expect(
            committed == BrokerAccess.definitionsTemplate(),
            "deploy/rabbitmq/definitions.json is stale: regenerate it with `astroctl broker definitions --template`"
        )
    }

    @Test func theKubernetesUsersAreTheGeneratedObjects() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("deploy/k8s/overlays/production/rabbitmq-access.yaml")
        let committed = try String(contentsOf: file, encoding: .utf8)
        #expect(
            committed == BrokerAccess.topologyOperatorObjects(cluster: "astro-rabbitmq"),
            "rabbitmq-access.yaml is stale: regenerate it with `astroctl broker kubernetes`"
        )
    }

    @Test func clientsNeverPublishInternalJobs() throws {
        let topics = BrokerAccess.topicPermissions(BrokerAccess.client)
        let requests = try #require(topics.first { $0.exchange == BrokerNames.requestsExchange }?.write)
        for privileged in ["report.generate", "billing.refund-credit"] {
            #expect(privileged.wholeMatch(of: try Regex(requests)) == nil)
        }
        #expect("report.request".wholeMatch(of: try Regex(requests)) != nil)
        // A client may not publish to astro.jobs at all, and astro.requests reaches it only under
        // the requestable job types.
        let client = BrokerAccess.permissions(BrokerAccess.client)
        #expect("astro.jobs".wholeMatch(of: try Regex(client.write)) == nil)
        #expect("astro.requests".wholeMatch(of: try Regex(client.write)) != nil)
        #expect(Set(WorkerTopology.requestBindings.map(\.routingKey)) == Set(JobType.requestable.map(\.rawValue)))
        // Issue 29, F4: a request exchange is bound to queues only (a CC/BCC header's keys are
        // routed again at an exchange-to-exchange hop), and only to those every user that may
        // publish there may name: a header reaches every queue bound to the exchange.
        #expect(
            WorkerTopology.contract(
                retry: RetryPolicy(maxAttempts: 3, initialDelay: .seconds(1), maxDelay: .seconds(4))
            ).exchangeBindings.isEmpty
        )
        for binding in WorkerTopology.requestBindings {
            #expect(binding.queue == binding.routingKey)
            for service in BrokerAccess.services
            where binding.exchange.wholeMatch(of: try Regex(BrokerAccess.permissions(service).write)) != nil {
                #expect(
                    service.requests.map(\.rawValue).contains(binding.queue),
                    "\(service.user) may publish to \(binding.exchange), bound to \(binding.queue) it may not name"
                )
            }
        }
        #expect(
            !WorkerTopology.requestBindings.contains {
                $0.exchange == BrokerNames.gatewayRequestsExchange && $0.queue == "billing.recover-notifications"
            }
        )
        #expect(WorkerTopology.obsoleteRequestBindings.count == JobType.all.count)
        #expect(!JobType.requestable.contains(.reportGenerate) && !JobType.requestable.contains(.billingRefundCredit))
        // Every job type has exactly one consuming service.
        for type in JobType.all {
            #expect(BrokerAccess.services.filter { $0.consumes.contains(type) }.count == 1, "\(type.rawValue)")
        }
    }

    /// A user that may declare a queue chooses its dead-letter exchange and routing key, which
    /// the broker checks against no topic permission; an exchange-to-exchange binding needs only
    /// `read` on its source. Neither may open a way into astro.jobs.
    @Test func noUserThatPublishesJobsMayDeclareQueuesOrReadAnExchange() throws {
        for service in BrokerAccess.services {
            let granted = BrokerAccess.permissions(service)
            let configure = try Regex(granted.configure)
            let read = try Regex(granted.read)
            let write = try Regex(granted.write)
            for exchange in WorkerTopology.exchanges.map(\.name) {
                #expect(exchange.wholeMatch(of: configure) == nil, "\(service.user) may configure \(exchange)")
            }
            if "astro.jobs".wholeMatch(of: write) != nil {
                #expect(granted.configure == BrokerAccess.nothing, "\(service.user) writes astro.jobs and configures")
            }
            for exchange in [
                BrokerNames.jobsExchange, BrokerNames.requestsExchange, BrokerNames.gatewayRequestsExchange,
                BrokerNames.retryExchange,
            ] {
                #expect(exchange.wholeMatch(of: read) == nil, "\(service.user) may read \(exchange)")
            }
            #expect("astro.dlx".wholeMatch(of: write) == nil, "\(service.user) may publish to astro.dlx")
            // Every topic exchange has a topic permission (none left to "any routing key").
            #expect(
                Set(BrokerAccess.topicPermissions(service).map(\.exchange))
                    == Set([
                        BrokerNames.jobsExchange, BrokerNames.requestsExchange, BrokerNames.gatewayRequestsExchange,
                        BrokerNames.retryExchange, BrokerNames.eventsExchange,
                    ])
            )
        }
    }

    @Test func workersSendRetriesAndDeadLettersOnlyToTheirOwnQueues() throws {
        let chart = try #require(
            BrokerAccess.topicPermissions(BrokerAccess.chartWorker).first { $0.exchange == BrokerNames.retryExchange }
        )
        let pattern = try Regex(chart.write)
        #expect("chart.calculate.dead".wholeMatch(of: pattern) != nil)
        #expect("chart.calculate.retry.1000ms".wholeMatch(of: pattern) != nil)
        for other in ["billing.refund-credit.dead", "billing.refund-credit.retry.1000ms", "chart.calculate"] {
            #expect(other.wholeMatch(of: pattern) == nil, "\(other)")
        }
    }

    /// An event routed into astro.requests (a client may bind astro.events to it) must never be
    /// taken for a job.
    @Test func noEventTypeIsAJobType() {
        let jobs = Set(JobType.all.map(\.rawValue))
        for type in JobType.all { #expect(!jobs.contains(type.failedEvent.rawValue)) }
        for event in ["chart.calculated", "billing.credits-issued", "report.completed", "story.generated"] {
            #expect(!jobs.contains(event))
        }
    }
}

/// The broker's own bound on the dead-letter queues is a backstop above the maintenance task's
/// (issue 17): it covers exactly the dead-letter queues and never undercuts DEAD_LETTER_MAX_LENGTH.
@Suite struct DeadLetterBackstopPolicyTests {
    @Test func theBackstopCoversExactlyTheDeadLetterQueuesAboveTheTasksBound() throws {
        let policies = try #require(BrokerAccess.definitionsTemplate()["policies"]?.arrayValue)
        let backstop = try #require(
            policies.first { $0["name"]?.stringValue == BrokerAccess.deadLetterBackstopPolicy }
        )
        #expect(backstop["definition"]?["max-length"] == .number(Double(BrokerAccess.deadLetterBackstopLength)))
        #expect(backstop["definition"]?["overflow"] == "drop-head")
        // DEAD_LETTER_MAX_LENGTH accepts at most 1000000: the task always bounds first.
        #expect(BrokerAccess.deadLetterBackstopLength >= 1_000_000)
        let pattern = try Regex(try #require(backstop["pattern"]?.stringValue))
        for type in JobType.all {
            #expect(BrokerNames.deadLetterQueue(of: type.rawValue).firstMatch(of: pattern) != nil)
            #expect(type.rawValue.firstMatch(of: pattern) == nil, "\(type.rawValue) is a work queue")
        }
        #expect("chart.calculate.retry.1000ms".firstMatch(of: pattern) == nil)
        // One policy per queue applies: the work queues' delivery limit and this never overlap.
        let limit = try Regex(BrokerAccess.workQueuePattern)
        for type in JobType.all {
            #expect(BrokerNames.deadLetterQueue(of: type.rawValue).firstMatch(of: limit) == nil)
        }
    }
}
