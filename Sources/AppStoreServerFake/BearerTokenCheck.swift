import Crypto
import Foundation
import JOSE

/// The claims of a bearer token the fake saw, whether it was accepted or not.
public struct AuthorizationClaims: Sendable, Hashable {
    /// The whole compact JWT, as sent.
    public var token: String
    /// Header `alg`, `kid`, `typ`.
    public var algorithm: String?
    public var keyID: String?
    public var type: String?
    /// Claims `iss`, `aud`, `bid`, `iat`, `exp` (seconds since 1970).
    public var issuer: String?
    public var audience: String?
    public var bundleID: String?
    public var issuedAt: Int?
    public var expiresAt: Int?
    /// Whether the token passed every check (signature included).
    public var accepted: Bool
    /// Why it was refused, when it was.
    public var rejection: String?
}

/// Checks a bearer token the way the App Store Server API does: ES256 with the expected key,
/// `kid`, `iss`, `aud` `appstoreconnect-v1`, `bid`, an `exp` in the future and at most 60 minutes
/// after `iat`.
struct BearerTokenCheck: Sendable {
    let bundleID: String
    let keyID: String
    let issuerID: String
    /// The P-256 public key in X9.63 form (the Crypto key type is not `Sendable` on Linux).
    let publicKeyBytes: Data

    private struct Header: Decodable {
        var alg: String?
        var kid: String?
        var typ: String?
    }

    private struct Claims: Decodable {
        var iss: String?
        var aud: String?
        var bid: String?
        var iat: Double?
        var exp: Double?
    }

    /// The claims seen (or `nil` when the header is not a bearer JWT at all) and whether they pass.
    func check(authorization: String?, now: Date) -> (AuthorizationClaims?, Bool) {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return (nil, false) }
        let token = String(authorization.dropFirst("Bearer ".count)).trimmingCharacters(in: .whitespaces)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]),
            let claimsData = Base64URL.decode(parts[1]),
            let header = try? JSONDecoder().decode(Header.self, from: headerData),
            let claims = try? JSONDecoder().decode(Claims.self, from: claimsData)
        else { return (nil, false) }

        var seen = AuthorizationClaims(
            token: token,
            algorithm: header.alg,
            keyID: header.kid,
            type: header.typ,
            issuer: claims.iss,
            audience: claims.aud,
            bundleID: claims.bid,
            // The fake is reached by any local process: a claim of 1e19 must not trap it.
            issuedAt: claims.iat.flatMap { Int(exactly: $0.rounded(.towardZero)) },
            expiresAt: claims.exp.flatMap { Int(exactly: $0.rounded(.towardZero)) },
            accepted: false,
            rejection: nil
        )
        // A signature that is not base64url is the signature check's refusal, not "no JWT at all".
        let rejection = reject(header: header, claims: claims, jws: try? CompactJWS(parsing: token), now: now)
        seen.rejection = rejection
        seen.accepted = rejection == nil
        return (seen, rejection == nil)
    }

    private func reject(header: Header, claims: Claims, jws: CompactJWS?, now: Date) -> String? {
        guard header.alg == "ES256" else { return "alg is not ES256" }
        guard header.typ == nil || header.typ == "JWT" else { return "typ is not JWT" }
        guard header.kid == keyID else { return "kid does not match" }
        guard claims.iss == issuerID else { return "iss does not match" }
        guard claims.aud == "appstoreconnect-v1" else { return "aud is not appstoreconnect-v1" }
        guard claims.bid == bundleID else { return "bid does not match" }
        guard let issuedAt = claims.iat, let expiresAt = claims.exp else { return "iat or exp missing" }
        guard expiresAt > now.timeIntervalSince1970 else { return "expired" }
        guard expiresAt > issuedAt, expiresAt - issuedAt <= 3_600 else {
            return "exp is not within 60 minutes after iat"
        }
        guard let jws, jws.es256Signature != nil,
            let publicKey = try? P256.Signing.PublicKey(x963Representation: publicKeyBytes)
        else { return "the signature is not a raw ES256 signature" }
        guard jws.isSignedES256(by: publicKey) else {
            return "the signature does not verify with the expected key"
        }
        return nil
    }
}
