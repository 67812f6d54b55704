import AppAttest
import AstroDomain
import Crypto
import Foundation
import Testing
import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The real `gateway` process with App Attest on, trusting a development authority shaped like
/// Apple's (`APP_ATTEST_ROOT_CA_FILE`, honoured outside production only): registration needs a
/// fresh challenge and a valid attestation, and with assertions required every authenticated
/// write needs a fresh assertion over its method, path and body.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GatewayAppAttestTests {
    typealias HTTPAnswer = GatewayHarness.HTTPAnswer
    static let appID = "ABCDE12345.com.astrosvitla.app"

    /// The development authority and its root written where the gateway reads it.
    static func authority() throws -> (DevAppAttest, URL) {
        let authority = try DevAppAttest()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("app-attest-root-\(UUID()).pem")
        try authority.rootPEM().write(to: file, atomically: true, encoding: .utf8)
        return (authority, file)
    }

    static func launch(rootFile: URL, requireAssertions: Bool, label: String) async throws -> GatewayHarness.Running {
        try await GatewayHarness.launch(
            chartWorker: requireAssertions,
            environment: [
                "APP_ATTEST_APP_ID": appID, "APP_ATTEST_ENVIRONMENT": "development",
                "APP_ATTEST_ROOT_CA_FILE": rootFile.path,
                "APP_ATTEST_REQUIRE_ASSERTIONS": requireAssertions ? "true" : "false",
            ],
            label: label
        )
    }

    /// A request whose body bytes are exactly `body` (the assertion is over them).
    static func send(
        _ method: String,
        _ url: String,
        token: String? = nil,
        body: Data? = nil,
        headers: [String: String] = [:]
    ) async throws -> HTTPAnswer {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.timeoutInterval = 10
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        return HTTPAnswer(status: http.statusCode, headers: [:], json: try? JSONValue.parse(data))
    }

    static func challenge(_ base: String) async throws -> String {
        let answer = try await send("POST", "\(base)/v1/devices/challenge")
        #expect(answer.status == 201)
        #expect(answer.json?["expiresIn"] == .number(300))
        return try #require(answer.json?["challenge"]?.stringValue)
    }

    static func registration(keyID: Data, attestation: Data, challenge: String) -> Data {
        JSONValue.object([
            "keyId": .string(keyID.base64EncodedString()),
            "attestation": .string(attestation.base64EncodedString()),
            "challenge": .string(challenge),
        ]).jsonData()
    }

    static func code(_ answer: HTTPAnswer) -> String? { answer.json?["code"]?.stringValue }

    @Test func registrationNeedsAFreshChallengeAndAValidAttestation() async throws {
        let (authority, rootFile) = try Self.authority()
        defer { try? FileManager.default.removeItem(at: rootFile) }
        let running = try await Self.launch(rootFile: rootFile, requireAssertions: false, label: "gateway-attest")
        defer { running.processes.stop() }
        let base = running.base

        // A valid attestation over a fresh challenge registers the device.
        let device = DevAppAttest.Device()
        let challenge = try await Self.challenge(base)
        let attestation = try authority.attest(device: device, challenge: Data(challenge.utf8), appID: Self.appID)
        let registered = try await Self.send(
            "POST",
            "\(base)/v1/devices",
            body: Self.registration(keyID: device.keyID, attestation: attestation, challenge: challenge)
        )
        #expect(registered.status == 201, "\(String(describing: registered.json))")
        #expect(registered.json?["accessToken"]?.stringValue != nil)

        // The challenge works once.
        let second = DevAppAttest.Device()
        let reused = try await Self.send(
            "POST",
            "\(base)/v1/devices",
            body: Self.registration(
                keyID: second.keyID,
                attestation: try authority.attest(device: second, challenge: Data(challenge.utf8), appID: Self.appID),
                challenge: challenge
            )
        )
        #expect(reused.status == 422)
        #expect(Self.code(reused) == "challenge-invalid")

        // An unknown challenge.
        let unknown = try await Self.send(
            "POST",
            "\(base)/v1/devices",
            body: Self.registration(keyID: second.keyID, attestation: attestation, challenge: "made-up")
        )
        #expect(Self.code(unknown) == "challenge-invalid")

        // Tampered attestations, each with a fresh challenge: made over another challenge, by
        // another authority, for another app.
        let stranger = try DevAppAttest()
        var otherApp = DevAppAttest.Options()
        otherApp.appID = "ABCDE12345.com.other.app"
        for label in ["another challenge", "another root", "another app"] {
            let fresh = try await Self.challenge(base)
            let object: Data
            switch label {
            case "another challenge":
                object = try authority.attest(device: second, challenge: Data("x".utf8), appID: Self.appID)
            case "another root":
                object = try stranger.attest(device: second, challenge: Data(fresh.utf8), appID: Self.appID)
            default:
                object = try authority.attest(
                    device: second,
                    challenge: Data(fresh.utf8),
                    appID: Self.appID,
                    options: otherApp
                )
            }
            let refused = try await Self.send(
                "POST",
                "\(base)/v1/devices",
                body: Self.registration(keyID: second.keyID, attestation: object, challenge: fresh)
            )
            #expect(refused.status == 422, "\(label)")
            #expect(Self.code(refused) == "attestation-invalid", "\(label)")
        }

        // The same key cannot register twice.
        let again = try await Self.challenge(base)
        let twice = try await Self.send(
            "POST",
            "\(base)/v1/devices",
            body: Self.registration(
                keyID: device.keyID,
                attestation: try authority.attest(device: device, challenge: Data(again.utf8), appID: Self.appID),
                challenge: again
            )
        )
        #expect(twice.status == 409)
        #expect(Self.code(twice) == "device-key-registered")

        // Registering without an attestation is refused when App Attest is on.
        let plain = try await Self.send("POST", "\(base)/v1/devices", body: Data("{}".utf8))
        #expect(plain.status == 400)
        #expect(Self.code(plain) == "invalid-key-id")

        running.processes.stop()
        #expect(!running.processes.output.contains("status not in the route table"))
    }

    @Test func writesNeedAFreshAssertionWhenRequired() async throws {
        let (authority, rootFile) = try Self.authority()
        defer { try? FileManager.default.removeItem(at: rootFile) }
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [.chartCalculate])
        defer { Task { await publisher.close() } }
        let running = try await Self.launch(rootFile: rootFile, requireAssertions: true, label: "gateway-assert")
        defer { running.processes.stop() }
        let base = running.base

        let device = DevAppAttest.Device()
        let challenge = try await Self.challenge(base)
        let registered = try await Self.send(
            "POST",
            "\(base)/v1/devices",
            body: Self.registration(
                keyID: device.keyID,
                attestation: try authority.attest(device: device, challenge: Data(challenge.utf8), appID: Self.appID),
                challenge: challenge
            )
        )
        #expect(registered.status == 201)
        let token = try #require(registered.json?["accessToken"]?.stringValue)

        let body = GatewayHarness.profile.jsonData()
        func assertion(_ counter: UInt32, over data: Data = body, path: String = "/v1/profiles") -> String {
            let bodyHash = SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
            let clientDataHash = Data(SHA256.hash(data: Data("POST \(path)\n\(bodyHash)".utf8)))
            return device.assertion(clientDataHash: clientDataHash, counter: counter, appID: Self.appID)
                .base64EncodedString()
        }
        let header = "X-App-Attest-Assertion"

        // No assertion.
        let missing = try await Self.send("POST", "\(base)/v1/profiles", token: token, body: body)
        #expect(missing.status == 401)
        #expect(Self.code(missing) == "assertion-required")

        // A valid one.
        let first = assertion(1)
        let accepted = try await Self.send(
            "POST",
            "\(base)/v1/profiles",
            token: token,
            body: body,
            headers: [header: first]
        )
        #expect(accepted.status == 202, "\(String(describing: accepted.json))")
        let jobID = try #require(accepted.json?["jobId"]?.stringValue)

        // The same one again: a replay.
        let replayed = try await Self.send(
            "POST",
            "\(base)/v1/profiles",
            token: token,
            body: body,
            headers: [header: first]
        )
        #expect(replayed.status == 401)
        #expect(Self.code(replayed) == "assertion-invalid")

        // One made over another body.
        let otherBody = Data("{\"profile\":{}}".utf8)
        let mismatched = try await Self.send(
            "POST",
            "\(base)/v1/profiles",
            token: token,
            body: body,
            headers: [header: assertion(2, over: otherBody)]
        )
        #expect(mismatched.status == 401)
        #expect(Self.code(mismatched) == "assertion-invalid")

        // Another device's key.
        let stranger = DevAppAttest.Device()
        let bodyHash = SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
        let strangers = stranger.assertion(
            clientDataHash: Data(SHA256.hash(data: Data("POST /v1/profiles\n\(bodyHash)".utf8))),
            counter: 3,
            appID: Self.appID
        ).base64EncodedString()
        let wrongKey = try await Self.send(
            "POST",
            "\(base)/v1/profiles",
            token: token,
            body: body,
            headers: [header: strangers]
        )
        #expect(Self.code(wrongKey) == "assertion-invalid")

        // A later counter works; reads need no assertion. Another profile: the first may exist by
        // now, and a second profile named as it is refused (409) before the assertion matters.
        let laterBody = Data(
            String(decoding: body, as: UTF8.self).replacingOccurrences(of: "\"Me\"", with: "\"Later\"").utf8
        )
        let next = try await Self.send(
            "POST",
            "\(base)/v1/profiles",
            token: token,
            body: laterBody,
            headers: [header: assertion(4, over: laterBody)]
        )
        #expect(next.status == 202, "\(String(describing: next.json))")
        let job = try await Self.send("GET", "\(base)/v1/jobs/\(jobID)", token: token)
        #expect(job.status == 200)

        // A user registered before App Attest has no key (none here: every registration is
        // attested), and an unauthenticated write still answers the token's 401.
        let anonymous = try await Self.send("POST", "\(base)/v1/profiles", body: body, headers: [header: assertion(5)])
        #expect(anonymous.status == 401)
        #expect(Self.code(anonymous) == "missing-token")

        running.processes.stop()
        #expect(!running.processes.output.contains("status not in the route table"))
    }
}
