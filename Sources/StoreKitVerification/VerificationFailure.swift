/// Why signed data did not verify: a stable code for logs, dead letters and API answers.
public enum VerificationFailureReason: String, Sendable, CaseIterable, Codable {
    /// Nothing was given (or only whitespace).
    case emptyToken = "empty-token"
    /// Longer than ``SignedDataVerifier/maximumTokenLength``; rejected before any decoding.
    case tokenTooLarge = "token-too-large"
    /// Not three base64url segments, or a header that is not a JSON object.
    case malformedJWS = "malformed-jws"
    /// The header's `alg` is not exactly `ES256`.
    case unsupportedAlgorithm = "unsupported-algorithm"
    /// The header has no `x5c` array of strings, or an empty one.
    case missingCertificateChain = "missing-certificate-chain"
    /// `x5c` does not hold exactly three certificates.
    case invalidChainLength = "invalid-chain-length"
    /// x5c[0] or x5c[1] is not standard base64 of a DER certificate.
    case malformedCertificate = "malformed-certificate"
    /// The leaf and intermediate do not chain to a trusted root.
    case untrustedCertificateChain = "untrusted-certificate-chain"
    /// The chain is sound but the leaf or intermediate lacks Apple's marker extension.
    case missingMarkerExtension = "missing-marker-extension"
    /// The chain would be trusted, but a certificate was expired or not yet valid at `signedDate`.
    case certificateNotValidAtSignedDate = "certificate-not-valid-at-signed-date"
    /// The ES256 signature does not match the leaf's key.
    case invalidSignature = "invalid-signature"
    /// The payload is not a JSON object of the expected shape, or lacks a required field.
    case malformedPayload = "malformed-payload"
    /// A notification where a transaction was expected, or the other way round.
    case wrongPayloadKind = "wrong-payload-kind"
    /// The payload's bundle id is not the app's (or is missing).
    case bundleIDMismatch = "bundle-id-mismatch"
    /// The payload's environment is not the verifier's (or is missing).
    case environmentMismatch = "environment-mismatch"
    /// A Production notification does not carry the app's Apple ID.
    case appAppleIDMismatch = "app-apple-id-mismatch"
    /// The notification verifies but the transaction inside it does not.
    case invalidNotificationTransaction = "invalid-notification-transaction"
}

/// Signed data that did not verify, with the reason and a line a person can act on.
public struct VerificationFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The stable reason code.
    public var reason: VerificationFailureReason
    /// One line explaining the failure. Never contains the token; payload values in it are
    /// quoted and shortened.
    public var detail: String

    public init(_ reason: VerificationFailureReason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var description: String {
        "\(reason.rawValue): \(detail)"
    }
}

extension String {
    /// A value taken from untrusted input, made safe for a one-line message: quoted, control
    /// characters escaped, at most 80 characters.
    var quotedForDetail: String {
        let shortened = count > 80 ? String(prefix(80)) + "…" : self
        return shortened.debugDescription
    }
}
