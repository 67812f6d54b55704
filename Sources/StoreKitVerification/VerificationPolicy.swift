import Crypto
import Foundation
import SwiftASN1
import X509

/// The App Store environment a piece of signed data belongs to, as StoreKit writes it in the
/// payload's `environment` field.
public enum StoreEnvironment: String, Sendable, Codable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
    /// StoreKit Testing in Xcode: signed locally, not by the App Store.
    case xcode = "Xcode"
    /// StoreKit Testing outside Xcode: signed locally, not by the App Store.
    case localTesting = "LocalTesting"

    /// Whether StoreKit signs data of this environment with a local certificate rather than one
    /// issued by Apple (so no chain to a trusted root exists).
    public var isLocallySigned: Bool {
        self == .xcode || self == .localTesting
    }
}

/// A verifier's configuration that cannot work: no trusted root, no bundle id, Production
/// without the app's Apple ID, or a certificate file that cannot be read.
public struct VerificationSetupError: Error, Sendable, CustomStringConvertible {
    /// One line saying what is wrong and how to fix it.
    public var message: String
    /// The environment variable at fault, when the policy was read from the environment
    /// (`VerificationPolicyConfiguration.fromEnvironment`).
    public var variable: String?

    public init(message: String, variable: String? = nil) {
        self.message = message
        self.variable = variable
    }

    public var description: String { message }
}

/// What signed data must satisfy to verify: the roots its certificate chain must end in, and the
/// app and environment its payload must name.
public struct VerificationPolicy: Sendable {
    /// The only certificates a chain may end in (x5c[2] is never read). Apple's data verifies
    /// against ``appleRootCAG3``.
    public var trustedRoots: [Certificate]
    /// The app's bundle identifier; payloads for any other app are rejected.
    public var bundleID: String
    /// The environment payloads must name; data from any other environment is rejected.
    public var environment: StoreEnvironment
    /// The app's Apple ID (`appAppleId`). Required in Production, where a notification must carry it.
    public var appAppleID: Int64?

    /// - Parameters:
    ///   - trustedRoots: the roots a chain must end in; at least one.
    ///   - bundleID: the app's bundle identifier; not empty.
    ///   - environment: the environment payloads must name.
    ///   - appAppleID: the app's Apple ID; required when `environment` is `.production`.
    /// - Throws: `VerificationSetupError` for no roots, an empty bundle id, or Production without
    ///   `appAppleID`.
    public init(
        trustedRoots: [Certificate],
        bundleID: String,
        environment: StoreEnvironment,
        appAppleID: Int64? = nil
    ) throws(VerificationSetupError) {
        guard !trustedRoots.isEmpty else {
            throw VerificationSetupError(message: "no trusted root certificate: give at least one (Apple Root CA - G3)")
        }
        guard !bundleID.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw VerificationSetupError(message: "the bundle id is empty: give the app's bundle identifier")
        }
        if environment == .production && appAppleID == nil {
            throw VerificationSetupError(
                message: "the Production environment needs the app's Apple ID (appAppleId) to verify notifications"
            )
        }
        self.trustedRoots = trustedRoots
        self.bundleID = bundleID
        self.environment = environment
        self.appAppleID = appAppleID
    }

    /// Apple Root CA - G3, the root every App Store signing chain ends in (shipped with this
    /// module as Resources/AppleRootCA-G3.der), SHA-256 fingerprint
    /// `63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79`.
    public static var appleRootCAG3: Certificate {
        AppleRoot.certificate
    }

    /// A certificate's SHA-256 fingerprint, as `openssl x509 -fingerprint -sha256` prints it
    /// (upper-case hex pairs joined by colons): to log or check which roots are trusted.
    public static func sha256Fingerprint(of certificate: Certificate) -> String {
        var serializer = DER.Serializer()
        do {
            try serializer.serialize(certificate)
        } catch {
            return "(unserializable certificate)"
        }
        return SHA256.hash(data: serializer.serializedBytes)
            .map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true) }
            .joined(separator: ":")
    }

    /// Reads certificates from a file: one DER certificate, or PEM holding one or more
    /// `CERTIFICATE` blocks (other PEM blocks are ignored).
    ///
    /// - Parameter path: the file to read.
    /// - Returns: the certificates, in file order; at least one.
    /// - Throws: `VerificationSetupError` when the file cannot be read or holds no certificate.
    public static func loadCertificates(fromFile path: String) throws(VerificationSetupError) -> [Certificate] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw VerificationSetupError(message: "cannot read the file (missing or not readable)")
        }
        let bytes = [UInt8](data)
        let pemMarker = Array("-----BEGIN ".utf8)
        let isPEM =
            bytes.count >= pemMarker.count
            && bytes.indices.dropLast(pemMarker.count - 1).contains { start in
                bytes[start..<(start + pemMarker.count)].elementsEqual(pemMarker)
            }
        if !isPEM {
            do {
                return [try Certificate(derEncoded: bytes)]
            } catch {
                throw VerificationSetupError(message: "not a DER certificate or a PEM file of certificates")
            }
        }
        let documents: [PEMDocument]
        do {
            documents = try PEMDocument.parseMultiple(pemString: String(decoding: bytes, as: UTF8.self))
        } catch {
            throw VerificationSetupError(message: "malformed PEM: \(error)")
        }
        var certificates: [Certificate] = []
        for (index, document) in documents.enumerated() where document.discriminator == "CERTIFICATE" {
            do {
                certificates.append(try Certificate(pemDocument: document))
            } catch {
                throw VerificationSetupError(message: "PEM block \(index + 1) is not a valid certificate")
            }
        }
        guard !certificates.isEmpty else {
            throw VerificationSetupError(message: "the PEM file holds no CERTIFICATE block")
        }
        return certificates
    }
}

/// The shipped copy of Apple Root CA - G3.
private enum AppleRoot {
    static let certificate: Certificate = {
        guard
            let url = Bundle.module.url(forResource: "AppleRootCA-G3", withExtension: "der", subdirectory: "Resources"),
            let data = try? Data(contentsOf: url)
        else {
            fatalError("StoreKitVerification: the bundled resource Resources/AppleRootCA-G3.der is missing")
        }
        do {
            return try Certificate(derEncoded: [UInt8](data))
        } catch {
            fatalError("StoreKitVerification: the bundled Resources/AppleRootCA-G3.der does not parse: \(error)")
        }
    }()
}
