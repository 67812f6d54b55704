import AstroDomain
import Crypto
import Foundation
import JOSE
import Synchronization

/// What an access token says: who it is for and when it is valid.
public struct AccessTokenClaims: Sendable, Hashable {
    /// The user (`sub`).
    public var subject: UserID
    /// Issued at (`iat`), seconds since 1970.
    public var issuedAt: Int64
    /// Not valid from this second on (`exp`).
    public var expiresAt: Int64
    /// Not valid before this second (`nbf`), when present.
    public var notBefore: Int64?
    /// Issuer (`iss`).
    public var issuer: String
    /// Audience (`aud`).
    public var audience: String

    /// Claims as given; nothing is checked here (the verifier checks).
    public init(
        subject: UserID,
        issuedAt: Int64,
        expiresAt: Int64,
        notBefore: Int64? = nil,
        issuer: String,
        audience: String
    ) {
        self.subject = subject
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.notBefore = notBefore
        self.issuer = issuer
        self.audience = audience
    }
}

/// Why an access token was refused. Every case answers 401; `code` is the problem's stable code.
public enum AccessTokenError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Longer than `AccessTokenVerifier.maxTokenBytes`.
    case oversized
    /// Not three base64url parts of JSON objects with the expected members and types.
    case malformed(String)
    /// `alg` is not `ES256` (`none`, `HS256`, `RS256`, …), or `crit` is present.
    case unsupportedAlgorithm(String)
    /// `kid` names no verification key.
    case unknownKey
    /// The signature does not verify with the key `kid` names.
    case badSignature
    /// `exp` has passed.
    case expired
    /// `nbf` or `iat` is in the future.
    case notYetValid
    /// `exp` lies further after `iat` than the configured lifetime: this gateway never signs
    /// such a token, so whoever did holds a signing key, or a token of a longer-lived past.
    case lifetimeExceeded
    /// `iss` or `aud` is not this gateway's.
    case wrongIssuerOrAudience

    /// The stable code of the problem answered for this error (`token-expired`, …).
    public var code: ErrorCode {
        switch self {
        case .oversized, .malformed: .invalidToken
        case .unsupportedAlgorithm: .unsupportedTokenAlgorithm
        case .unknownKey: .unknownTokenKey
        case .badSignature: .invalidTokenSignature
        case .expired: .tokenExpired
        case .notYetValid: .tokenNotYetValid
        case .lifetimeExceeded: .tokenLifetimeExceeded
        case .wrongIssuerOrAudience: .invalidTokenAudience
        }
    }

    public var description: String {
        switch self {
        case .oversized: "the token is longer than \(AccessTokenVerifier.maxTokenBytes) bytes"
        case .malformed(let why): "the token is malformed: \(why)"
        case .unsupportedAlgorithm(let alg): "the token's algorithm \(alg) is not accepted (only ES256)"
        case .unknownKey: "the token's key id is unknown"
        case .badSignature: "the token's signature does not verify"
        case .expired: "the token has expired"
        case .notYetValid: "the token is not valid yet"
        case .lifetimeExceeded: "the token's expiry is further from its issue than access tokens live"
        case .wrongIssuerOrAudience: "the token was not issued for this API"
        }
    }
}

/// Signs access tokens: compact JWS, ES256 (P-256, SHA-256), with `kid`, `sub`, `iat`, `exp`,
/// `iss` and `aud`.
public struct AccessTokenSigner: Sendable {
    /// The key id written as `kid`.
    public let keyID: String
    /// The private key's raw bytes: swift-crypto's key types are not `Sendable` on Linux.
    private let keyBytes: Data
    /// `iss` and `aud` of every token.
    public let issuer: String
    public let audience: String
    /// How long a token is valid.
    public let lifetime: Duration

    /// A signer with `key` under the key id `keyID`; tokens are valid for `lifetime`.
    public init(keyID: String, key: P256.Signing.PrivateKey, issuer: String, audience: String, lifetime: Duration) {
        self.keyID = keyID
        self.keyBytes = key.rawRepresentation
        self.issuer = issuer
        self.audience = audience
        self.lifetime = lifetime
    }

    /// The public half of the signing key, for the verifier.
    public var publicKey: P256.Signing.PublicKey { key.publicKey }

    private var key: P256.Signing.PrivateKey {
        // The bytes came from a valid key.
        try! P256.Signing.PrivateKey(rawRepresentation: keyBytes)
    }

