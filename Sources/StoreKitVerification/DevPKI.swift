// swift-crypto 3 does not annotate Sendable; its keys and digests are immutable values, safe to
// share (swift-certificates imports it the same way).
@preconcurrency import Crypto
import Foundation
import SwiftASN1
import X509

/// DEVELOPMENT ONLY: a local root, intermediate and leaf shaped like Apple's App Store signing
/// chain (marker extensions included), to sign test transactions and notifications.
///
/// Data it signs verifies only with a ``VerificationPolicy`` that trusts its ``root`` explicitly;
/// a verifier trusting Apple Root CA - G3 rejects it.
///
/// The root and intermediate private keys exist only while
/// ``generate(commonNamePrefix:notValidBefore:notValidAfter:options:)`` runs and are never written:
/// a PKI can sign (with the leaf key) but cannot issue further certificates.
public struct DevPKI: Sendable {
    public var root: Certificate
    public var intermediate: Certificate
    public var leaf: Certificate
    public var leafKey: P256.Signing.PrivateKey

    /// Deviations from Apple's chain, to test that verification rejects them.
    public struct Options: Sendable {
        /// Give the leaf Apple's receipt-signing marker 1.2.840.113635.100.6.11.1.
        public var leafMarkerExtension: Bool
        /// Give the intermediate Apple's WWDR marker 1.2.840.113635.100.6.2.1.
        public var intermediateMarkerExtension: Bool

        public init(leafMarkerExtension: Bool = true, intermediateMarkerExtension: Bool = true) {
            self.leafMarkerExtension = leafMarkerExtension
            self.intermediateMarkerExtension = intermediateMarkerExtension
        }
    }

    public init(root: Certificate, intermediate: Certificate, leaf: Certificate, leafKey: P256.Signing.PrivateKey) {
        self.root = root
        self.intermediate = intermediate
        self.leaf = leaf
        self.leafKey = leafKey
    }

    /// A signer whose `x5c` is `[leaf, intermediate, root]`.
    public var signer: JWSSigner {
        JWSSigner(key: leafKey, chain: [leaf, intermediate, root])
    }

