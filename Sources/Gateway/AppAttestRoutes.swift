import AppAttest
import AstroDomain
import Crypto
import Foundation
import Hummingbird
import Postgres

/// App Attest on the gateway: registration challenges, attested registration, and assertions on
/// authenticated writes.
///
/// The app registers with:
/// 1. `POST /v1/devices/challenge` → `{challenge, expiresIn}`: a random single-use challenge;
/// 2. `DCAppAttestService.attestKey(keyId, clientDataHash: SHA256(UTF-8 of challenge))`;
/// 3. `POST /v1/devices` with `{keyId, attestation, challenge}` (key id and attestation in base64).
///
/// With `APP_ATTEST_REQUIRE_ASSERTIONS=true`, each authenticated POST, PUT, PATCH or DELETE
/// carries `X-App-Attest-Assertion: <base64 of generateAssertion(keyId, clientDataHash:)>` where
/// clientDataHash = SHA256(UTF-8 of "<METHOD> <path>\n<lowercase hex SHA-256 of the body>"), the
/// path without the query; DELETE hashes an empty body. The key's counter makes each assertion
/// good for one request.
extension GatewayRoutes {
    static let assertionHeader = HTTPFields.Element.Name("X-App-Attest-Assertion")!

    /// The client data hash an assertion on `request` must be made over.
    static func assertionClientDataHash(method: HTTPRequest.Method, path: String, body: Data) -> Data {
        Data(SHA256.hash(data: Data("\(method.rawValue) \(path)\n\(sha256Hex(body))".utf8)))
    }
}

/// Requires a valid `X-App-Attest-Assertion` on authenticated POST, PUT, PATCH and DELETE
/// requests, and raises the device key's counter, atomically, so an assertion works once. Run
/// by `Authenticator` once the token is verified and before the user's request is spent.
struct AssertionCheck: Sendable {
    let appAttest: AppAttestService
    let store: GatewayStore
    let body: BodyReader

    static let methods: Set<HTTPRequest.Method> = [.post, .put, .patch, .delete]
    static let maxHeaderBytes = (AssertionVerifier.maxAssertionBytes / 3 + 1) * 4

    /// Checks `request`'s assertion for `user`.
    /// - Returns: the request to hand on (its body, once read here, buffered for the handler).
    /// - Throws: `Problem` 401 `assertion-required`, `assertion-invalid` or `device-not-attested`;
    ///   as `BodyReader` for the body; 503 when the database is unreachable.
    func check(_ request: Request, user: UserID, context: GatewayRequestContext) async throws -> Request {
        guard let header = request.headers[GatewayRoutes.assertionHeader] else {
            throw Problem(.assertionRequired, "this request needs an X-App-Attest-Assertion header")
        }
        guard header.utf8.count <= Self.maxHeaderBytes, let assertion = Data(base64Encoded: header) else {
            throw Problem(.assertionInvalid, "X-App-Attest-Assertion: an App Attest assertion in base64")
        }
        var request = request
        var body = Data()
        if request.method != .delete {
            body = try await self.body(request)
            // The body was read from a copy of the request: the handler reads it again from here.
            request.body = RequestBody(buffer: ByteBuffer(bytes: body))
        }
        guard let key = try await GatewayRoutes.database(context, { try await store.deviceKey(user: user) })
        else {
            throw Problem(.deviceNotAttested, "this user registered without App Attest; register again")
        }
        let clientDataHash = GatewayRoutes.assertionClientDataHash(
            method: request.method,
            path: request.uri.path,
            body: body
        )
        let counter: UInt32
        do {
            counter = try appAttest.assertions.verify(
                assertion: assertion,
                clientDataHash: clientDataHash,
                publicKey: key.publicKey,
                previousCounter: key.counter
            )
        } catch {
            context.logger.notice("assertion refused", metadata: ["attest.error": "\(error)", "user.id": "\(user)"])
            throw Problem(
                .assertionInvalid,
                "the App Attest assertion was refused: \(error.code.rawValue)"
            )
        }
        let raised = try await GatewayRoutes.database(context) {
            try await store.raiseCounter(user: user, to: counter)
        }
        guard raised else {
            // Another request with the same or a later assertion got there first.
            throw Problem(
                .assertionInvalid,
                "the App Attest assertion was refused: counter-not-increasing"
            )
        }
        return request
    }
}

