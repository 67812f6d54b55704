// swift-crypto 3 does not annotate Sendable; its keys are immutable values, safe to share.
@preconcurrency import Crypto
import Foundation

/// Verifies App Attest assertions the way Apple's "Validating apps that connect to your server"
/// lists the steps:
///
/// 1. the assertion is CBOR `{signature, authenticatorData}`;
/// 2. nonce = SHA256(authenticatorData ‖ clientDataHash);
/// 3. the signature is an ECDSA P-256 (SHA-256) signature of nonce by the stored key;
/// 4. the RP id hash is SHA-256 of the app id;
/// 5. the counter is greater than the stored one.
///
/// Storing the new counter is the caller's, atomically (only if it is still greater), so two
/// requests carrying the same assertion cannot both pass.
public struct AssertionVerifier: Sendable {
    /// `TEAMID.bundle.id`.
    public let appID: String
    /// Largest assertion object accepted (Apple's are about 110 bytes).
    public static let maxAssertionBytes = 1_024

    public init(appID: String) {
        self.appID = appID
    }

    /// Verifies one assertion.
    ///
    /// - Parameters:
    ///   - assertion: the CBOR object `generateAssertion` returned.
    ///   - clientDataHash: the 32-byte hash the app passed to `generateAssertion`, computed again
    ///     by the server from the request.
    ///   - publicKey: the device's key, X9.63 uncompressed (``AttestedKey/publicKey``).
    ///   - previousCounter: the last counter accepted for the key.
    /// - Returns: the assertion's counter, to store.
    /// - Throws: `AppAttestError` `malformed-assertion`, `invalid-signature`, `app-id-mismatch` or
    ///   `counter-not-increasing`.
    public func verify(
        assertion: Data,
        clientDataHash: Data,
        publicKey: Data,
        previousCounter: UInt32
    ) throws(AppAttestError) -> UInt32 {
        guard assertion.count <= Self.maxAssertionBytes else {
            throw AppAttestError(.malformedAssertion, "the assertion is over \(Self.maxAssertionBytes) bytes")
        }
        let object: CBORValue
        do {
            object = try CBORDecoder(maxInputBytes: Self.maxAssertionBytes, maxDepth: 2, maxCount: 8).decode(assertion)
        } catch {
            throw AppAttestError(.malformedAssertion, "the assertion is not valid CBOR: \(error)")
        }
        guard let signatureBytes = object["signature"]?.bytes, let authDataBytes = object["authenticatorData"]?.bytes
        else {
            throw AppAttestError(.malformedAssertion, "signature or authenticatorData is missing")
        }
        let authData = try AuthenticatorData(authDataBytes, code: .malformedAssertion)
        guard let key = try? P256.Signing.PublicKey(x963Representation: publicKey) else {
            throw AppAttestError(.invalidSignature, "the stored key is not a P-256 public key")
        }
        guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: signatureBytes) else {
            throw AppAttestError(.invalidSignature, "the signature is not a DER ECDSA signature")
        }
        let nonce = Data(SHA256.hash(data: authDataBytes + clientDataHash))
        // The device signs the nonce as its message (ECDSA with SHA-256 over it).
        guard key.isValidSignature(signature, for: nonce) else {
            throw AppAttestError(.invalidSignature, "the signature does not verify with the device's key")
        }
        guard authData.rpIDHash == Data(SHA256.hash(data: Data(appID.utf8))) else {
            throw AppAttestError(.appIDMismatch, "the RP id hash is not SHA-256 of \(appID)")
        }
        guard authData.counter > previousCounter else {
            throw AppAttestError(
                .counterNotIncreasing,
                "the counter \(authData.counter) is not greater than \(previousCounter)"
            )
        }
        return authData.counter
    }
}