    /// Creates a new root, intermediate and leaf, all valid for the same period, with new P-256 keys.
    ///
    /// - Parameters:
    ///   - commonNamePrefix: starts every certificate's common name.
    ///   - notValidBefore: start of the validity of all three certificates.
    ///   - notValidAfter: end of the validity of all three certificates.
    ///   - options: leave out a marker extension (for negative tests).
    /// - Returns: the PKI, holding the leaf's private key.
    /// - Throws: `DevSigningError` for an empty prefix or an empty validity period.
    public static func generate(
        commonNamePrefix: String = "AstroSvitla Dev",
        notValidBefore: Date,
        notValidAfter: Date,
        options: Options = Options()
    ) throws -> DevPKI {
        guard !commonNamePrefix.isEmpty else { throw DevSigningError("the common name prefix is empty") }
        guard notValidBefore < notValidAfter else {
            throw DevSigningError(
                "notValidBefore (\(notValidBefore)) must be earlier than notValidAfter (\(notValidAfter))"
            )
        }
        let rootKey = P256.Signing.PrivateKey()
        let intermediateKey = P256.Signing.PrivateKey()
        let leafKey = P256.Signing.PrivateKey()
        do {
            let rootName = try Self.name("\(commonNamePrefix) Root CA")
            let intermediateName = try Self.name("\(commonNamePrefix) Worldwide Developer Relations CA")
            let leafName = try Self.name("\(commonNamePrefix) App Store Receipt Signing")
            let rootPublic = Certificate.PublicKey(rootKey.publicKey)
            let intermediatePublic = Certificate.PublicKey(intermediateKey.publicKey)
            let leafPublic = Certificate.PublicKey(leafKey.publicKey)
            let rootSKI = SubjectKeyIdentifier(hash: rootPublic)
            let intermediateSKI = SubjectKeyIdentifier(hash: intermediatePublic)

            let root = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: rootPublic,
                notValidBefore: notValidBefore,
                notValidAfter: notValidAfter,
                issuer: rootName,
                subject: rootName,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: Certificate.Extensions([
                    Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: nil), critical: true),
                    Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true),
                    Certificate.Extension(rootSKI, critical: false),
                ]),
                issuerPrivateKey: Certificate.PrivateKey(rootKey)
            )
            var intermediateExtensions = [
                try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: 0), critical: true),
                try Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true),
                try Certificate.Extension(intermediateSKI, critical: false),
                try Certificate.Extension(
                    AuthorityKeyIdentifier(keyIdentifier: rootSKI.keyIdentifier),
                    critical: false
                ),
            ]
            if options.intermediateMarkerExtension {
                intermediateExtensions.append(try Self.marker(AppStoreCertificateMarkers.intermediate))
            }
            let intermediate = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: intermediatePublic,
                notValidBefore: notValidBefore,
                notValidAfter: notValidAfter,
                issuer: rootName,
                subject: intermediateName,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: Certificate.Extensions(intermediateExtensions),
                issuerPrivateKey: Certificate.PrivateKey(rootKey)
            )
            var leafExtensions = [
                try Certificate.Extension(BasicConstraints.notCertificateAuthority, critical: true),
                try Certificate.Extension(KeyUsage(digitalSignature: true), critical: true),
                try Certificate.Extension(SubjectKeyIdentifier(hash: leafPublic), critical: false),
                try Certificate.Extension(
                    AuthorityKeyIdentifier(keyIdentifier: intermediateSKI.keyIdentifier),
                    critical: false
                ),
            ]
            if options.leafMarkerExtension {
                leafExtensions.append(try Self.marker(AppStoreCertificateMarkers.leaf))
            }
            let leaf = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: leafPublic,
                notValidBefore: notValidBefore,
                notValidAfter: notValidAfter,
                issuer: intermediateName,
                subject: leafName,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: Certificate.Extensions(leafExtensions),
                issuerPrivateKey: Certificate.PrivateKey(intermediateKey)
            )
            return DevPKI(root: root, intermediate: intermediate, leaf: leaf, leafKey: leafKey)
        } catch {
            throw DevSigningError("cannot create the development certificates: \(error)")
        }
    }

    /// File names inside a PKI folder.
    public enum FileName {
        public static let rootDER = "root.der"
        public static let rootPEM = "root.pem"
        public static let intermediatePEM = "intermediate.pem"
        public static let leafPEM = "leaf.pem"
        public static let leafKeyPEM = "leaf-key.pem"
    }

    /// Writes `root.der` and `root.pem` (what a verifier trusts), `intermediate.pem`, `leaf.pem`
    /// and `leaf-key.pem` (the leaf's private key, PKCS#8 PEM, mode 0600). Existing files are
    /// replaced; the folder is created if missing.
    ///
    /// - Parameter directory: the folder.
    /// - Throws: `DevSigningError` when a file cannot be written.
    public func write(to directory: URL) throws {
        let files: [(String, Data)] = [
            (FileName.rootDER, Data(try JWSSigner.derBytes(of: root))),
            (FileName.rootPEM, Data(try Self.pem(root).utf8)),
            (FileName.intermediatePEM, Data(try Self.pem(intermediate).utf8)),
            (FileName.leafPEM, Data(try Self.pem(leaf).utf8)),
            (FileName.leafKeyPEM, Data((leafKey.pemRepresentation + "\n").utf8)),
        ]
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            for (name, data) in files {
                let url = directory.appendingPathComponent(name)
                try data.write(to: url, options: .atomic)
                if name == FileName.leafKeyPEM {
                    try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
                }
            }
        } catch {
            throw DevSigningError(
                "cannot write the development PKI to \(directory.path): \(error.localizedDescription)"
            )
        }
    }

    /// Reads a folder ``write(to:)`` wrote.
    ///
    /// - Parameter directory: the folder.
    /// - Returns: the PKI, able to sign.
    /// - Throws: `DevSigningError` naming the missing or malformed file, or when the leaf key does
    ///   not belong to the leaf certificate.
    public static func load(from directory: URL) throws -> DevPKI {
        func text(_ name: String) throws(DevSigningError) -> String {
            let path = directory.appendingPathComponent(name).path
            guard let data = FileManager.default.contents(atPath: path) else {
                throw DevSigningError(
                    "\(path) is missing or unreadable: is this a folder `astroctl billing dev-pki` wrote?"
                )
            }
            return String(decoding: data, as: UTF8.self)
        }
        func certificate(_ name: String) throws(DevSigningError) -> Certificate {
            do {
                return try Certificate(pemEncoded: try text(name))
            } catch {
                throw DevSigningError("\(directory.appendingPathComponent(name).path) is not a PEM certificate")
            }
        }
        let root = try certificate(FileName.rootPEM)
        let intermediate = try certificate(FileName.intermediatePEM)
        let leaf = try certificate(FileName.leafPEM)
        let key: P256.Signing.PrivateKey
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: try text(FileName.leafKeyPEM))
        } catch {
            throw DevSigningError(
                "\(directory.appendingPathComponent(FileName.leafKeyPEM).path) is not a P-256 private key in PEM"
            )
        }
        guard Certificate.PublicKey(key.publicKey) == leaf.publicKey else {
            throw DevSigningError("\(FileName.leafKeyPEM) is not the private key of \(FileName.leafPEM)")
        }
        return DevPKI(root: root, intermediate: intermediate, leaf: leaf, leafKey: key)
    }

    private static func name(_ commonName: String) throws -> DistinguishedName {
        try DistinguishedName {
            CommonName(commonName)
            OrganizationalUnitName("Development only")
            OrganizationName("AstroSvitla development PKI (not Apple)")
            CountryName("US")
        }
    }

    /// One of Apple's marker extensions: non-critical, value ASN.1 NULL.
    private static func marker(_ oid: ASN1ObjectIdentifier) throws -> Certificate.Extension {
        var serializer = DER.Serializer()
        try serializer.serialize(ASN1Null())
        return Certificate.Extension(oid: oid, critical: false, value: serializer.serializedBytes[...])
    }

    private static func pem(_ certificate: Certificate) throws -> String {
        do {
            return try certificate.serializeAsPEM().pemString + "\n"
        } catch {
            throw DevSigningError("cannot encode \(certificate.subject) as PEM: \(error)")
        }
    }
}
