// swift-crypto 3 does not annotate Sendable; its keys and digests are immutable values, safe to
// share (swift-certificates imports it the same way).
@preconcurrency import Crypto
import Foundation
import SwiftASN1
@_spi(DisableValidityCheck) @_spi(FixedExpiryValidationTime) import X509

/// Which App Attest environment's keys are accepted: the aaguid of the authenticator data says
/// where the key was made.
public enum AppAttestEnvironment: String, Sendable, CaseIterable {
    /// Keys of App Store, TestFlight and enterprise builds: aaguid `appattest` and seven zero bytes.
    case production
    /// Keys of development builds (the `com.apple.developer.devicecheck.appattest-environment`
    /// entitlement set to development): aaguid `appattestdevelop`.
    case development

    /// The 16 aaguid bytes of the environment.
    public var aaguid: Data {
        switch self {
        case .production: Data("appattest".utf8) + Data(repeating: 0, count: 7)
        case .development: Data("appattestdevelop".utf8)
        }
    }
}

/// A device key whose attestation verified: what the server keeps to check its assertions.
public struct AttestedKey: Sendable, Equatable {
    /// SHA-256 of ``publicKey``, the app's key identifier.
    public var keyID: Data
    /// The P-256 public key, uncompressed (X9.63, 65 bytes).
    public var publicKey: Data
    /// Apple's receipt (for fraud-risk checks with Apple; kept, not evaluated here).
    public var receipt: Data
    /// The counter of the attestation (always 0).
    public var counter: UInt32
}

/// The OIDs App Attest uses.
public enum AppAttestOIDs {
    /// The credential certificate's nonce extension: SEQUENCE { [1] EXPLICIT OCTET STRING }.
    public static let nonce: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 8, 2]
}

/// Verifies App Attest attestation objects the way Apple's "Validating apps that connect to your
/// server" lists the steps:
///
/// 1. `fmt` is `apple-appattest`; `attStmt.x5c` is the credential certificate and the
///    intermediate, which chain to the App Attestation root (RFC 5280 path validation, at `now`);
/// 2. clientDataHash = SHA256(challenge); nonce = SHA256(authData ‖ clientDataHash);
/// 3. nonce equals the octet string of the credential certificate's extension
///    1.2.840.113635.100.8.2;
/// 4. SHA256 of the certificate's public key (uncompressed point) is the key id;
/// 5. the RP id hash of authData is SHA256 of the app id (`TEAMID.bundle.id`);
/// 6. the counter is 0;
/// 7. the aaguid is the accepted environment's;
/// 8. the credential id is the key id.
public struct AttestationVerifier: Sendable {
    /// `TEAMID.bundle.id`.
    public let appID: String
    public let environment: AppAttestEnvironment
    let roots: [Certificate]

    /// Largest attestation object accepted (Apple's are about 5 KB).
    public static let maxAttestationBytes = 16_384
    /// Largest certificate in x5c.
    static let maxCertificateBytes = 4_096
    /// Largest challenge hashed.
    public static let maxChallengeBytes = 1_024

    /// - Parameters:
    ///   - appID: the team id, a dot and the bundle id.
    ///   - environment: whose keys are accepted.
    ///   - roots: the trusted roots; Apple's App Attestation root (``appleRoot``) in production.
    public init(
        appID: String,
        environment: AppAttestEnvironment,
        roots: [Certificate] = [AttestationVerifier.appleRoot]
    ) {
        self.appID = appID
        self.environment = environment
        self.roots = roots
    }

    /// Apple App Attestation Root CA (P-384, valid 2020-03-18 to 2045-03-15), shipped as a
    /// resource; SHA-256 of its DER form is ``appleRootSHA256``.
    public static let appleRoot: Certificate = {
        guard
            let url = Bundle.module.url(
                forResource: "Apple_App_Attestation_Root_CA",
                withExtension: "pem",
                subdirectory: "Resources"
            ),
            let pem = try? String(contentsOf: url, encoding: .utf8),
            let certificate = try? Certificate(pemEncoded: pem)
        else {
            fatalError("AppAttest: the bundled resource Resources/Apple_App_Attestation_Root_CA.pem is missing")
        }
        return certificate
    }()

