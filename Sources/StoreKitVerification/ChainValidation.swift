// swift-crypto 3 does not annotate Sendable; its keys and digests are immutable values, safe to
// share (swift-certificates imports it the same way).
@preconcurrency import Crypto
import Foundation
import SwiftASN1
@_spi(DisableValidityCheck) @_spi(FixedExpiryValidationTime) import X509

/// Apple's marker extensions (present, with a NULL value, in Apple's certificates).
public enum AppStoreCertificateMarkers {
    /// Marks the App Store receipt-signing leaf ("Mac App Store and iTunes Store Receipt Signing").
    public static let leaf: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 11, 1]
    /// Marks the Apple Worldwide Developer Relations intermediate.
    public static let intermediate: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 2, 1]
}

/// A chain must be exactly leaf, intermediate, trusted root.
private struct ThreeCertificatesPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "the chain has \(chain.count) certificates, not leaf, intermediate, root")
        }
        return .meetsPolicy
    }
}

/// Apple's App Store policy: leaf, intermediate, root, with the marker extensions on the first two.
private struct AppStoreMarkerPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "the chain has \(chain.count) certificates, not leaf, intermediate, root")
        }
        guard chain[1].extensions[oid: AppStoreCertificateMarkers.intermediate] != nil else {
            return .failsToMeetPolicy(reason: "the intermediate lacks the Apple WWDR marker extension")
        }
        guard chain[0].extensions[oid: AppStoreCertificateMarkers.leaf] != nil else {
            return .failsToMeetPolicy(reason: "the leaf lacks the App Store receipt-signing marker extension")
        }
        return .meetsPolicy
    }
}

/// The outcome of validating a leaf and intermediate against the trusted roots.
struct ValidatedSigner: Sendable {
    var key: P256.Signing.PublicKey
    /// The span in which every certificate of the chain is valid.
    var notBefore: Date
    var notAfter: Date
}

/// Validates leaf → intermediate → trusted root at a given time, as Apple's library does with
/// online checks off: swift-certificates' RFC 5280 policy at that time plus the marker policy.
struct ChainValidator: Sendable {
    let roots: CertificateStore

    /// - Throws: `untrusted-certificate-chain`, `missing-marker-extension`,
    ///   `certificate-not-valid-at-signed-date`, or `invalid-signature` for a leaf key that is not P-256.
    func validate(
        leaf: Certificate,
        intermediate: Certificate,
        at time: Date
    ) async throws(VerificationFailure)
        -> ValidatedSigner
    {
        let intermediates = CertificateStore([intermediate])
        var verifier = Verifier(rootCertificates: roots) {
            RFC5280Policy(fixedExpiryValidationTime: time)
            AppStoreMarkerPolicy()
        }
        guard case .validCertificate(let chain) = await verifier.validate(leaf: leaf, intermediates: intermediates)
        else {
            throw await diagnose(leaf: leaf, intermediates: intermediates, at: time)
        }
        guard let key = P256.Signing.PublicKey(chain.leaf.publicKey) else {
            throw VerificationFailure(.invalidSignature, "the leaf certificate's key is not a P-256 key, so not ES256")
        }
        return ValidatedSigner(
            key: key,
            notBefore: chain.map(\.notValidBefore).max()!,
            notAfter: chain.map(\.notValidAfter).min()!
        )
    }

    /// Why a chain failed: validated again without the time check (then time was the only
    /// problem), and without the marker check (then a marker is missing).
    private func diagnose(
        leaf: Certificate,
        intermediates: CertificateStore,
        at time: Date
    ) async
        -> VerificationFailure
    {
        var timeless = Verifier(rootCertificates: roots) {
            RFC5280Policy.withValidityCheckDisabled()
            AppStoreMarkerPolicy()
        }
        if case .validCertificate(let chain) = await timeless.validate(leaf: leaf, intermediates: intermediates) {
            let names = ["leaf", "intermediate", "root"]
            let problem =
                zip(names, chain).first { _, certificate in
                    time < certificate.notValidBefore || time > certificate.notValidAfter
                }
                .map { name, certificate in
                    time < certificate.notValidBefore
                        ? "the \(name) certificate is not valid until \(certificate.notValidBefore)"
                        : "the \(name) certificate expired on \(certificate.notValidAfter)"
                } ?? "a certificate is outside its validity period"
            return VerificationFailure(.certificateNotValidAtSignedDate, "\(problem); the data was signed at \(time)")
        }
        var markerless = Verifier(rootCertificates: roots) {
            RFC5280Policy.withValidityCheckDisabled()
            ThreeCertificatesPolicy()
        }
        if case .validCertificate(let chain) = await markerless.validate(leaf: leaf, intermediates: intermediates) {
            let intermediateMarked = chain[1].extensions[oid: AppStoreCertificateMarkers.intermediate] != nil
            let which =
                intermediateMarked
                ? "the leaf certificate lacks Apple's receipt-signing marker \(AppStoreCertificateMarkers.leaf)"
                : "the intermediate certificate lacks Apple's WWDR marker \(AppStoreCertificateMarkers.intermediate)"
            return VerificationFailure(.missingMarkerExtension, "\(which): not an App Store signing certificate")
        }
        return VerificationFailure(
            .untrustedCertificateChain,
            "x5c[0] and x5c[1] do not form a chain leaf → intermediate → a trusted root"
        )
    }
}

/// A bounded cache of chains that validated, so that later data signed by the same leaf costs one
/// signature check. Only successes are stored, each with the time span it is valid in.
struct ChainCache: Sendable {
    struct Entry: Sendable {
        var signer: ValidatedSigner
        var lastUse: UInt64
    }

    let capacity: Int
    private(set) var entries: [SHA256Digest: Entry] = [:]
    private var clock: UInt64 = 0
    private(set) var hits = 0
    private(set) var validations = 0

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// The cache key of a leaf and intermediate: SHA-256 over both DER encodings, each preceded by
    /// its length.
    static func key(leaf: Data, intermediate: Data) -> SHA256Digest {
        var hasher = SHA256()
        for part in [leaf, intermediate] {
            withUnsafeBytes(of: UInt64(part.count).bigEndian) { hasher.update(bufferPointer: $0) }
            hasher.update(data: part)
        }
        return hasher.finalize()
    }

    /// The signer for a chain validated before, if `time` lies inside its validity span (one
    /// second in from either end, so a boundary case is always validated afresh).
    mutating func signer(for key: SHA256Digest, at time: Date) -> ValidatedSigner? {
        guard var entry = entries[key] else { return nil }
        let signer = entry.signer
        guard signer.notBefore.addingTimeInterval(1) <= time, time <= signer.notAfter.addingTimeInterval(-1) else {
            return nil
        }
        clock += 1
        entry.lastUse = clock
        entries[key] = entry
        hits += 1
        return signer
    }

    mutating func recordValidation() {
        validations += 1
    }

    /// Stores a chain that validated, evicting the least recently used entry when full.
    mutating func store(_ signer: ValidatedSigner, for key: SHA256Digest) {
        clock += 1
        if entries[key] == nil, entries.count >= capacity,
            let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key
        {
            entries.removeValue(forKey: oldest)
        }
        entries[key] = Entry(signer: signer, lastUse: clock)
    }
}
