import AstroDomain
import Crypto
import Foundation
import JOSE
import Testing

@testable import Gateway

@Suite("Access tokens")
struct AccessTokenTests {
    let key = P256.Signing.PrivateKey()
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let user = UserID.random()

    var signer: AccessTokenSigner {
        AccessTokenSigner(keyID: "k1", key: key, issuer: "iss", audience: "aud", lifetime: .seconds(900))
    }
    var verifier: AccessTokenVerifier {
        AccessTokenVerifier(keys: ["k1": key.publicKey], issuer: "iss", audience: "aud", maxLifetime: .seconds(900))
    }

    func claims(iat: Int64 = 1_800_000_000, exp: Int64 = 1_800_000_900, nbf: Int64? = nil) -> AccessTokenClaims {
        AccessTokenClaims(subject: user, issuedAt: iat, expiresAt: exp, notBefore: nbf, issuer: "iss", audience: "aud")
    }

    func expect(_ token: String, _ error: AccessTokenError, at date: Date? = nil) {
        #expect(throws: error) { try verifier.verify(token, now: date ?? now) }
    }

    @Test func aValidTokenVerifies() throws {
        let token = try signer.sign(user: user, now: now)
        let verified = try verifier.verify(token, now: now.addingTimeInterval(60))
        #expect(verified.subject == user)
        #expect(verified.expiresAt - verified.issuedAt == 900)
        let header = try JSONValue.parse(try #require(Base64URL.decode(token.split(separator: ".")[0])))
        #expect(header["alg"] == "ES256")
        #expect(header["kid"] == "k1")
    }

    @Test func anExpiredTokenIsRefused() throws {
        let token = try signer.sign(user: user, now: now)
        expect(token, .expired, at: now.addingTimeInterval(900 + 31))
        // Within the leeway it still passes.
        _ = try verifier.verify(token, now: now.addingTimeInterval(900 + 29))
    }

    /// Issue 29: a token signed with our key whose `exp` lies beyond `iat` + the configured
    /// lifetime is refused, however valid its signature and times are now.
    @Test func aTokenLivingLongerThanTheLifetimeIsRefused() throws {
        let year = try AccessTokenSigner.sign(
            claims: claims(exp: 1_800_000_000 + 365 * 86_400),
            header: ["alg": "ES256", "kid": "k1"],
            key: key
        )
        expect(year, .lifetimeExceeded)
        #expect(AccessTokenError.lifetimeExceeded.code == .tokenLifetimeExceeded)
        let oneSecondTooLong = try AccessTokenSigner.sign(
            claims: claims(exp: 1_800_000_901),
            header: ["alg": "ES256", "kid": "k1"],
            key: key
        )
        expect(oneSecondTooLong, .lifetimeExceeded)
        // Exactly the lifetime passes, and the signer never makes more.
        _ = try verifier.verify(
            try AccessTokenSigner.sign(claims: claims(), header: ["alg": "ES256", "kid": "k1"], key: key),
            now: now
        )
        // A refused token is not remembered: presented again, it is refused again.
        expect(year, .lifetimeExceeded)
    }

    @Test func aTokenFromTheFutureIsRefused() throws {
        let token = try AccessTokenSigner.sign(
            claims: claims(iat: 1_800_000_000, nbf: 1_800_000_600),
            header: ["alg": "ES256", "kid": "k1"],
            key: key
        )
        expect(token, .notYetValid)
        _ = try verifier.verify(token, now: now.addingTimeInterval(600))
    }

    @Test func anotherKeysSignatureIsRefused() throws {
        let forged = try AccessTokenSigner(
            keyID: "k1",
            key: P256.Signing.PrivateKey(),
            issuer: "iss",
            audience: "aud",
            lifetime: .seconds(900)
        ).sign(user: user, now: now)
        expect(forged, .badSignature)
    }

    @Test func anUnknownKeyIDIsRefused() throws {
        let token = try AccessTokenSigner.sign(claims: claims(), header: ["alg": "ES256", "kid": "k9"], key: key)
        expect(token, .unknownKey)
    }

    @Test func rotationAcceptsEveryConfiguredKey() throws {
        let old = P256.Signing.PrivateKey()
        let rotating = AccessTokenVerifier(
            keys: ["k1": key.publicKey, "k0": old.publicKey],
            issuer: "iss",
            audience: "aud"
        )
        let token = try AccessTokenSigner(keyID: "k0", key: old, issuer: "iss", audience: "aud", lifetime: .seconds(60))
            .sign(user: user, now: now)
        #expect(try rotating.verify(token, now: now).subject == user)
        // A token of the old key under the new key's id is still a forgery.
        let swapped = try AccessTokenSigner.sign(claims: claims(), header: ["alg": "ES256", "kid": "k1"], key: old)
        #expect(throws: AccessTokenError.badSignature) { try rotating.verify(swapped, now: now) }
    }

    @Test func algNoneIsRefused() throws {
        let header = Base64URL.encode(JSONValue.object(["alg": "none", "kid": "k1"]).jsonData())
        let valid = try signer.sign(user: user, now: now).split(separator: ".")
        expect("\(header).\(valid[1]).", .unsupportedAlgorithm("none"))
        expect("\(header).\(valid[1]).\(valid[2])", .unsupportedAlgorithm("none"))
    }

    @Test func hs256IsRefusedEvenKeyedWithThePublicKey() throws {
        let header = Base64URL.encode(JSONValue.object(["alg": "HS256", "kid": "k1", "typ": "JWT"]).jsonData())
        let payload = try signer.sign(user: user, now: now).split(separator: ".")[1]
        let input = "\(header).\(payload)"
        // The classic confusion attack: HMAC keyed with the verifier's public key.
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data(input.utf8),
            using: SymmetricKey(data: key.publicKey.derRepresentation)
        )
        expect("\(input).\(Base64URL.encode(Data(mac)))", .unsupportedAlgorithm("HS256"))
    }

