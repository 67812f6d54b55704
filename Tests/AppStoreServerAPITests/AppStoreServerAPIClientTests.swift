import AppStoreServerFake
import Crypto
import Foundation
import Synchronization
import Testing

@testable import AppStoreServerAPI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

typealias RetryPolicy = AppStoreServerAPIConfiguration.RetryPolicy

extension RetryPolicy {
    /// Quick backoff so retry tests with real sleeping stay fast; a deadline (like the fixture's
    /// request timeout) that only a stalled machine reaches: tests of timeouts set their own.
    static let fast = RetryPolicy(
        maxAttempts: 4,
        baseDelay: .milliseconds(10),
        maxDelay: .milliseconds(40),
        deadline: .seconds(60)
    )
}

/// A fake App Store and a client configured for it.
struct Fixture {
    static let bundleID = "com.astrosvitla.app"
    static let keyID = "2X9R4HXF34"
    static let issuerID = "57246542-96fe-1a63-e053-0824d011072a"
    /// A JWS-shaped string; the fake hands it back as it is.
    static let signedTransaction =
        "eyJhbGciOiJFUzI1NiIsIng1YyI6W119.eyJ0cmFuc2FjdGlvbklkIjoiMjAwMDAwMDQxMTA0NzY0NyJ9.c2lnbmF0dXJlLWJ5dGVz"

    let key = P256.Signing.PrivateKey()
    let fake: AppStoreServerFake

    init() throws {
        fake = try AppStoreServerFake(
            bundleID: Self.bundleID,
            keyID: Self.keyID,
            issuerID: Self.issuerID,
            publicKey: key.publicKey
        )
    }

    func configuration(
        signingKey: P256.Signing.PrivateKey? = nil,
        bundleID: String = Fixture.bundleID,
        requestTimeout: Duration = .seconds(30),
        retryPolicy: RetryPolicy = .fast
    ) throws -> AppStoreServerAPIConfiguration {
        try AppStoreServerAPIConfiguration(
            baseURL: fake.baseURL,
            keyID: Self.keyID,
            issuerID: Self.issuerID,
            bundleID: bundleID,
            signingKey: signingKey ?? key,
            requestTimeout: requestTimeout,
            retryPolicy: retryPolicy
        )
    }

    func client(
        signingKey: P256.Signing.PrivateKey? = nil,
        bundleID: String = Fixture.bundleID,
        requestTimeout: Duration = .seconds(30),
        retryPolicy: RetryPolicy = .fast,
        timing: AppStoreServerAPIClient.Timing = .system
    ) throws -> AppStoreServerAPIClient {
        AppStoreServerAPIClient(
            configuration: try configuration(
                signingKey: signingKey,
                bundleID: bundleID,
                requestTimeout: requestTimeout,
                retryPolicy: retryPolicy
            ),
            timing: timing
        )
    }
}

/// Virtual time: `sleep` returns at once and moves the monotonic clock; the wall clock can be moved.
final class VirtualTiming: Sendable {
    private let offset = Mutex<Duration>(.zero)
    private let wallOffset = Mutex<TimeInterval>(0)
    private let recorded = Mutex<[Duration]>([])
    let randomValue: Double

    init(random: Double = 0.5) { self.randomValue = random }

    var sleeps: [Duration] { recorded.withLock { $0 } }

    func moveWallClock(by seconds: TimeInterval) { wallOffset.withLock { $0 += seconds } }

    var timing: AppStoreServerAPIClient.Timing {
        AppStoreServerAPIClient.Timing(
            wallClock: { Date().addingTimeInterval(self.wallOffset.withLock { $0 }) },
            now: { ContinuousClock.now + self.offset.withLock { $0 } },
            sleep: { duration in
                try Task.checkCancellation()
                self.recorded.withLock { $0.append(duration) }
                self.offset.withLock { $0 += duration }
            },
            random: { self.randomValue }
        )
    }
}

/// The error a look-up threw, or `nil` when it succeeded.
func lookupError(_ client: AppStoreServerAPIClient, _ id: String) async -> AppStoreAPIError? {
    do {
        _ = try await client.signedTransactionInfo(transactionID: id)
        return nil
    } catch {
        return error
    }
}