    /// A token for `user`, valid from `now` for `lifetime`.
    /// - Throws: `CryptoKitError` only if the platform's signing fails.
    public func sign(user: UserID, now: Date = Date()) throws -> String {
        let issuedAt = Int64(now.timeIntervalSince1970.rounded(.down))
        let claims = AccessTokenClaims(
            subject: user,
            issuedAt: issuedAt,
            expiresAt: issuedAt + lifetime.components.seconds,
            issuer: issuer,
            audience: audience
        )
        return try Self.sign(claims: claims, header: ["alg": "ES256", "typ": "JWT", "kid": .string(keyID)], key: key)
    }

    /// A token with any header and claims, signed with `key` (tests build malformed tokens with it).
    /// - Throws: `CryptoKitError` only if the platform's signing fails.
    public static func sign(
        claims: AccessTokenClaims,
        header: [String: JSONValue],
        key: P256.Signing.PrivateKey
    ) throws -> String {
        var payload: [String: JSONValue] = [
            "sub": .string(claims.subject.description),
            "iat": .number(Double(claims.issuedAt)),
            "exp": .number(Double(claims.expiresAt)),
            "iss": .string(claims.issuer),
            "aud": .string(claims.audience),
        ]
        if let notBefore = claims.notBefore { payload["nbf"] = .number(Double(notBefore)) }
        return try CompactJWS.signES256(
            header: JSONValue.object(header).jsonData(),
            payload: JSONValue.object(payload).jsonData(),
            key: key
        )
    }
}

/// Verifies access tokens against a set of public keys by key id, so that tokens signed by a
/// previous key stay valid while it is being rotated out.
///
/// The parsing is strict and bounded: at most `maxTokenBytes`, exactly three base64url parts
/// without padding, a header that says `alg: ES256` and names a known `kid`, and no `crit`; a
/// payload with a UUID `sub`, whole-number `iat` and `exp`, and this gateway's `iss` and `aud`.
public struct AccessTokenVerifier: Sendable {
    /// The longest token read at all.
    public static let maxTokenBytes = 2048
    /// Longest accepted key id.
    public static let maxKeyIDBytes = 64

    /// Public keys by key id, as their X9.63 bytes: swift-crypto's key types are not `Sendable`
    /// on Linux.
    private let keys: [String: Data]
    /// The only `iss` and `aud` accepted.
    public let issuer: String
    public let audience: String
    /// Clock difference tolerated on `exp`, `nbf` and `iat`.
    public let leeway: Int64
    /// The longest `exp - iat` accepted, in seconds: the signer's lifetime
    /// (`ACCESS_TOKEN_TTL_SECONDS`). A token claiming more is refused even with a valid
    /// signature, so a leaked or mis-issued key cannot mint tokens that outlive every rotation.
    public let maxLifetime: Int64
    /// Tokens already verified, so that a token presented again (an app sends the same one for
    /// its whole lifetime) costs a hash instead of an ECDSA verification; nil when disabled.
    private let cache: VerifiedTokenCache?

    /// A verifier accepting tokens signed by any of `keys` for this `issuer` and `audience`.
    /// - Parameters:
    ///   - keys: Verification keys by key id.
    ///   - leeway: Seconds of clock skew tolerated.
    ///   - maxLifetime: The longest `exp - iat` accepted (the signer's lifetime); the default is
    ///     the largest `ACCESS_TOKEN_TTL_SECONDS` allowed.
    ///   - cacheCapacity: How many verified tokens to remember (0: none). Only a token that passed
    ///     every check is remembered, by the SHA-256 of all its bytes, signature included, and its
    ///     times are checked again at every use.
    public init(
        keys: [String: P256.Signing.PublicKey],
        issuer: String,
        audience: String,
        leeway: Int64 = 30,
        maxLifetime: Duration = .seconds(3600),
        cacheCapacity: Int = 10_000
    ) {
        self.keys = keys.mapValues(\.x963Representation)
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway
        self.maxLifetime = maxLifetime.components.seconds
        cache = cacheCapacity > 0 ? VerifiedTokenCache(capacity: cacheCapacity) : nil
    }

    /// The key ids accepted.
    public var keyIDs: [String] { keys.keys.sorted() }

