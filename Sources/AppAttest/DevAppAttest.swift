// swift-crypto 3 does not annotate Sendable; its keys are immutable values, safe to share
// (swift-certificates imports it the same way).
@preconcurrency import Crypto
import Foundation
import SwiftASN1
import X509

/// DEVELOPMENT ONLY: an App Attest authority shaped like Apple's — a P-384 root, a P-384
/// intermediate, and for each attestation a P-256 credential certificate carrying the nonce
/// extension 1.2.840.113635.100.8.2 — and devices that attest and assert like an iPhone's
/// `DCAppAttestService`, so that tests exercise the real verification code.
///
/// Attestations it makes verify only with an ``AttestationVerifier`` that trusts its ``root``
/// explicitly; one trusting Apple's root (the default) rejects them.
public struct DevAppAttest: Sendable {
    public let root: Certificate
    public let intermediate: Certificate
    private let intermediateKey: P384.Signing.PrivateKey
    private let notValidBefore: Date
    private let notValidAfter: Date

    /// A device's App Attest key.
    public struct Device: Sendable {
        public let privateKey: P256.Signing.PrivateKey

        /// A new random key.
        public init() {
            privateKey = P256.Signing.PrivateKey()
        }

        /// The uncompressed public key (X9.63).
        public var publicKey: Data { privateKey.publicKey.x963Representation }
        /// SHA-256 of the public key: the key identifier `generateKey` returns.
        public var keyID: Data { Data(SHA256.hash(data: publicKey)) }

        /// An assertion as `generateAssertion(_:clientDataHash:)` makes it: CBOR
        /// `{signature, authenticatorData}`, the signature over SHA256(authenticatorData ‖ clientDataHash).
        ///
        /// - Parameters:
        ///   - clientDataHash: the hash of the request's client data.
        ///   - counter: the key's counter after this use.
        ///   - appID: the app id hashed into the RP id hash.
        public func assertion(clientDataHash: Data, counter: UInt32, appID: String) -> Data {
            let authenticatorData = DevAppAttest.authenticatorHeader(appID: appID, flags: 0x00, counter: counter)
            let nonce = Data(SHA256.hash(data: authenticatorData + clientDataHash))
            // swift-crypto's signature is randomized; a failure here is a broken key, not input.
            let signature = try! privateKey.signature(for: nonce)
            return CBOREncoder.encode(
                .map([
                    CBORMapEntry(.text("signature"), .bytes(signature.derRepresentation)),
                    CBORMapEntry(.text("authenticatorData"), .bytes(authenticatorData)),
                ])
            )
        }
    }

    /// Deviations from a correct attestation, to test that verification refuses them.
    public struct Options: Sendable {
        /// The counter of the authenticator data (Apple's is 0).
        public var counter: UInt32 = 0
        /// The aaguid; nil: the environment's.
        public var aaguid: Data?
        /// The app id hashed into the RP id hash; nil: the attested app's.
        public var appID: String?
        /// The nonce put in the certificate; nil: the right one.
        public var nonce: Data?
        /// The credential id; nil: the key id.
        public var credentialID: Data?
        /// The credential certificate's validity; nil: the authority's.
        public var credentialNotValidBefore: Date?
        public var credentialNotValidAfter: Date?
        /// `fmt`.
        public var format = "apple-appattest"

        public init() {}
    }

