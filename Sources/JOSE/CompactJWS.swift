// swift-crypto 3 does not annotate Sendable; its keys and signatures are immutable values.
@preconcurrency import Crypto
import Foundation

/// A JWS in compact serialization (RFC 7515 §7.1), split and base64url-decoded but not yet
/// verified: the package's one reader and writer of `header.payload.signature` tokens — access
/// tokens, the App Store Server API's bearer token, and StoreKit's signed data.
///
/// What the header and payload must say is each caller's rule (their JSON is read there); this
/// type holds what every caller shares: three segments of strict ``Base64URL``, the literal
/// `header.payload` text the signature covers, and ES256 (P-256, SHA-256, raw `r‖s`).
public struct CompactJWS: Sendable {
    /// The literal `header.payload` text: what the signature covers.
    public var signingInput: Data
    /// The decoded segments.
    public var header: Data
    public var payload: Data
    public var signature: Data

    /// One of a token's three segments.
    public enum Segment: String, Sendable, CaseIterable {
        case header, payload, signature
    }

    /// Why a text is not a compact JWS.
    public enum ParseError: Error, Sendable, Hashable {
        /// Not exactly three dot-separated segments (the count found).
        case segmentCount(Int)
        /// A segment is not strict unpadded base64url.
        case notBase64URL(Segment)
    }

    /// Splits and decodes a token.
    ///
    /// - Throws: `ParseError` unless there are exactly three segments of unpadded base64url (an
    ///   empty segment decodes to no bytes; callers that need content check it).
    public init(parsing token: some StringProtocol) throws(ParseError) {
        let bytes = token.utf8
        let segments = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3 else { throw .segmentCount(segments.count) }
        guard let header = Base64URL.decode(bytes: segments[0]) else { throw .notBase64URL(.header) }
        guard let payload = Base64URL.decode(bytes: segments[1]) else { throw .notBase64URL(.payload) }
        guard let signature = Base64URL.decode(bytes: segments[2]) else { throw .notBase64URL(.signature) }
        self.signingInput = Data(bytes[..<segments[1].endIndex])
        self.header = header
        self.payload = payload
        self.signature = signature
    }

    /// Whether `text` has the shape of a compact JWS: three non-empty segments of base64url
    /// characters. Nothing is decoded (a cheap filter for tokens passed on to be verified later).
    public static func hasCompactShape(_ text: some StringProtocol) -> Bool {
        let segments = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return segments.count == 3
            && segments.allSatisfy { !$0.isEmpty && $0.allSatisfy(Base64URL.isAlphabet) }
    }

    /// The signature as ES256's raw `r‖s`, or `nil` when it is not 64 bytes of one.
    public var es256Signature: P256.Signing.ECDSASignature? {
        guard signature.count == 64 else { return nil }
        return try? P256.Signing.ECDSASignature(rawRepresentation: signature)
    }

    /// Whether the signature is an ES256 signature of ``signingInput`` by `key`.
    public func isSignedES256(by key: P256.Signing.PublicKey) -> Bool {
        guard let signature = es256Signature else { return false }
        return key.isValidSignature(signature, for: signingInput)
    }

    /// A compact JWS of `header` and `payload` as they are (normally JSON objects), signed ES256
    /// with `key`: `base64url(header).base64url(payload).base64url(r‖s)`.
    ///
    /// - Throws: `CryptoKitError` only if the platform's signing fails.
    public static func signES256(
        header: some DataProtocol,
        payload: some DataProtocol,
        key: P256.Signing.PrivateKey
    ) throws -> String {
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        let signature = try key.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }
}