    /// Verifies `token` and returns its claims.
    /// - Throws: `AccessTokenError` saying why the token is refused.
    public func verify(_ token: String, now: Date = Date()) throws(AccessTokenError) -> AccessTokenClaims {
        guard token.utf8.count <= Self.maxTokenBytes else { throw .oversized }
        let digest = cache.map { _ in Data(SHA256.hash(data: Data(token.utf8))) }
        if let cache, let digest, let claims = cache.claims(for: digest) {
            try checkTimes(claims, now: now)
            return claims
        }
        let jws: CompactJWS
        do {
            jws = try CompactJWS(parsing: token)
        } catch {
            switch error {
            case .segmentCount: throw .malformed("expected three parts")
            case .notBase64URL: throw .malformed("a part is not base64url")
            }
        }
        guard case .object(let header)? = try? JSONValue.parse(jws.header) else {
            throw .malformed("the header is not a JSON object")
        }
        guard case .string(let algorithm)? = header["alg"] else { throw .malformed("the header has no alg") }
        guard algorithm == "ES256" else { throw .unsupportedAlgorithm(String(algorithm.prefix(16))) }
        guard header["crit"] == nil else { throw .unsupportedAlgorithm("crit") }
        if let type = header["typ"], type != .string("JWT") { throw .malformed("typ is not JWT") }
        guard case .string(let keyID)? = header["kid"], !keyID.isEmpty, keyID.utf8.count <= Self.maxKeyIDBytes
        else { throw .malformed("the header has no kid") }
        guard let keyBytes = keys[keyID] else { throw .unknownKey }
        guard let key = try? P256.Signing.PublicKey(x963Representation: keyBytes) else { throw .unknownKey }
        guard jws.isSignedES256(by: key) else { throw .badSignature }

        // Only a signed payload is read.
        guard case .object(let payload)? = try? JSONValue.parse(jws.payload) else {
            throw .malformed("the payload is not a JSON object")
        }
        guard case .string(let subjectText)? = payload["sub"], let subject = UserID(subjectText) else {
            throw .malformed("sub is not a user id")
        }
        let issuedAt = try Self.seconds(payload["iat"], "iat")
        let expiresAt = try Self.seconds(payload["exp"], "exp")
        let notBefore = try payload["nbf"].map { value throws(AccessTokenError) in try Self.seconds(value, "nbf") }
        guard case .string(let tokenIssuer)? = payload["iss"], case .string(let tokenAudience)? = payload["aud"] else {
            throw .malformed("iss or aud is missing")
        }
        guard tokenIssuer == issuer, tokenAudience == audience else { throw .wrongIssuerOrAudience }
        // Checked once, before the token is remembered: the claims of a cached token do not change.
        guard expiresAt - issuedAt <= maxLifetime else { throw .lifetimeExceeded }
        let claims = AccessTokenClaims(
            subject: subject,
            issuedAt: issuedAt,
            expiresAt: expiresAt,
            notBefore: notBefore,
            issuer: tokenIssuer,
            audience: tokenAudience
        )
        try checkTimes(claims, now: now)
        if let cache, let digest { cache.insert(claims, for: digest) }
        return claims
    }

    /// `exp`, `nbf` and `iat` against `now`, with the leeway.
    private func checkTimes(_ claims: AccessTokenClaims, now: Date) throws(AccessTokenError) {
        let current = Int64(now.timeIntervalSince1970.rounded(.down))
        guard current < claims.expiresAt + leeway else { throw .expired }
        guard claims.issuedAt <= current + leeway, (claims.notBefore ?? claims.issuedAt) <= current + leeway else {
            throw .notYetValid
        }
    }

    private static func seconds(_ value: JSONValue?, _ name: String) throws(AccessTokenError) -> Int64 {
        guard case .number(let number)? = value, number.isFinite, number == number.rounded(),
            number >= 0, number < 1e12
        else { throw .malformed("\(name) is not a whole number of seconds") }
        return Int64(number)
    }
}

/// Verified access tokens by the SHA-256 of their bytes, at most `capacity` of them: when full,
/// the expired ones go, and if that is not enough, all of them (each is verified again once).
final class VerifiedTokenCache: Sendable {
    let capacity: Int
    // Keyed by the digest's bytes: swift-crypto's digest type is not `Sendable` on Linux.
    private let entries = Mutex<[Data: AccessTokenClaims]>([:])

    init(capacity: Int) {
        self.capacity = capacity
    }

    func claims(for digest: Data) -> AccessTokenClaims? {
        entries.withLock { $0[digest] }
    }

    func insert(_ claims: AccessTokenClaims, for digest: Data, now: Date = Date()) {
        entries.withLock { entries in
            if entries.count >= capacity {
                let current = Int64(now.timeIntervalSince1970.rounded(.down))
                entries = entries.filter { $0.value.expiresAt > current }
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            }
            entries[digest] = claims
        }
    }

    /// How many tokens are remembered.
    var count: Int { entries.withLock { $0.count } }
}