    @Test func aTamperedPayloadIsRefused() throws {
        let parts = try signer.sign(user: user, now: now).split(separator: ".")
        let other = JSONValue.object([
            "sub": .string(UserID.random().description), "iat": 1_800_000_000, "exp": 1_800_000_900,
            "iss": "iss", "aud": "aud",
        ])
        expect("\(parts[0]).\(Base64URL.encode(other.jsonData())).\(parts[2])", .badSignature)
    }

    @Test func anOversizedTokenIsRefusedUnread() {
        expect(String(repeating: "a", count: AccessTokenVerifier.maxTokenBytes + 1), .oversized)
    }

    @Test func malformedTokensAreRefused() throws {
        let valid = try signer.sign(user: user, now: now)
        let parts = valid.split(separator: ".").map(String.init)
        for token in [
            "", "a.b", "a.b.c.d", "\(parts[0]).\(parts[1])", "\(parts[0])=.\(parts[1]).\(parts[2])",
            "\(parts[0]).\(parts[1]).\(parts[2])=", "\(parts[0]) .\(parts[1]).\(parts[2])",
            "e30.\(parts[1]).\(parts[2])",
        ] {
            #expect(throws: AccessTokenError.self, "\(token)") { try verifier.verify(token, now: now) }
        }
        // A signature that is not 64 bytes.
        expect("\(parts[0]).\(parts[1]).\(Base64URL.encode([UInt8](repeating: 1, count: 63)))", .badSignature)
    }

    @Test func wrongAudienceOrIssuerIsRefused() throws {
        var other = claims()
        other.audience = "someone-else"
        let token = try AccessTokenSigner.sign(claims: other, header: ["alg": "ES256", "kid": "k1"], key: key)
        expect(token, .wrongIssuerOrAudience)
    }

    @Test func nonIntegerTimesAreMalformed() throws {
        let header = Base64URL.encode(JSONValue.object(["alg": "ES256", "kid": "k1"]).jsonData())
        let payload = Base64URL.encode(
            JSONValue.object([
                "sub": .string(user.description), "iat": "soon", "exp": 1_800_000_900, "iss": "iss", "aud": "aud",
            ]).jsonData()
        )
        let input = "\(header).\(payload)"
        let signature = try key.signature(for: Data(input.utf8)).rawRepresentation
        #expect(throws: AccessTokenError.self) {
            try verifier.verify("\(input).\(Base64URL.encode(signature))", now: now)
        }
    }

    @Test func aRememberedTokenStillExpiresAndATamperedOneIsNotRemembered() throws {
        let shared = verifier
        let token = try signer.sign(user: user, now: now)
        #expect(try shared.verify(token, now: now).subject == user)
        // The second use is answered from the cache, with its times checked again.
        #expect(try shared.verify(token, now: now.addingTimeInterval(60)).subject == user)
        #expect(throws: AccessTokenError.expired) { try shared.verify(token, now: now.addingTimeInterval(900 + 31)) }
        // One changed signature byte is another token: verified (and refused), never looked up.
        var bytes = Array(token.utf8)
        bytes[bytes.count - 2] = bytes[bytes.count - 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(throws: AccessTokenError.self) { try shared.verify(String(decoding: bytes, as: UTF8.self), now: now) }
    }

    @Test func theCacheIsBounded() {
        let cache = VerifiedTokenCache(capacity: 3)
        let live = claims(exp: 1_800_000_900)
        let gone = claims(exp: 1_700_000_000)
        cache.insert(gone, for: Data([1]), now: now)
        cache.insert(live, for: Data([2]), now: now)
        cache.insert(live, for: Data([3]), now: now)
        // Full: the expired entry makes room.
        cache.insert(live, for: Data([4]), now: now)
        #expect(cache.count == 3)
        #expect(cache.claims(for: Data([1])) == nil)
        // Full of live entries: all go, the new one stays.
        cache.insert(live, for: Data([5]), now: now)
        #expect(cache.count == 1)
        #expect(cache.claims(for: Data([5])) == live)
    }
}
