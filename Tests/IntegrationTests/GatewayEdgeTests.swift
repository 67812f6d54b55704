import AMQP
import AstroDomain
import Billing
import Crypto
import Foundation
import Gateway
import Postgres
import StoreKitVerification
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

/// Issue 29 ("Hardening, round two"), the gateway's edge, on the real gateway process with the
/// real broker and database: forged App Store notifications leave nothing behind, production
/// needs App Attest unless told otherwise, refresh-token reuse revokes the family, an access
/// token may not outlive the configured lifetime, `/metrics` is off the API's port, and
/// connections beyond the limit are closed.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct GatewayEdgeTests {
    static func jobCount(_ pool: PostgresPool, kind: JobType) async throws -> Int {
        try await pool.withConnection { database in
            try database.query("SELECT count(*)::int AS n FROM jobs WHERE kind = $1", [kind.rawValue]).first?
                .decode(Int.self, "n") ?? -1
        }
    }

    /// A forged notification shaped like the attack's: a valid compact JWS (ES256 header with a
    /// fake three-certificate `x5c`, a notification payload, 64 signature bytes), about 56 KB,
    /// with `marker` in its payload (to look for in the logs).
    static func forgedNotification(marker: String) -> Data {
        func base64URL(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        func part(_ json: JSONValue) -> String { base64URL(json.jsonData()) }
        let fakeCertificate = Data((0..<5_500).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let header = part(["alg": "ES256", "x5c": [.string(fakeCertificate), .string(fakeCertificate), "MIIB"]])
        let payload = part([
            "notificationType": "REFUND", "notificationUUID": .string(UUID().uuidString.lowercased()),
            "data": [
                "bundleId": .string(BillingDefaults.bundleID), "environment": "Sandbox",
                "signedTransactionInfo": .string(marker + String(repeating: "x", count: 24_000)),
            ],
        ])
        let signature = base64URL(Data((0..<64).map { _ in UInt8.random(in: 0...255) }))
        return GatewayAppleTests.notificationBody("\(header).\(payload).\(signature)")
    }

    /// F3: forged notifications are answered 403 (then 429 past the per-address limit) and leave
    /// no job row, no message and no dead letter; a genuine, test-PKI-signed one is still queued.
    @Test func forgedNotificationsLeaveNothingBehindAndGenuineOnesAreQueued() async throws {
        let queue = JobType.billingStoreNotification.rawValue
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [.billingStoreNotification])
        _ = try await publisher.purgeQueue(BrokerNames.deadLetterQueue(of: queue))
        let pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        defer {
            Task {
                await publisher.close()
                await pool.close()
            }
        }
        // No billing-worker: whatever the gateway queues stays in the queue, to be counted.
        let gateway = try await GatewayHarness.launch(
            environment: ["RATE_LIMIT_APPSTORE_PER_MINUTE": "60", "RATE_LIMIT_APPSTORE_BURST": "20"],
            label: "gateway-edge-forged"
        )
        defer { gateway.processes.stop() }
        let endpoint = "\(gateway.base)/v1/appstore/notifications"
        let jobsBefore = try await Self.jobCount(pool, kind: .billingStoreNotification)

        // The attack: 220 forged notifications of ~56 KB from one address.
        let marker = "forged-body-\(UUID().uuidString)"
        let body = Self.forgedNotification(marker: marker)
        #expect((50_000...65_536).contains(body.count), "\(body.count) bytes")
        var statuses: [Int: Int] = [:]
        for _ in 0..<220 {
            let answer = try await GatewayAppleTests.post(endpoint, body: body)
            statuses[answer.status, default: 0] += 1
            if answer.status == 403 { #expect(answer.json?["code"] == "notification-unverified") }
        }
        #expect(statuses[200] == nil, "forged notifications accepted: \(statuses)")
        // The burst (20) and what refilled meanwhile were verified and refused; the rest limited.
        #expect((20...60).contains(statuses[403] ?? 0), "\(statuses)")
        #expect((statuses[429] ?? 0) >= 160, "\(statuses)")
        #expect(try await Self.jobCount(pool, kind: .billingStoreNotification) == jobsBefore)
        #expect(try await publisher.queueState(queue).messageCount == 0)
        #expect(try await publisher.queueState(BrokerNames.deadLetterQueue(of: queue)).messageCount == 0)
        let logs = gateway.processes.output
        #expect(logs.contains("notification-unverified"), "\(logs.suffix(2000))")
        #expect(logs.contains("REFUND"), "the claimed type is not logged")
        #expect(!logs.contains(marker), "a forged body reached the log")

        // Apple's genuine notification (the test PKI, which the billing-worker trusts too), once
        // the address's bucket has a token again: queued.
        try await Task.sleep(for: .milliseconds(1_100))
        let (transaction, _) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack5",
            user: nil
        )
        let genuine = try GatewayAppleTests.signedNotification("REFUND", about: transaction, uuid: UUID())
        let answer = try await GatewayAppleTests.post(endpoint, body: GatewayAppleTests.notificationBody(genuine))
        #expect(answer.status == 200, "\(String(describing: answer.json))\n\(gateway.processes.output.suffix(2000))")
        #expect(answer.json?["jobId"]?.stringValue != nil)
        #expect(try await publisher.queueState(queue).messageCount == 1)
        let metrics = try await GatewayHarness.rawGet(GatewayHarness.metricsURL(gateway.base))
        #expect(metrics.contains(#"gateway_appstore_notifications_total{outcome="queued"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"gateway_appstore_notifications_total{outcome="unverified"}"#))
        #expect(metrics.contains(#"gateway_rate_limited_total{limit="appstore"}"#))
        _ = try await publisher.purgeQueue(queue)
        #expect(!gateway.processes.output.contains("status not in the route table"))
    }

    /// F5: `GATEWAY_ENV=production` without App Attest exits 2 naming the variable; with
    /// `APP_ATTEST_ALLOW_UNATTESTED=true` it starts and warns.
    @Test func productionWithoutAppAttestRefusesToStartUnlessAllowed() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-edge-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let keyFile = folder.appendingPathComponent("signing.pem")
        try P256.Signing.PrivateKey().pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        let production: [String: String] = [
            "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.gateway),
            "DATABASE_URL": try await GatewayHarness.gatewayDatabaseURL(),
            "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "info",
            "GATEWAY_ENV": "production", "GATEWAY_SIGNING_KEY_FILE": keyFile.path,
        ]
        let refused = try await GatewayHarness.start("gateway", environment: production, label: "gateway-prod")
        let refusedProcesses = GatewayHarness.Processes(processes: [refused])
        defer { refusedProcesses.stop() }
        #expect(try await refused.waitForExit(timeout: .seconds(60)) == 2, "\(refusedProcesses.output)")
        #expect(refusedProcesses.output.contains("APP_ATTEST_APP_ID"), "\(refusedProcesses.output)")
        #expect(refusedProcesses.output.contains("APP_ATTEST_ALLOW_UNATTESTED=true"))

        let allowed = try await GatewayHarness.start(
            "gateway",
            environment: production.merging(["APP_ATTEST_ALLOW_UNATTESTED": "true"]) { $1 },
            label: "gateway-prod-unattested"
        )
        let allowedProcesses = GatewayHarness.Processes(processes: [allowed])
        defer { allowedProcesses.stop() }
        let base = try await GatewayHarness.listening(allowed)
        try await RuntimeTestEnvironment.eventually("the unattested production gateway is ready", timeout: .seconds(60))
        {
            guard allowed.isRunning else { throw TestFailure("exited: \(allowedProcesses.output)") }
            return (try? await GatewayHarness.request("GET", "\(base)/readyz"))?.status == 200
        }
        #expect(allowedProcesses.output.contains("App Attest is off in production"), "\(allowedProcesses.output)")
        #expect(allowedProcesses.output.contains("warning"), "\(allowedProcesses.output)")
    }

    /// A reused refresh token revokes its whole family, the live token included; another
    /// device's family is untouched.
    @Test func aReusedRefreshTokenRevokesItsFamily() async throws {
        let gateway = try await GatewayHarness.launch(label: "gateway-edge-refresh")
        defer { gateway.processes.stop() }
        let base = gateway.base
        func refresh(_ token: String) async throws -> GatewayHarness.HTTPAnswer {
            try await GatewayHarness.request("POST", "\(base)/v1/token", body: ["refreshToken": .string(token)])
        }
        let device = try await GatewayHarness.request("POST", "\(base)/v1/devices")
        let first = try #require(device.json?["refreshToken"]?.stringValue)
        let other = try #require(
            try await GatewayHarness.request("POST", "\(base)/v1/devices").json?["refreshToken"]?.stringValue
        )
        let secondAnswer = try await refresh(first)
        #expect(secondAnswer.status == 200)
        let second = try #require(secondAnswer.json?["refreshToken"]?.stringValue)
        let third = try #require(try await refresh(second).json?["refreshToken"]?.stringValue)

        // A copy of the first token (stolen, or replayed) comes back: refused, and the family
        // with it — the latest token no longer works either.
        let reused = try await refresh(first)
        #expect(reused.status == 401)
        #expect(reused.json?["code"] == "invalid-refresh-token")
        let afterReuse = try await refresh(third)
        #expect(afterReuse.status == 401, "the live token of a revoked family still refreshed")
        #expect(gateway.processes.output.contains("refresh token reused"))
        // The other device is not affected.
        #expect(try await refresh(other).status == 200)
    }

    /// An access token signed with the gateway's own key whose `exp` lies beyond `iat` + the
    /// configured lifetime is 401; one within it works.
    @Test func anAccessTokenOutlivingTheLifetimeIsRefused() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-edge-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let key = P256.Signing.PrivateKey()
        let keyFile = folder.appendingPathComponent("signing.pem")
        try key.pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        let gateway = try await GatewayHarness.launch(
            environment: [
                "GATEWAY_SIGNING_KEY_FILE": keyFile.path, "GATEWAY_SIGNING_KEY_ID": "edge",
                "ACCESS_TOKEN_TTL_SECONDS": "300",
            ],
            label: "gateway-edge-lifetime"
        )
        defer { gateway.processes.stop() }
        let (userText, _) = try await GatewayHarness.register(gateway.base)
        let user = try #require(UserID(userText))
        let now = Int64(Date().timeIntervalSince1970)
        func token(lifetime: Int64) throws -> String {
            try AccessTokenSigner.sign(
                claims: AccessTokenClaims(
                    subject: user,
                    issuedAt: now,
                    expiresAt: now + lifetime,
                    issuer: "astrosvitla-gateway",
                    audience: "astrosvitla-app"
                ),
                header: ["alg": "ES256", "typ": "JWT", "kid": "edge"],
                key: key
            )
        }
        let job = "\(gateway.base)/v1/jobs/\(UUID().uuidString.lowercased())"
        let longLived = try await GatewayHarness.request("GET", job, token: try token(lifetime: 30 * 86_400))
        #expect(longLived.status == 401)
        #expect(longLived.json?["code"] == "token-lifetime-exceeded")
        let oneTooMany = try await GatewayHarness.request("GET", job, token: try token(lifetime: 301))
        #expect(oneTooMany.status == 401)
        // Within the lifetime: authenticated (an unknown job is 404).
        #expect(try await GatewayHarness.request("GET", job, token: try token(lifetime: 300)).status == 404)
    }

    /// F14: the API's port has no `/metrics`; the metrics port serves it and nothing else.
    @Test func metricsAreServedOnTheirOwnPortOnly() async throws {
        let gateway = try await GatewayHarness.launch(label: "gateway-edge-metrics")
        defer { gateway.processes.stop() }
        let onAPI = try await GatewayHarness.request("GET", "\(gateway.base)/metrics")
        #expect(onAPI.status == 404)
        let metrics = try await GatewayHarness.rawGet(GatewayHarness.metricsURL(gateway.base))
        #expect(metrics.contains("gateway_requests_total"), "\(metrics)")
        #expect(metrics.contains("gateway_connections_open"), "\(metrics)")
        let metricsBase = GatewayHarness.metricsURL(gateway.base).replacingOccurrences(of: "/metrics", with: "")
        #expect(try await GatewayHarness.request("GET", "\(metricsBase)/v1/devices").status == 404)
        #expect(try await GatewayHarness.request("GET", "\(metricsBase)/readyz").status == 404)
    }

    /// Opens a TCP connection to 127.0.0.1:`port`; returns its descriptor.
    static func connect(port: Int) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(socket)
            throw POSIXError(.ECONNREFUSED)
        }
        return socket
    }

    /// Whether the server closed `socket` (end of stream or reset), without waiting.
    static func isClosedByPeer(_ socket: Int32) -> Bool {
        var byte: UInt8 = 0
        let read = Glibc.recv(socket, &byte, 1, Int32(MSG_DONTWAIT))
        return read == 0 || (read < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    static func sample(_ name: String, in text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// F13: beyond `GATEWAY_MAX_CONNECTIONS` a connection is closed at once and counted; the
    /// places come back when clients leave, and requests are served again.
    @Test func connectionsBeyondTheLimitAreClosedAndCounted() async throws {
        let gateway = try await GatewayHarness.launch(
            environment: ["GATEWAY_MAX_CONNECTIONS": "64", "REQUEST_TIMEOUT_MS": "60000"],
            label: "gateway-edge-connections"
        )
        defer { gateway.processes.stop() }
        let port = try #require(URLComponents(string: gateway.base)?.port)
        var sockets: [Int32] = []
        defer { for socket in sockets { Glibc.close(socket) } }
        for _ in 0..<200 { sockets.append(try Self.connect(port: port)) }
        var closed = 0
        try await RuntimeTestEnvironment.eventually(
            "the gateway closed the connections beyond 64",
            timeout: .seconds(20)
        ) {
            closed = sockets.filter(Self.isClosedByPeer).count
            return closed >= 136
        }
        // The places there were stay open (a kept-alive connection of the readiness probe may
        // hold one more).
        #expect((136...137).contains(closed), "\(closed) of 200 closed")
        let metricsURL = GatewayHarness.metricsURL(gateway.base)
        let during = try await GatewayHarness.rawGet(metricsURL)
        #expect(Self.sample("gateway_connections_open", in: during) == 64, "\(during)")
        #expect((Self.sample("gateway_connections_refused_total", in: during) ?? 0) >= 136, "\(during)")
        // A new client now is closed too, unread.
        let late = try Self.connect(port: port)
        defer { Glibc.close(late) }
        try await RuntimeTestEnvironment.eventually("a connection beyond the limit is closed", timeout: .seconds(10)) {
            Self.isClosedByPeer(late)
        }
        for socket in sockets { Glibc.close(socket) }
        sockets = []
        try await RuntimeTestEnvironment.eventually("the places come back", timeout: .seconds(20)) {
            (try? await GatewayHarness.request("GET", "\(gateway.base)/healthz", timeout: 3))?.status == 200
        }
        try await RuntimeTestEnvironment.eventually("gateway_connections_open falls", timeout: .seconds(10)) {
            (Self.sample("gateway_connections_open", in: try await GatewayHarness.rawGet(metricsURL)) ?? 99) <= 2
        }
    }
}