    /// The certificates of a PEM text (one or more `CERTIFICATE` blocks), to trust instead of
    /// Apple's root — a development authority's root in tests.
    /// - Throws: `AppAttestError` `untrusted-certificate-chain` when the text holds no certificate
    ///   or a block is not one.
    public static func roots(pem: String) throws(AppAttestError) -> [Certificate] {
        let blocks = pem.components(separatedBy: "-----END CERTIFICATE-----").filter {
            $0.contains("-----BEGIN CERTIFICATE-----")
        }
        guard !blocks.isEmpty, blocks.count <= 8 else {
            throw AppAttestError(.untrustedCertificateChain, "the PEM text holds no certificate, or more than 8")
        }
        var certificates: [Certificate] = []
        for block in blocks {
            do {
                certificates.append(try Certificate(pemEncoded: block + "-----END CERTIFICATE-----\n"))
            } catch {
                throw AppAttestError(.untrustedCertificateChain, "a PEM block is not a certificate")
            }
        }
        return certificates
    }

    /// The published SHA-256 fingerprint of Apple App Attestation Root CA.
    public static let appleRootSHA256 = "1cb9823ba28ba6ad2d33a006941de2ae4f513ef1d4e831b9f7e0fa7b6242c932"

    /// Verifies an attestation object.
    ///
    /// - Parameters:
    ///   - attestation: the CBOR attestation object `attestKey` returned.
    ///   - challenge: the server's challenge the app hashed into `clientDataHash`.
    ///   - keyID: the key identifier `generateKey` returned (32 bytes).
    ///   - now: the time certificates must be valid at.
    /// - Returns: the key to keep for the device.
    /// - Throws: `AppAttestError` with one of the attestation codes.
    public func verify(
        attestation: Data,
        challenge: Data,
        keyID: Data,
        at now: Date = Date()
    ) async throws(AppAttestError) -> AttestedKey {
        guard attestation.count <= Self.maxAttestationBytes else {
            throw AppAttestError(
                .malformedAttestation,
                "the attestation object is over \(Self.maxAttestationBytes) bytes"
            )
        }
        guard challenge.count <= Self.maxChallengeBytes else {
            throw AppAttestError(.malformedAttestation, "the challenge is over \(Self.maxChallengeBytes) bytes")
        }
        let object: CBORValue
        do {
            object = try CBORDecoder().decode(attestation)
        } catch {
            throw AppAttestError(.malformedAttestation, "the attestation object is not valid CBOR: \(error)")
        }
        guard let format = object["fmt"]?.text else {
            throw AppAttestError(.malformedAttestation, "fmt is missing or not a text string")
        }
        guard format == "apple-appattest" else {
            throw AppAttestError(
                .unsupportedFormat,
                "fmt is \(format.prefix(40).debugDescription), not apple-appattest"
            )
        }
        guard let authDataBytes = object["authData"]?.bytes,
            let x5c = object["attStmt"]?["x5c"]?.array,
            let receipt = object["attStmt"]?["receipt"]?.bytes
        else {
            throw AppAttestError(.malformedAttestation, "authData, attStmt.x5c or attStmt.receipt is missing")
        }
        guard x5c.count == 2, let credDER = x5c[0].bytes, let intermediateDER = x5c[1].bytes,
            credDER.count <= Self.maxCertificateBytes, intermediateDER.count <= Self.maxCertificateBytes
        else {
            throw AppAttestError(
                .malformedAttestation,
                "x5c must be the credential certificate and the intermediate, each at most \(Self.maxCertificateBytes) bytes"
            )
        }
        let credential: Certificate
        let intermediate: Certificate
        do {
            credential = try Certificate(derEncoded: Array(credDER))
            intermediate = try Certificate(derEncoded: Array(intermediateDER))
        } catch {
            throw AppAttestError(.malformedAttestation, "an x5c element is not a DER certificate")
        }

        // Step 1: the chain.
        try await validateChain(credential: credential, intermediate: intermediate, at: now)

        // Steps 2 and 3: the nonce.
        let clientDataHash = Data(SHA256.hash(data: challenge))
        let nonce = Data(SHA256.hash(data: authDataBytes + clientDataHash))
        guard let certifiedNonce = Self.nonce(of: credential) else {
            throw AppAttestError(.nonceMismatch, "the credential certificate has no well-formed nonce extension")
        }
        guard certifiedNonce == nonce else {
            throw AppAttestError(.nonceMismatch, "the certificate's nonce is not SHA256(authData ‖ SHA256(challenge))")
        }

        // Step 4: the key id.
        guard let key = P256.Signing.PublicKey(credential.publicKey) else {
            throw AppAttestError(.keyIDMismatch, "the credential certificate's key is not a P-256 key")
        }
        let publicKey = key.x963Representation
        guard Data(SHA256.hash(data: publicKey)) == keyID else {
            throw AppAttestError(.keyIDMismatch, "SHA-256 of the certificate's public key is not the key id")
        }

        // Steps 5 to 8: the authenticator data.
        let authData = try AuthenticatorData(authDataBytes, code: .malformedAttestation)
        guard authData.rpIDHash == Data(SHA256.hash(data: Data(appID.utf8))) else {
            throw AppAttestError(.appIDMismatch, "the RP id hash is not SHA-256 of \(appID)")
        }
        guard authData.counter == 0 else {
            throw AppAttestError(.counterNotZero, "the attestation's counter is \(authData.counter), not 0")
        }
        guard let aaguid = authData.aaguid, let credentialID = authData.credentialID else {
            throw AppAttestError(.malformedAttestation, "the authenticator data has no attested credential data")
        }
        guard aaguid == environment.aaguid else {
            throw AppAttestError(.aaguidMismatch, "the aaguid is not the \(environment.rawValue) environment's")
        }
        guard credentialID == keyID else {
            throw AppAttestError(.credentialIDMismatch, "the credential id is not the key id")
        }
        return AttestedKey(keyID: keyID, publicKey: publicKey, receipt: receipt, counter: 0)
    }