@Suite("AppStoreServerAPIClient against the fake", .timeLimit(.minutes(1)))
struct AppStoreServerAPIClientTests {
    @Test("returns the registered signedTransactionInfo")
    func success() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "2000000411047647")
        let client = try fixture.client()
        let signed = try await client.signedTransactionInfo(transactionID: "2000000411047647")
        #expect(signed == Fixture.signedTransaction)
        #expect(fixture.fake.requestCount == 1)
        #expect(fixture.fake.requestCount(path: "/inApps/v1/transactions/2000000411047647") == 1)
    }

    @Test("404 is transaction-not-found with Apple's 4040010, not retried")
    func notFound() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        let error = try #require(await lookupError(try fixture.client(), "1234567890"))
        #expect(error.code == "transaction-not-found")
        #expect(error.kind == .transactionNotFound)
        #expect(error.errorCode == 4_040_010)
        #expect(error.errorMessage == "Transaction id not found.")
        #expect(error.httpStatus == 404)
        #expect(error.attempts == 1)
        #expect(!error.isTransient)
        #expect(fixture.fake.requestCount == 1)
    }

    @Test("400 from Apple is invalid-transaction-id with 4000006, not retried")
    func badRequest() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueueFailure(
            .appleError(status: 400, errorCode: 4_000_006, errorMessage: "Invalid transaction id.")
        )
        let error = try #require(await lookupError(try fixture.client(), "42"))
        #expect(error.code == "invalid-transaction-id")
        #expect(error.errorCode == 4_000_006)
        #expect(error.httpStatus == 400)
        #expect(error.attempts == 1)
        #expect(!error.isTransient)
        #expect(fixture.fake.requestCount == 1)
    }

    @Test(
        "an id that is not digits is refused locally, without a request",
        arguments: ["", "abc", "12a4", " 123", "١٢٣", "1/2"]
    )
    func localValidation(id: String) async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        let error = try #require(await lookupError(try fixture.client(), id))
        #expect(error.code == "invalid-transaction-id")
        #expect(error.attempts == 0)
        #expect(error.httpStatus == nil)
        #expect(fixture.fake.requestCount == 0)
    }

    @Test("401 with an empty body when the token is signed with another key; not retried")
    func wrongKey() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "1")
        let error = try #require(await lookupError(try fixture.client(signingKey: P256.Signing.PrivateKey()), "1"))
        #expect(error.code == "unauthorized")
        #expect(error.httpStatus == 401)
        #expect(error.errorCode == nil)
        #expect(error.attempts == 1)
        #expect(!error.isTransient)
        #expect(fixture.fake.requestCount == 1)
        #expect(fixture.fake.unauthorizedCount == 1)
        #expect(
            fixture.fake.lastAuthorizationClaims?.rejection == "the signature does not verify with the expected key"
        )
    }

    @Test("401 for a wrong bundle id and for an expired token")
    func wrongClaims() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "1")
        let wrongBundle = try #require(await lookupError(try fixture.client(bundleID: "com.example.other"), "1"))
        #expect(wrongBundle.code == "unauthorized")
        #expect(fixture.fake.lastAuthorizationClaims?.rejection == "bid does not match")

        let past = VirtualTiming()
        past.moveWallClock(by: -3_600)
        let expired = try #require(await lookupError(try fixture.client(timing: past.timing), "1"))
        #expect(expired.code == "unauthorized")
        #expect(fixture.fake.lastAuthorizationClaims?.rejection == "expired")
        #expect(fixture.fake.requestCount == 2)
    }

    @Test("429 with Retry-After: 1 waits a second, then succeeds")
    func rateLimitedThenSuccess() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "7")
        fixture.fake.enqueueFailure(.rateLimited(retryAfter: 1))
        let client = try fixture.client()
        let start = ContinuousClock.now
        let signed = try await client.signedTransactionInfo(transactionID: "7")
        let seconds = elapsed(since: start)
        #expect(signed == Fixture.signedTransaction)
        #expect(seconds >= 0.95, "waited only \(seconds) s")
        // Far below the client's longest backoff; only a machine stalled for half a minute fails it.
        #expect(seconds < 30, "\(seconds) s")
        #expect(fixture.fake.requestCount == 2)
    }

    @Test("500 twice, then success, with jittered backoff under the cap")
    func serverErrorsThenSuccess() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "8")
        fixture.fake.enqueueFailure(.serverError)
        fixture.fake.enqueueFailure(.retryableServerError)
        let virtual = VirtualTiming(random: 0.5)
        let policy = RetryPolicy(maxAttempts: 4, baseDelay: .milliseconds(500), maxDelay: .seconds(8))
        let client = try fixture.client(retryPolicy: policy, timing: virtual.timing)
        let signed = try await client.signedTransactionInfo(transactionID: "8")
        #expect(signed == Fixture.signedTransaction)
        #expect(fixture.fake.requestCount == 3)
        // Half of 0.5 s, then half of 1 s.
        #expect(virtual.sleeps == [.milliseconds(250), .milliseconds(500)])
    }

    @Test("retries exhausted: server-error with attempts == maxAttempts")
    func retriesExhausted() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "9")
        fixture.fake.enqueueFailure(.serverError, count: 5)
        let virtual = VirtualTiming()
        let client = try fixture.client(retryPolicy: RetryPolicy(maxAttempts: 4), timing: virtual.timing)
        let error = try #require(await lookupError(client, "9"))
        #expect(error.code == "server-error")
        #expect(error.attempts == 4)
        #expect(error.httpStatus == 500)
        #expect(error.errorCode == 5_000_000)
        #expect(error.isTransient)
        #expect(fixture.fake.requestCount == 4)
        #expect(virtual.sleeps.count == 3)
        #expect(fixture.fake.pendingFailures == [.serverError])
    }

    @Test("a hanging request times out after the request timeout and the retry succeeds")
    func hangThenSuccess() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "10")
        fixture.fake.enqueueFailure(.hang)
        let client = try fixture.client(requestTimeout: .milliseconds(500))
        let start = ContinuousClock.now
        let signed = try await client.signedTransactionInfo(transactionID: "10")
        let seconds = elapsed(since: start)
        #expect(signed == Fixture.signedTransaction)
        #expect(seconds >= 0.45, "\(seconds) s")
        // The fake hangs until it is stopped, so any finite bound shows the timeout fired; a
        // tight one only measured the machine (3 s failed once with all unit suites in parallel).
        #expect(seconds < 30, "\(seconds) s")
        #expect(fixture.fake.requestCount == 2)
    }

    @Test("with one attempt, a hang is a timeout error")
    func hangIsTimeout() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueueFailure(.hang)
        let client = try fixture.client(requestTimeout: .milliseconds(500), retryPolicy: .none)
        let error = try #require(await lookupError(client, "11"))
        #expect(error.code == "timeout")
        #expect(error.isTransient)
        #expect(error.attempts == 1)
    }

    @Test("the total deadline ends the retries")
    func deadline() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueueFailure(.hang, count: 10)
        let policy = RetryPolicy(
            maxAttempts: 10,
            baseDelay: .milliseconds(20),
            maxDelay: .milliseconds(20),
            deadline: .milliseconds(1_300)
        )
        let client = try fixture.client(requestTimeout: .milliseconds(500), retryPolicy: policy)
        let start = ContinuousClock.now
        let error = try #require(await lookupError(client, "12"))
        let seconds = elapsed(since: start)
        #expect(error.code == "deadline-exceeded")
        #expect(error.isTransient)
        // Ten attempts of 0.5 s would take over 5 s: the deadline stops them after a few (counted,
        // not timed: a loaded machine stretches durations). A timed-out attempt can end late, so
        // one attempt may use it all up.
        #expect((1...4).contains(error.attempts), "\(error.attempts) attempts")
        #expect(fixture.fake.requestCount <= 4)
        #expect(seconds >= 1.2, "\(seconds) s")
    }

    @Test("a Retry-After past the deadline gives up at once instead of sleeping")
    func retryAfterBeyondDeadline() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueueFailure(.rateLimited(retryAfter: 120))
        let virtual = VirtualTiming()
        let client = try fixture.client(retryPolicy: RetryPolicy(deadline: .seconds(30)), timing: virtual.timing)
        let error = try #require(await lookupError(client, "13"))
        #expect(error.code == "deadline-exceeded")
        #expect(error.httpStatus == 429)
        #expect(error.errorCode == 4_290_000)
        #expect(error.retryAfter == .seconds(120))
        #expect(error.attempts == 1)
        #expect(virtual.sleeps.isEmpty)
    }

    @Test("rate limits on every attempt: rate-limited, honouring Retry-After each time")
    func rateLimitedExhausted() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueueFailure(.rateLimited(retryAfter: 2), count: 3)
        let virtual = VirtualTiming()
        let client = try fixture.client(retryPolicy: RetryPolicy(maxAttempts: 3), timing: virtual.timing)
        let error = try #require(await lookupError(client, "14"))
        #expect(error.code == "rate-limited")
        #expect(error.attempts == 3)
        #expect(virtual.sleeps == [.seconds(2), .seconds(2)])
    }

    @Test("a 200 that is not JSON is malformed-response, not retried")
    func malformedBody() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueueFailure(.malformedBody)
        let error = try #require(await lookupError(try fixture.client(), "15"))
        #expect(error.code == "malformed-response")
        #expect(error.httpStatus == 200)
        #expect(!error.isTransient)
        #expect(fixture.fake.requestCount == 1)
    }

    @Test("a dropped connection is a network error, retried")
    func closedConnection() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "16")
        fixture.fake.enqueueFailure(.closeConnection)
        let once = try #require(await lookupError(try fixture.client(retryPolicy: .none), "16"))
        #expect(once.code == "network")
        #expect(once.isTransient)
        #expect(fixture.fake.requestCount == 1)

        fixture.fake.enqueueFailure(.closeConnection)
        let signed = try await fixture.client().signedTransactionInfo(transactionID: "16")
        #expect(signed == Fixture.signedTransaction)
        #expect(fixture.fake.requestCount == 3)
    }

    @Test("the JWT carries the right header and claims and is reused across calls")
    func tokenClaimsAndReuse() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "17")
        let client = try fixture.client()
        let now = Int(Date().timeIntervalSince1970)
        _ = try await client.signedTransactionInfo(transactionID: "17")
        let first = try #require(fixture.fake.lastAuthorizationClaims)
        _ = try await client.signedTransactionInfo(transactionID: "17")
        let second = try #require(fixture.fake.lastAuthorizationClaims)

        #expect(first.accepted)
        #expect(first.algorithm == "ES256")
        #expect(first.keyID == Fixture.keyID)
        #expect(first.type == "JWT")
        #expect(first.issuer == Fixture.issuerID)
        #expect(first.audience == "appstoreconnect-v1")
        #expect(first.bundleID == Fixture.bundleID)
        let issuedAt = try #require(first.issuedAt)
        #expect(abs(issuedAt - now) <= 2)
        #expect(first.expiresAt == issuedAt + 300)
        #expect(second.token == first.token)
        #expect(fixture.fake.lastAuthorizationHeader == "Bearer \(first.token)")
        // base64url without padding, three parts, a 64-byte raw signature.
        let parts = first.token.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(!first.token.contains("=") && !first.token.contains("+") && !first.token.contains("/"))
        #expect(parts[2].count == 86)
    }

    @Test("the token is renewed a minute before it expires")
    func tokenRenewal() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "18")
        let virtual = VirtualTiming()
        let client = try fixture.client(timing: virtual.timing)
        _ = try await client.signedTransactionInfo(transactionID: "18")
        let first = try #require(fixture.fake.lastAuthorizationClaims?.token)
        virtual.moveWallClock(by: 180)
        _ = try await client.signedTransactionInfo(transactionID: "18")
        #expect(fixture.fake.lastAuthorizationClaims?.token == first)
        virtual.moveWallClock(by: 61)
        _ = try await client.signedTransactionInfo(transactionID: "18")
        let renewed = try #require(fixture.fake.lastAuthorizationClaims)
        #expect(renewed.token != first)
        #expect(renewed.accepted)
    }

    @Test("cancelling the calling task ends a hanging call at once")
    func cancellation() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueueFailure(.hang)
        let client = try fixture.client(requestTimeout: .seconds(300))
        let start = ContinuousClock.now
        let call = Task { await lookupError(client, "19") }
        try await Task.sleep(for: .milliseconds(300))
        call.cancel()
        let error = await call.value
        #expect(error?.code == "cancelled")
        #expect(error?.isTransient == true)
        // Not cancelled, the call would wait out the 300 s request timeout; the bound leaves room
        // for a machine stalled by other work.
        #expect(elapsed(since: start) < 60)
    }

    @Test("the fake answers like Apple: 400 for a non-digit id, 401 without a token, 404 elsewhere")
    func fakeRoutes() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        let configuration = try fixture.configuration()
        let token = try BearerTokenProvider.sign(
            configuration: configuration,
            issuedAt: Int(Date().timeIntervalSince1970)
        )
        let session = makeTestSession()
        let base = fixture.fake.baseURL
        let bad = await fetch(
            session,
            base.appendingPathComponent("inApps/v1/transactions/abc"),
            headers: ["Authorization": "Bearer \(token)"]
        )
        #expect(bad.status == 400)
        #expect(String(decoding: bad.body, as: UTF8.self).contains("4000006"))
        let anonymous = await fetch(session, base.appendingPathComponent("inApps/v1/transactions/1"))
        #expect(anonymous.status == 401)
        #expect(anonymous.body.isEmpty)
        let elsewhere = await fetch(
            session,
            base.appendingPathComponent("inApps/v2/history/1"),
            headers: ["Authorization": "Bearer \(token)"]
        )
        #expect(elsewhere.status == 404)
        #expect(fixture.fake.requestsPerPath["/inApps/v1/transactions/abc"] == 1)
        #expect(fixture.fake.requestCount == 3)
        #expect(fixture.fake.unauthorizedCount == 1)
    }
}
