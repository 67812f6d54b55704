/// Why an attestation or an assertion was refused.
public struct AppAttestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable codes (the gateway passes them on in its problem answers' `reason`).
    public enum Code: String, Sendable, CaseIterable {
        /// Not CBOR, or not the shape of an attestation object.
        case malformedAttestation = "malformed-attestation"
        /// `fmt` is not `apple-appattest`.
        case unsupportedFormat = "unsupported-format"
        /// The x5c certificates do not chain to a trusted App Attestation root.
        case untrustedCertificateChain = "untrusted-certificate-chain"
        /// The chain is right but a certificate is outside its validity period.
        case certificateExpired = "certificate-expired"
        /// The credential certificate's nonce extension is missing or is not
        /// SHA256(authData ‖ SHA256(challenge)).
        case nonceMismatch = "nonce-mismatch"
        /// SHA-256 of the credential certificate's public key is not the key id.
        case keyIDMismatch = "key-id-mismatch"
        /// The authenticator data's RP id hash is not SHA-256 of the configured app id.
        case appIDMismatch = "app-id-mismatch"
        /// An attestation's counter is not 0.
        case counterNotZero = "counter-not-zero"
        /// The aaguid is not the accepted environment's (`appattest` or `appattestdevelop`).
        case aaguidMismatch = "aaguid-mismatch"
        /// The credential id in the authenticator data is not the key id.
        case credentialIDMismatch = "credential-id-mismatch"
        /// Not CBOR, or not the shape of an assertion object.
        case malformedAssertion = "malformed-assertion"
        /// The assertion's signature does not verify with the device's key.
        case invalidSignature = "invalid-signature"
        /// The assertion's counter is not greater than the last one seen (a replay).
        case counterNotIncreasing = "counter-not-increasing"
    }

    public var code: Code
    /// For logs: what exactly was wrong. Never contains key material.
    public var detail: String

    public init(_ code: Code, _ detail: String) {
        self.code = code
        self.detail = detail
    }

    public var description: String { "\(code.rawValue): \(detail)" }
}