/// App Attest's SQL (migration 0016).
extension GatewayStore {
    /// A stored device key.
    struct DeviceKey: Sendable {
        var publicKey: Data
        var counter: UInt32
    }

    /// Stores a challenge's hash, and deletes up to 100 expired ones (so the table stays the
    /// size of the challenges in flight).
    func createChallenge(hash: String, lifetime: Duration) async throws {
        let seconds = Int(lifetime.components.seconds)
        try await pool.withTransaction { database in
            _ = try database.execute(
                """
                DELETE FROM gateway_attest_challenges WHERE challenge_hash IN
                    (SELECT challenge_hash FROM gateway_attest_challenges WHERE expires_at < now() LIMIT 100)
                """,
                []
            )
            _ = try database.execute(
                """
                INSERT INTO gateway_attest_challenges (challenge_hash, expires_at)
                VALUES ($1, now() + make_interval(secs => $2::double precision))
                """,
                [hash, seconds]
            )
        }
    }

    /// Deletes a challenge; true when it existed and had not expired (so each works once).
    func consumeChallenge(hash: String) async throws -> Bool {
        try await pool.withConnection { database in
            guard
                let row = try database.query(
                    "DELETE FROM gateway_attest_challenges WHERE challenge_hash = $1 RETURNING expires_at > now() AS live",
                    [hash]
                ).first
            else { return false }
            return try row.decode(Bool.self, "live")
        }
    }

    /// Creates a user, its first refresh token and its attested key in one transaction.
    /// - Returns: the user, or nil when the key id is registered already.
    func createUser(
        refreshTokenHash: String,
        lifetime: Duration,
        deviceKey: AttestedKey,
        environment: String
    ) async throws -> UserID? {
        let user = UserID.random()
        let seconds = Int(lifetime.components.seconds)
        return try await pool.withTransaction { database -> UserID? in
            _ = try database.execute("INSERT INTO users (id) VALUES ($1)", [user.uuid])
            let inserted = try database.query(
                """
                INSERT INTO gateway_device_keys (key_id, user_id, public_key, counter, receipt, environment)
                VALUES ($1, $2, $3, 0, $4, $5)
                ON CONFLICT (key_id) DO NOTHING
                RETURNING user_id
                """,
                [deviceKey.keyID, user.uuid, deviceKey.publicKey, deviceKey.receipt, environment]
            )
            guard !inserted.isEmpty else { return nil }
            _ = try database.execute(
                """
                INSERT INTO gateway_refresh_tokens (token_hash, user_id, expires_at)
                VALUES ($1, $2, now() + make_interval(secs => $3::double precision))
                """,
                [refreshTokenHash, user.uuid, seconds]
            )
            return user
        }
    }

    /// The user's attested key, or nil when it registered without App Attest.
    func deviceKey(user: UserID) async throws -> DeviceKey? {
        try await pool.withConnection { database in
            guard
                let row = try database.query(
                    "SELECT public_key, counter FROM gateway_device_keys WHERE user_id = $1",
                    [user.uuid]
                ).first
            else { return nil }
            return DeviceKey(
                publicKey: try row.decode(Data.self, "public_key"),
                counter: UInt32(clamping: try row.decode(Int64.self, "counter"))
            )
        }
    }

    /// Raises the key's counter to `counter` if it is still lower; false when another request
    /// raised it as far or further first.
    func raiseCounter(user: UserID, to counter: UInt32) async throws -> Bool {
        try await pool.withConnection { database in
            try !database.query(
                "UPDATE gateway_device_keys SET counter = $2 WHERE user_id = $1 AND counter < $2 RETURNING counter",
                [user.uuid, Int64(counter)]
            ).isEmpty
        }
    }
}
