import Crypto
import Foundation
import JOSE
import Synchronization

/// Makes and caches the ES256 JWT the App Store Server API wants as a bearer token.
///
/// Header `{"alg":"ES256","kid":…,"typ":"JWT"}`, claims `{"aud":"appstoreconnect-v1","bid":…,
/// "exp":…,"iat":…,"iss":…}`, base64url without padding, signature the raw `r‖s` (64 bytes).
/// A token lives `lifetime` (Apple refuses more than 60 minutes) and is reused until
/// `refreshMargin` before it expires.
final class BearerTokenProvider: Sendable {
    static let audience = "appstoreconnect-v1"
    static let lifetime: Int = 300
    static let refreshMargin: Int = 60

    private struct Header: Encodable {
        var alg = "ES256"
        var kid: String
        var typ = "JWT"
    }

    private struct Claims: Encodable {
        var iss: String
        var iat: Int
        var exp: Int
        var aud: String
        var bid: String
    }

    private struct Cached {
        var token: String
        var issuedAt: Int
        var expiresAt: Int
    }

    private let configuration: AppStoreServerAPIConfiguration
    private let wallClock: @Sendable () -> Date
    private let cache = Mutex<Cached?>(nil)

    init(configuration: AppStoreServerAPIConfiguration, wallClock: @escaping @Sendable () -> Date) {
        self.configuration = configuration
        self.wallClock = wallClock
    }

    /// A valid token: the cached one while it has more than `refreshMargin` left, else a new one.
    /// - Throws: only if signing fails, which a valid P-256 key does not.
    func token() throws -> String {
        let now = Int(wallClock().timeIntervalSince1970.rounded(.down))
        return try cache.withLock { cached in
            // A clock that jumped back more than the margin also gets a fresh token.
            if let current = cached, current.expiresAt - now > Self.refreshMargin,
                current.issuedAt <= now + Self.refreshMargin
            {
                return current.token
            }
            let token = try Self.sign(configuration: configuration, issuedAt: now)
            cached = Cached(token: token, issuedAt: now, expiresAt: now + Self.lifetime)
            return token
        }
    }

    /// Forgets the cached token (after a 401, so the next call signs a new one).
    func invalidate() { cache.withLock { $0 = nil } }

    static func sign(configuration: AppStoreServerAPIConfiguration, issuedAt: Int) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let header = try encoder.encode(Header(kid: configuration.keyID))
        let claims = try encoder.encode(
            Claims(
                iss: configuration.issuerID,
                iat: issuedAt,
                exp: issuedAt + lifetime,
                aud: audience,
                bid: configuration.bundleID
            )
        )
        return try CompactJWS.signES256(header: header, payload: claims, key: configuration.signingKey)
    }
}
