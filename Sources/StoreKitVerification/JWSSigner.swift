// swift-crypto 3 does not annotate Sendable; its keys and digests are immutable values, safe to
// share (swift-certificates imports it the same way).
@preconcurrency import Crypto
import Foundation
import JOSE
import SwiftASN1
import X509

/// An error of the development signing tools (``JWSSigner``, ``DevPKI``).
public struct DevSigningError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, in one line.
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// Signs data the way the App Store does: a compact JWS with header
/// `{"alg":"ES256","x5c":[…]}`, unpadded base64url segments and a raw r‖s ES256 signature.
///
/// - Important: For tests, demos and `astroctl billing dev-sign`. Data it signs verifies only
///   where its chain's root is trusted explicitly.
public struct JWSSigner: Sendable {
    /// The signing key; its public key should be the first certificate's.
    public var key: P256.Signing.PrivateKey
    /// The certificates written to `x5c`, leaf first.
    public var chain: [Certificate]

    public init(key: P256.Signing.PrivateKey, chain: [Certificate]) {
        self.key = key
        self.chain = chain
    }

    /// Signs payload bytes as they are.
    ///
    /// - Parameter payload: the payload, normally a JSON object.
    /// - Returns: the compact JWS `header.payload.signature`.
    /// - Throws: `DevSigningError` when a certificate cannot be serialized.
    public func sign(payload: Data) throws -> String {
        var certificates: [String] = []
        for certificate in chain {
            certificates.append(Data(try Self.derBytes(of: certificate)).base64EncodedString())
        }
        let header: Data
        do {
            header = try Self.encoder.encode(Header(alg: "ES256", x5c: certificates))
        } catch {
            throw DevSigningError("cannot encode the JWS header: \(error)")
        }
        do {
            return try CompactJWS.signES256(header: header, payload: payload, key: key)
        } catch {
            throw DevSigningError("ES256 signing failed: \(error)")
        }
    }

    /// Encodes a value as JSON (sorted keys, `Date`s as integer milliseconds) and signs it.
    ///
    /// - Parameter value: the payload, e.g. a ``TransactionPayload`` or ``NotificationPayload``.
    /// - Returns: the compact JWS.
    /// - Throws: `DevSigningError` when the value does not encode.
    public func sign<T: Encodable>(_ value: T) throws -> String {
        let payload: Data
        do {
            payload = try Self.encoder.encode(value)
        } catch {
            throw DevSigningError("cannot encode the payload as JSON: \(error)")
        }
        return try sign(payload: payload)
    }

    private struct Header: Encodable {
        var alg: String
        var x5c: [String]
    }

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            guard let millis = Int64(exactly: (date.timeIntervalSince1970 * 1000).rounded()) else {
                throw EncodingError.invalidValue(
                    date,
                    EncodingError.Context(codingPath: encoder.codingPath, debugDescription: "date out of range")
                )
            }
            try container.encode(millis)
        }
        return encoder
    }

    static func derBytes(of certificate: Certificate) throws(DevSigningError) -> [UInt8] {
        var serializer = DER.Serializer()
        do {
            try serializer.serialize(certificate)
        } catch {
            throw DevSigningError("cannot serialize the certificate \(certificate.subject): \(error)")
        }
        return serializer.serializedBytes
    }
}
