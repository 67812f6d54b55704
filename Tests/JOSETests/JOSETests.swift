import Crypto
import Foundation
import JOSE
import Testing

@Suite("Base64url")
struct Base64URLTests {
    @Test func base64URLIsStrict() {
        #expect(Base64URL.decode("AQID") == Data([1, 2, 3]))
        #expect(Base64URL.decode("AQ") == Data([1]))
        #expect(Base64URL.decode("AR") == nil)  // non-zero unused bits
        #expect(Base64URL.decode("AQ==") == nil)
        #expect(Base64URL.decode("A") == nil)
        #expect(Base64URL.decode("A+B/") == nil)
        #expect(Base64URL.decode("-_-_") == Data([0xFB, 0xFF, 0xBF]))
        #expect(Base64URL.decode("AQI") == Data([1, 2]))
        #expect(Base64URL.decode("AQJ") == nil)  // non-zero unused bits
        #expect(Base64URL.decode("") == Data())
        #expect(Base64URL.decode("AQ\u{0}I") == nil)
        #expect(Base64URL.decode("AQé") == nil)
    }

    /// The byte-level codec is Foundation's base64 with the URL-safe alphabet and no padding.
    @Test func base64URLIsFoundationsBase64WithTheURLAlphabet() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<200 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let foundation = Data(bytes).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == foundation)
            #expect(Base64URL.decode(Substring(foundation)) == Data(bytes))
        }
    }

    @Test func theAlphabetIsTheURLSafeOne() {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(Base64URL.isAlphabet(byte) == alphabet.contains(byte), "\(byte)")
        }
    }

    @Test func bytesAndTextDecodeAlike() {
        let text = "eyJhbGciOiJFUzI1NiJ9"
        #expect(Base64URL.decode(bytes: Array(text.utf8)) == Base64URL.decode(text))
        #expect(Base64URL.decode(bytes: text.utf8.dropFirst(4)) == Base64URL.decode(text.dropFirst(4)))
    }
}

@Suite("Compact JWS")
struct CompactJWSTests {
    let key = P256.Signing.PrivateKey()

    @Test func aSignedTokenParsesAndVerifies() throws {
        let header = Data(#"{"alg":"ES256"}"#.utf8)
        let payload = Data(#"{"sub":"x"}"#.utf8)
        let token = try CompactJWS.signES256(header: header, payload: payload, key: key)
        let jws = try CompactJWS(parsing: token)
        #expect(jws.header == header)
        #expect(jws.payload == payload)
        #expect(jws.signature.count == 64)
        #expect(jws.signingInput == Data(token.split(separator: ".").prefix(2).joined(separator: ".").utf8))
        #expect(jws.isSignedES256(by: key.publicKey))
        #expect(!jws.isSignedES256(by: P256.Signing.PrivateKey().publicKey))
        #expect(CompactJWS.hasCompactShape(token))
    }

    @Test func theSignatureCoversTheLiteralText() throws {
        let token = try CompactJWS.signES256(header: Data("{}".utf8), payload: Data("{}".utf8), key: key)
        let parts = token.split(separator: ".")
        // Another payload under the same signature.
        let swapped = try CompactJWS(parsing: "\(parts[0]).\(Base64URL.encode(Data("[]".utf8))).\(parts[2])")
        #expect(!swapped.isSignedES256(by: key.publicKey))
        // A signature that is not 64 bytes is no ES256 signature.
        let short = try CompactJWS(
            parsing: "\(parts[0]).\(parts[1]).\(Base64URL.encode([UInt8](repeating: 1, count: 63)))"
        )
        #expect(short.es256Signature == nil)
        #expect(!short.isSignedES256(by: key.publicKey))
    }

    @Test func malformedTokensSayWhatIsWrong() {
        func failure(_ text: String) -> CompactJWS.ParseError? {
            do {
                _ = try CompactJWS(parsing: text)
                return nil
            } catch {
                return error
            }
        }
        #expect(failure("") == .segmentCount(1))
        #expect(failure("a.b") == .segmentCount(2))
        #expect(failure("AA.AA.AA.AA") == .segmentCount(4))
        #expect(failure("A+.AA.AA") == .notBase64URL(.header))
        #expect(failure("AA.AQ==.AA") == .notBase64URL(.payload))
        #expect(failure("AA.AA.AR") == .notBase64URL(.signature))
        // Empty segments decode to no bytes; what they must hold is the caller's rule.
        #expect(failure("..") == nil)
    }

    @Test func theShapeIsThreeNonEmptyBase64URLSegments() {
        #expect(CompactJWS.hasCompactShape("eyJh.eyJi.c2ln"))
        #expect(CompactJWS.hasCompactShape("a-_b.c.d"))
        for bad in ["", "a.b", "a.b.c.d", "a..c", ".b.c", "a.b.", "a.b.c=", "a b.c.d", "a.b.c\n"] {
            #expect(!CompactJWS.hasCompactShape(bad), "\(bad)")
        }
    }
}