    /// The octet string of the nonce extension, or nil when it is missing or malformed.
    static func nonce(of certificate: Certificate) -> Data? {
        guard let extensionValue = certificate.extensions[oid: AppAttestOIDs.nonce] else { return nil }
        do {
            let root = try DER.parse(Array(extensionValue.value))
            let octets = try DER.sequence(root, identifier: .sequence) { nodes in
                try DER.explicitlyTagged(&nodes, tagNumber: 1, tagClass: .contextSpecific) { node in
                    try ASN1OctetString(derEncoded: node)
                }
            }
            return Data(octets.bytes)
        } catch {
            return nil
        }
    }

    private func validateChain(
        credential: Certificate,
        intermediate: Certificate,
        at now: Date
    ) async throws(AppAttestError) {
        let intermediates = CertificateStore([intermediate])
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            RFC5280Policy(fixedExpiryValidationTime: now)
            CredentialIntermediateRootPolicy()
        }
        if case .validCertificate = await verifier.validate(leaf: credential, intermediates: intermediates) {
            return
        }
        // Validated again without the time check: if that passes, time was the only problem.
        var timeless = Verifier(rootCertificates: CertificateStore(roots)) {
            RFC5280Policy.withValidityCheckDisabled()
            CredentialIntermediateRootPolicy()
        }
        if case .validCertificate = await timeless.validate(leaf: credential, intermediates: intermediates) {
            throw AppAttestError(.certificateExpired, "a certificate of the chain is not valid at \(now)")
        }
        throw AppAttestError(
            .untrustedCertificateChain,
            "x5c does not chain credential certificate → intermediate → a trusted App Attestation root"
        )
    }
}

/// A chain must be exactly credential certificate, intermediate, trusted root.
private struct CredentialIntermediateRootPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "the chain has \(chain.count) certificates, not 3")
        }
        return .meetsPolicy
    }
}