    /// Creates a new root and intermediate with new P-384 keys.
    ///
    /// - Parameters:
    ///   - notValidBefore: start of the root's, the intermediate's and, unless an attestation's
    ///     options say otherwise, the credential certificates' validity.
    ///   - notValidAfter: its end.
    ///   - commonNamePrefix: starts the certificates' common names.
    /// - Throws: `AppAttestError` `malformed-attestation` for an empty period (or a certificate
    ///   that cannot be built).
    public init(
        notValidBefore: Date = Date(timeIntervalSinceNow: -3_600),
        notValidAfter: Date = Date(timeIntervalSinceNow: 30 * 86_400),
        commonNamePrefix: String = "AstroSvitla Dev"
    ) throws {
        guard notValidBefore < notValidAfter else {
            throw AppAttestError(.malformedAttestation, "notValidBefore must be earlier than notValidAfter")
        }
        let rootKey = P384.Signing.PrivateKey()
        let intermediateKey = P384.Signing.PrivateKey()
        let rootName = try Self.name("\(commonNamePrefix) App Attestation Root CA")
        let intermediateName = try Self.name("\(commonNamePrefix) App Attestation CA 1")
        let rootPublic = Certificate.PublicKey(rootKey.publicKey)
        let rootSKI = SubjectKeyIdentifier(hash: rootPublic)
        let intermediatePublic = Certificate.PublicKey(intermediateKey.publicKey)
        root = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: rootPublic,
            notValidBefore: notValidBefore,
            notValidAfter: notValidAfter,
            issuer: rootName,
            subject: rootName,
            signatureAlgorithm: .ecdsaWithSHA384,
            extensions: Certificate.Extensions([
                Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: nil), critical: true),
                Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true),
                Certificate.Extension(rootSKI, critical: false),
            ]),
            issuerPrivateKey: Certificate.PrivateKey(rootKey)
        )
        intermediate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: intermediatePublic,
            notValidBefore: notValidBefore,
            notValidAfter: notValidAfter,
            issuer: rootName,
            subject: intermediateName,
            signatureAlgorithm: .ecdsaWithSHA384,
            extensions: Certificate.Extensions([
                Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: 0), critical: true),
                Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true),
                Certificate.Extension(SubjectKeyIdentifier(hash: intermediatePublic), critical: false),
                Certificate.Extension(AuthorityKeyIdentifier(keyIdentifier: rootSKI.keyIdentifier), critical: false),
            ]),
            issuerPrivateKey: Certificate.PrivateKey(rootKey)
        )
        self.intermediateKey = intermediateKey
        self.notValidBefore = notValidBefore
        self.notValidAfter = notValidAfter
    }

    /// The root as PEM, for a verifier's configuration (`APP_ATTEST_ROOT_CA_FILE`).
    public func rootPEM() throws -> String {
        try root.serializeAsPEM().pemString + "\n"
    }

    /// An attestation object as `attestKey(_:clientDataHash:)` returns it for `device`, with
    /// clientDataHash = SHA256(challenge).
    ///
    /// - Parameters:
    ///   - device: the key being attested.
    ///   - challenge: the server's challenge.
    ///   - appID: `TEAMID.bundle.id`.
    ///   - environment: whose aaguid to use.
    ///   - options: deviations, for negative tests.
    /// - Returns: the CBOR attestation object.
    /// - Throws: when the credential certificate cannot be built.
    public func attest(
        device: Device,
        challenge: Data,
        appID: String,
        environment: AppAttestEnvironment = .development,
        options: Options = Options()
    ) throws -> Data {
        let keyID = device.keyID
        let credentialID = options.credentialID ?? keyID
        var authData = Self.authenticatorHeader(appID: options.appID ?? appID, flags: 0x40, counter: options.counter)
        authData += options.aaguid ?? environment.aaguid
        authData += Data([UInt8(credentialID.count >> 8), UInt8(credentialID.count & 0xFF)]) + credentialID
        authData += Self.coseKey(device.privateKey.publicKey)
        let nonce = options.nonce ?? Data(SHA256.hash(data: authData + Data(SHA256.hash(data: challenge))))
        // SEQUENCE { [1] EXPLICIT OCTET STRING nonce }.
        let nonceExtension: [UInt8] = [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20] + Array(nonce.prefix(32))
        let credentialPublic = Certificate.PublicKey(device.privateKey.publicKey)
        let credential = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: credentialPublic,
            notValidBefore: options.credentialNotValidBefore ?? notValidBefore,
            notValidAfter: options.credentialNotValidAfter ?? notValidAfter,
            issuer: intermediate.subject,
            subject: try Self.name(Data(keyID).map { String(format: "%02x", $0) }.joined()),
            signatureAlgorithm: .ecdsaWithSHA384,
            extensions: Certificate.Extensions([
                Certificate.Extension(BasicConstraints.notCertificateAuthority, critical: true),
                Certificate.Extension(KeyUsage(digitalSignature: true), critical: true),
                Certificate.Extension(
                    oid: AppAttestOIDs.nonce,
                    critical: false,
                    value: ArraySlice(nonceExtension.count == 38 ? nonceExtension : [0x30, 0x00])
                ),
            ]),
            issuerPrivateKey: Certificate.PrivateKey(intermediateKey)
        )
        return CBOREncoder.encode(
            .map([
                CBORMapEntry(.text("fmt"), .text(options.format)),
                CBORMapEntry(
                    .text("attStmt"),
                    .map([
                        CBORMapEntry(
                            .text("x5c"),
                            .array([.bytes(Data(try Self.der(credential))), .bytes(Data(try Self.der(intermediate)))])
                        ),
                        CBORMapEntry(.text("receipt"), .bytes(Data("development receipt".utf8))),
                    ])
                ),
                CBORMapEntry(.text("authData"), .bytes(authData)),
            ])
        )
    }

    /// RP id hash, flags and counter.
    static func authenticatorHeader(appID: String, flags: UInt8, counter: UInt32) -> Data {
        Data(SHA256.hash(data: Data(appID.utf8))) + Data([flags])
            + Data((0..<4).reversed().map { UInt8(truncatingIfNeeded: counter >> (8 * UInt32($0))) })
    }

    /// The COSE_Key (EC2, ES256, P-256) of the credential public key, as in Apple's objects.
    static func coseKey(_ key: P256.Signing.PublicKey) -> Data {
        let point = key.x963Representation
        return CBOREncoder.encode(
            .map([
                CBORMapEntry(.unsigned(1), .unsigned(2)),
                CBORMapEntry(.unsigned(3), .negative(6)),
                CBORMapEntry(.negative(0), .unsigned(1)),
                CBORMapEntry(.negative(1), .bytes(point[1..<33])),
                CBORMapEntry(.negative(2), .bytes(point[33..<65])),
            ])
        )
    }

    private static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    private static func name(_ commonName: String) throws -> DistinguishedName {
        try DistinguishedName {
            CommonName(commonName)
            OrganizationName("AstroSvitla development PKI (not Apple)")
            StateOrProvinceName("California")
        }
    }
}
