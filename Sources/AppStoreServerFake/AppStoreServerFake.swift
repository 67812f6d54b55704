import Crypto
import Foundation
import LoopbackHTTP
import Synchronization

/// A local App Store Server API on 127.0.0.1 that behaves like Apple's, errors included.
///
/// Every request must carry a valid ES256 bearer token for the configured key, key id, issuer
/// id and bundle id (else 401 with an empty body, as Apple answers). `GET
/// /inApps/v1/transactions/{id}` answers 400 `4000006` for an id that is not digits, 404 `4040010`
/// for an unknown one and 200 `{"signedTransactionInfo": …}` for one registered with
/// `register(signedTransaction:forTransactionID:)` (the fake signs nothing: tests hand it JWS
/// strings). Failures queued with `enqueueFailure(_:)` answer authorized requests first, in order.
public final class AppStoreServerFake: Sendable {
    /// A scripted failure, used up by one request.
    public enum Failure: Sendable, Hashable {
        /// 429 `{"errorCode":4290000,"errorMessage":"Rate limit exceeded."}`, with `Retry-After: n` when given.
        case rateLimited(retryAfter: Int?)
        /// 500 `{"errorCode":5000000,"errorMessage":"An unknown error occurred."}`.
        case serverError
        /// 500 `{"errorCode":5000001,"errorMessage":"An unknown error occurred. Please try again."}`.
        case retryableServerError
        /// Never answers; the connection stays open until the client gives up or the fake stops.
        case hang
        /// 200 whose body is not valid JSON.
        case malformedBody
        /// Closes the connection without answering.
        case closeConnection
        /// Any other Apple error: `status` with `{"errorCode": errorCode, "errorMessage": errorMessage}`
        /// (e.g. 400 `4000006`, or 404 `4040002 AccountNotFoundRetryableError`).
        case appleError(status: Int, errorCode: Int, errorMessage: String)
    }

    public let bundleID: String
    public let keyID: String
    public let issuerID: String
    private let server: LoopbackHTTPServer
    let store: FakeStore

    /// Starts the fake on a free loopback port.
    /// - Parameters:
    ///   - bundleID: the `bid` tokens must carry.
    ///   - keyID: the `kid` tokens must carry.
    ///   - issuerID: the `iss` tokens must carry.
    ///   - publicKey: the key tokens must be signed for (the client's private key's public half).
    ///   - now: the fake's clock for `exp` checks.
    /// - Throws: `LoopbackHTTPError` when no port can be bound.
    public init(
        bundleID: String,
        keyID: String,
        issuerID: String,
        publicKey: P256.Signing.PublicKey,
        now: @escaping @Sendable () -> Date = { Date() }
    ) throws(LoopbackHTTPError) {
        self.bundleID = bundleID
        self.keyID = keyID
        self.issuerID = issuerID
        let store = FakeStore(
            check: BearerTokenCheck(
                bundleID: bundleID,
                keyID: keyID,
                issuerID: issuerID,
                publicKeyBytes: publicKey.x963Representation
            ),
            now: now
        )
        self.store = store
        // The handler holds the store, not the fake, so releasing the fake stops the server.
        self.server = try LoopbackHTTPServer(name: "appstore-fake") { request in
            await store.handle(request)
        }
    }

    /// `http://127.0.0.1:<port>`, to use as the client's base URL.
    public var baseURL: URL { server.baseURL }

    /// The fake's port on 127.0.0.1.
    public var port: Int { server.port }

    /// Makes `GET /inApps/v1/transactions/{transactionID}` answer 200 with `signedTransaction`.
    public func register(signedTransaction: String, forTransactionID transactionID: String) {
        store.state.withLock { $0.transactions[transactionID] = signedTransaction }
    }

    /// Queues a failure for the next authorized request (failures are used in the order queued).
    public func enqueueFailure(_ failure: Failure, count: Int = 1) {
        store.state.withLock { $0.failures.append(contentsOf: repeatElement(failure, count: max(0, count))) }
    }

    /// Failures queued and not yet used.
    public var pendingFailures: [Failure] { store.state.withLock { $0.failures } }

    /// Requests received, refused ones included.
    public var requestCount: Int { store.state.withLock { $0.requestCount } }

    /// Requests received per path (as sent, without the query).
    public var requestsPerPath: [String: Int] { store.state.withLock { $0.requestsPerPath } }

    /// Requests received for `path`.
    public func requestCount(path: String) -> Int { store.state.withLock { $0.requestsPerPath[path] ?? 0 } }

    /// Requests refused with 401.
    public var unauthorizedCount: Int { store.state.withLock { $0.unauthorizedCount } }

    /// The claims of the last request's bearer token (accepted or not); `nil` before any request
    /// or when the last one had no readable bearer JWT.
    public var lastAuthorizationClaims: AuthorizationClaims? { store.state.withLock { $0.lastClaims } }

    /// The last request's `Authorization` header as sent.
    public var lastAuthorizationHeader: String? { store.state.withLock { $0.lastAuthorization } }

    /// Stops serving: open connections are closed and a hanging request ends.
    public func stop() { server.stop() }
}

/// The fake's state, shared by the fake and its server's handler.
final class FakeStore: Sendable {
    struct State {
        var transactions: [String: String] = [:]
        var failures: [AppStoreServerFake.Failure] = []
        var requestCount = 0
        var requestsPerPath: [String: Int] = [:]
        var unauthorizedCount = 0
        var lastClaims: AuthorizationClaims?
        var lastAuthorization: String?
    }

    let state = Mutex(State())
    let support = FakeSupportRoutes()
    let check: BearerTokenCheck
    let now: @Sendable () -> Date
    /// Send Consumption Information (AppStoreServerFake+Consumption.swift).
    let consumption = ConsumptionEndpoint()

    init(check: BearerTokenCheck, now: @escaping @Sendable () -> Date) {
        self.check = check
        self.now = now
    }

    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let authorization = request.headers["Authorization"]
        let (claims, authorized) = check.check(authorization: authorization, now: now())
        enum Step {
            case unauthorized
            case failure(AppStoreServerFake.Failure)
            case route([String: String])
        }
        let step = state.withLock { state -> Step in
            state.requestCount += 1
            state.requestsPerPath[request.path, default: 0] += 1
            state.lastClaims = claims
            state.lastAuthorization = authorization
            guard authorized else {
                state.unauthorizedCount += 1
                return .unauthorized
            }
            if !state.failures.isEmpty { return .failure(state.failures.removeFirst()) }
            return .route(state.transactions)
        }
        switch step {
        case .unauthorized:
            return .empty(status: 401)
        case .failure(let failure):
            return Self.response(for: failure)
        case .route(let transactions):
            if let answer = consumption.answer(request, knownTransactionIDs: Set(transactions.keys)) { return answer }
            if let answer = await support.route(request, now: now()) { return answer }
            return Self.route(request, transactions: transactions)
        }
    }

    private static func route(_ request: HTTPRequest, transactions: [String: String]) -> HTTPResponse {
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard segments.count == 5, segments[0].isEmpty, segments[1] == "inApps", segments[2] == "v1",
            segments[3] == "transactions"
        else { return .empty(status: 404) }
        guard request.method == "GET" else { return .empty(status: 405, headers: ["Allow": "GET"]) }
        let id = segments[4].removingPercentEncoding ?? segments[4]
        guard !id.isEmpty, id.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return appleError(status: 400, code: 4_000_006, message: "Invalid transaction id.")
        }
        guard let signed = transactions[id] else {
            return appleError(status: 404, code: 4_040_010, message: "Transaction id not found.")
        }
        return .json(status: 200, ["signedTransactionInfo": signed])
    }

    private static func response(for failure: AppStoreServerFake.Failure) -> HTTPResponse {
        switch failure {
        case .rateLimited(let retryAfter):
            var response = appleError(status: 429, code: 4_290_000, message: "Rate limit exceeded.")
            if let retryAfter { response.headers.add(name: "Retry-After", value: String(retryAfter)) }
            return response
        case .serverError:
            return appleError(status: 500, code: 5_000_000, message: "An unknown error occurred.")
        case .retryableServerError:
            return appleError(status: 500, code: 5_000_001, message: "An unknown error occurred. Please try again.")
        case .hang:
            return .hangUntilStopped
        case .malformedBody:
            return .json(status: 200, text: "{\"signedTransactionInfo\": \"eyJ")
        case .closeConnection:
            return .closeWithoutResponse
        case .appleError(let status, let errorCode, let errorMessage):
            return appleError(status: status, code: errorCode, message: errorMessage)
        }
    }

    static func appleError(status: Int, code: Int, message: String) -> HTTPResponse {
        struct Body: Encodable {
            var errorCode: Int
            var errorMessage: String
        }
        return .json(status: status, Body(errorCode: code, errorMessage: message))
    }
}
