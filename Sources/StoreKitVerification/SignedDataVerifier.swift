import Crypto
import Foundation
import JOSE
import Synchronization
import X509

/// Verifies StoreKit 2 signed data — transactions and App Store Server Notifications V2 — the
/// way Apple's App Store Server Library does with online checks off.
///
/// A token verifies only if all of these hold, checked in this order (the first failure is the
/// reason thrown):
/// 1. at most ``maximumTokenLength`` bytes, not blank;
/// 2. three segments of unpadded base64url, the first a JSON object with `alg` exactly `ES256`
///    and an `x5c` array of exactly three certificates, x5c[0] and x5c[1] standard base64 DER
///    (x5c[2] is never read: the chain is anchored only in the policy's trusted roots);
/// 3. the payload is a JSON object; its `signedDate` (or now, when it has none) is the time the
///    chain is checked at, and must lie in the years 1 to 9999 that certificates can express;
/// 4. x5c[0] → x5c[1] → a trusted root is a valid chain at that time under RFC 5280, with Apple's
///    marker extensions on the leaf (1.2.840.113635.100.6.11.1) and intermediate
///    (1.2.840.113635.100.6.2.1);
/// 5. the ES256 signature (raw r‖s) over the literal `header.payload` text verifies with the leaf's key;
/// 6. the payload is the kind asked for and names the policy's bundle id and environment (and, for
///    a Production notification, its app Apple ID); a notification's `data.signedTransactionInfo`
///    verifies as a transaction.
///
/// In the `.xcode` and `.localTesting` environments StoreKit Testing signs with a local
/// self-signed certificate, so step 4 is skipped: x5c may hold one to three certificates and only
/// x5c[0] is used, but the signature must still verify with x5c[0]'s key and the payload must name
/// that environment. (Apple's library skips the signature too; this verifier does not.)
///
/// Chains that validated are cached (at most ``chainCacheCapacity``, keyed by SHA-256 of x5c[0]
/// and x5c[1]) with the span in which all three certificates are valid; data signed inside that
/// span by a cached chain costs one signature check, anything else is validated in full.
///
/// - Important: Thread-safe; share one instance. The cache is per instance.
public final class SignedDataVerifier: Sendable {
    /// Longer tokens are rejected before any decoding (`token-too-large`).
    public static let maximumTokenLength = 128 * 1024
    /// Chains remembered after validating.
    public static let chainCacheCapacity = 32

    /// 0001-01-01T00:00:00Z through 9999-12-31T23:59:59Z, the times a certificate can express.
    private static let certificateTimeRange =
        Date(timeIntervalSince1970: -62_135_596_800)...Date(timeIntervalSince1970: 253_402_300_799)

    /// What data must satisfy.
    public let policy: VerificationPolicy
    private let validator: ChainValidator
    private let cache: Mutex<ChainCache>

    public init(policy: VerificationPolicy) {
        self.policy = policy
        self.validator = ChainValidator(roots: CertificateStore(policy.trustedRoots))
        self.cache = Mutex(ChainCache(capacity: Self.chainCacheCapacity))
    }

    /// How the chain cache has been used.
    public struct ChainCacheStatistics: Sendable, Hashable {
        /// Verifications that reused a cached chain.
        public var hits: Int
        /// Full chain validations (successful or not).
        public var validations: Int
        /// Chains cached now.
        public var entries: Int

        public init(hits: Int, validations: Int, entries: Int) {
            self.hits = hits
            self.validations = validations
            self.entries = entries
        }
    }

    /// The chain cache's counters.
    public var chainCacheStatistics: ChainCacheStatistics {
        cache.withLock { ChainCacheStatistics(hits: $0.hits, validations: $0.validations, entries: $0.entries.count) }
    }

    /// Verifies a StoreKit 2 signed transaction (`JWSTransaction`).
    ///
    /// - Parameter jws: the compact JWS, as StoreKit or the App Store Server API gives it.
    /// - Returns: the verified transaction.
    /// - Throws: `VerificationFailure` with the first reason the token does not verify.
    public func verifyTransaction(_ jws: String) async throws(VerificationFailure) -> VerifiedTransaction {
        let signed = try await verifySignedData(jws)
        guard !signed.probe.isNotification else {
            throw VerificationFailure(
                .wrongPayloadKind,
                "this is a signed notification (it has notificationType), not a transaction"
            )
        }
        let payload: TransactionPayload
        do {
            payload = try JSONDecoder().decode(TransactionPayload.self, from: signed.payload)
        } catch {
            throw VerificationFailure(
                .malformedPayload,
                "the transaction payload does not decode: \(Self.describe(error))"
            )
        }
        guard payload.bundleId == policy.bundleID else {
            throw VerificationFailure(
                .bundleIDMismatch,
                "the transaction is for bundle id \(payload.bundleId?.quotedForDetail ?? "(none)"), "
                    + "this verifier accepts \(policy.bundleID.quotedForDetail)"
            )
        }
        guard payload.environment == policy.environment.rawValue else {
            throw VerificationFailure(
                .environmentMismatch,
                "the transaction is from environment \(payload.environment?.quotedForDetail ?? "(none)"), "
                    + "this verifier accepts \(policy.environment.rawValue)"
            )
        }
        guard let transactionID = payload.transactionId, !transactionID.isEmpty else {
            throw VerificationFailure(.malformedPayload, "the transaction has no transactionId")
        }
        return VerifiedTransaction(
            payload: payload,
            transactionID: transactionID,
            signedDate: signed.validationTime,
            rawPayload: signed.payload
        )
    }

    /// Verifies an App Store Server Notification V2 (`signedPayload`), and the transaction inside it.
    ///
    /// - Parameter signedPayload: the `signedPayload` string of the notification's body.
    /// - Returns: the verified notification; its `transaction` is `data.signedTransactionInfo`, verified.
    /// - Throws: `VerificationFailure` with the first reason it does not verify;
    ///   `invalid-notification-transaction` (the inner reason in the detail) when only the
    ///   transaction inside fails.
    public func verifyNotification(_ signedPayload: String) async throws(VerificationFailure) -> VerifiedNotification {
        let signed = try await verifySignedData(signedPayload)
        guard signed.probe.isNotification else {
            throw VerificationFailure(
                .wrongPayloadKind,
                "this payload has no notificationType: it is not an App Store Server Notification"
            )
        }
        let payload: NotificationPayload
        do {
            payload = try JSONDecoder().decode(NotificationPayload.self, from: signed.payload)
        } catch {
            throw VerificationFailure(
                .malformedPayload,
                "the notification payload does not decode: \(Self.describe(error))"
            )
        }
        try checkApp(of: payload)
        var transaction: VerifiedTransaction?
        if let inner = payload.data?.signedTransactionInfo {
            do {
                transaction = try await verifyTransaction(inner)
            } catch {
                throw VerificationFailure(
                    .invalidNotificationTransaction,
                    "the notification verifies but its signedTransactionInfo does not: "
                        + "\(error.reason.rawValue): \(error.detail)"
                )
            }
        }
        return VerifiedNotification(payload: payload, transaction: transaction, rawPayload: signed.payload)
    }

    /// Bundle id, app Apple ID (Production) and environment, read from `data`, else `summary`,
    /// else `externalPurchaseToken`, as Apple's library does.
    private func checkApp(of payload: NotificationPayload) throws(VerificationFailure) {
        let bundleID: String?
        let appAppleID: Int64?
        let environment: String?
        if let data = payload.data {
            (bundleID, appAppleID, environment) = (data.bundleId, data.appAppleId, data.environment)
        } else if let summary = payload.summary {
            (bundleID, appAppleID, environment) = (summary.bundleId, summary.appAppleId, summary.environment)
        } else if let token = payload.externalPurchaseToken {
            (bundleID, appAppleID, environment) = (token.bundleId, token.appAppleId, token.environment.rawValue)
        } else {
            (bundleID, appAppleID, environment) = (nil, nil, nil)
        }
        guard bundleID == policy.bundleID else {
            throw VerificationFailure(
                .bundleIDMismatch,
                "the notification is for bundle id \(bundleID?.quotedForDetail ?? "(none)"), "
                    + "this verifier accepts \(policy.bundleID.quotedForDetail)"
            )
        }
        if policy.environment == .production, appAppleID == nil || appAppleID != policy.appAppleID {
            throw VerificationFailure(
                .appAppleIDMismatch,
                "the notification is for app Apple ID \(appAppleID.map(String.init) ?? "(none)"), "
                    + "this verifier accepts \(policy.appAppleID.map(String.init) ?? "(none)")"
            )
        }
        guard environment == policy.environment.rawValue else {
            throw VerificationFailure(
                .environmentMismatch,
                "the notification is from environment \(environment?.quotedForDetail ?? "(none)"), "
                    + "this verifier accepts \(policy.environment.rawValue)"
            )
        }
    }

    /// A token whose signature and chain verified, with its payload not yet checked.
    private struct SignedData {
        var payload: Data
        var probe: PayloadProbe
        /// The payload's signedDate, or the time of verification when it has none.
        var validationTime: Date
    }

    /// Steps 1–5: structure, header, chain at signedDate, signature.
    private func verifySignedData(_ token: String) async throws(VerificationFailure) -> SignedData {
        let length = token.utf8.count
        guard length <= Self.maximumTokenLength else {
            throw VerificationFailure(
                .tokenTooLarge,
                "the token is \(length) bytes; signed data is at most \(Self.maximumTokenLength)"
            )
        }
        guard token.contains(where: { !$0.isWhitespace }) else {
            throw VerificationFailure(.emptyToken, "no signed data was given")
        }
        let jws: CompactJWS
        do {
            jws = try CompactJWS(parsing: token)
        } catch {
            switch error {
            case .segmentCount(let count):
                throw VerificationFailure(
                    .malformedJWS,
                    "expected three dot-separated segments (header.payload.signature), found \(count)"
                )
            case .notBase64URL(let segment):
                throw VerificationFailure(.malformedJWS, "the \(segment.rawValue) segment is not unpadded base64url")
            }
        }
        let header: JOSEHeader
        do {
            header = try JSONDecoder().decode(JOSEHeader.self, from: jws.header)
        } catch {
            throw VerificationFailure(.malformedJWS, "the JWS header is not a JSON object")
        }
        guard header.algorithm == "ES256" else {
            throw VerificationFailure(
                .unsupportedAlgorithm,
                "the JWS alg is \(header.algorithm?.quotedForDetail ?? "missing"); only \"ES256\" is accepted"
            )
        }
        let chain: [String]
        switch header.certificateChain {
        case .missing:
            throw VerificationFailure(.missingCertificateChain, "the JWS header has no x5c certificate chain")
        case .notAnArrayOfStrings:
            throw VerificationFailure(.missingCertificateChain, "the JWS header's x5c is not an array of strings")
        case .certificates(let entries):
            guard !entries.isEmpty else {
                throw VerificationFailure(.missingCertificateChain, "the JWS header's x5c is empty")
            }
            chain = entries
        }
        let locallySigned = policy.environment.isLocallySigned
        guard chain.count == 3 || (locallySigned && chain.count < 3) else {
            throw VerificationFailure(
                .invalidChainLength,
                "x5c holds \(chain.count) certificates; App Store data carries exactly 3 (leaf, intermediate, root)"
            )
        }
        guard let leafBytes = Data(base64Encoded: chain[0]) else {
            throw VerificationFailure(.malformedCertificate, "x5c[0] is not standard base64")
        }
        var intermediateBytes = Data()
        if !locallySigned {
            guard let bytes = Data(base64Encoded: chain[1]) else {
                throw VerificationFailure(.malformedCertificate, "x5c[1] is not standard base64")
            }
            intermediateBytes = bytes
        }
        let probe: PayloadProbe
        do {
            probe = try JSONDecoder().decode(PayloadProbe.self, from: jws.payload)
        } catch {
            throw VerificationFailure(.malformedPayload, "the payload is not a JSON object with a numeric signedDate")
        }
        let time = probe.signedDate ?? Date()
        // X.509 times end at year 9999; swift-certificates traps on a validation time outside them.
        guard Self.certificateTimeRange.contains(time) else {
            throw VerificationFailure(.malformedPayload, "signedDate is outside the years 1 to 9999")
        }

        let key: P256.Signing.PublicKey
        if locallySigned {
            key = try Self.localKey(leafBytes)
        } else {
            key = try await chainKey(leaf: leafBytes, intermediate: intermediateBytes, at: time)
        }

        guard let signature = jws.es256Signature else {
            throw VerificationFailure(
                .invalidSignature,
                "the signature is \(jws.signature.count) bytes, not the 64 of an ES256 r‖s signature"
            )
        }
        guard key.isValidSignature(signature, for: jws.signingInput) else {
            throw VerificationFailure(
                .invalidSignature,
                "the ES256 signature does not match the leaf certificate's key"
            )
        }
        return SignedData(payload: jws.payload, probe: probe, validationTime: time)
    }

    /// The leaf's key from the cache, or after validating the chain (and caching it).
    private func chainKey(
        leaf: Data,
        intermediate: Data,
        at time: Date
    ) async throws(VerificationFailure)
        -> P256.Signing.PublicKey
    {
        let cacheKey = ChainCache.key(leaf: leaf, intermediate: intermediate)
        if let signer = cache.withLock({ $0.signer(for: cacheKey, at: time) }) {
            return signer.key
        }
        let leafCertificate: Certificate
        let intermediateCertificate: Certificate
        do {
            leafCertificate = try Certificate(derEncoded: [UInt8](leaf))
        } catch {
            throw VerificationFailure(.malformedCertificate, "x5c[0] is not a DER X.509 certificate")
        }
        do {
            intermediateCertificate = try Certificate(derEncoded: [UInt8](intermediate))
        } catch {
            throw VerificationFailure(.malformedCertificate, "x5c[1] is not a DER X.509 certificate")
        }
        cache.withLock { $0.recordValidation() }
        let signer = try await validator.validate(
            leaf: leafCertificate,
            intermediate: intermediateCertificate,
            at: time
        )
        cache.withLock { $0.store(signer, for: cacheKey) }
        return signer.key
    }

    /// StoreKit Testing: the key of x5c[0], trusted without a chain.
    private static func localKey(_ leaf: Data) throws(VerificationFailure) -> P256.Signing.PublicKey {
        let certificate: Certificate
        do {
            certificate = try Certificate(derEncoded: [UInt8](leaf))
        } catch {
            throw VerificationFailure(.malformedCertificate, "x5c[0] is not a DER X.509 certificate")
        }
        guard let key = P256.Signing.PublicKey(certificate.publicKey) else {
            throw VerificationFailure(
                .invalidSignature,
                "the x5c[0] certificate's key is not a P-256 key, so not ES256"
            )
        }
        return key
    }

    /// A decoding error in one line, naming the field but no value.
    private static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "not valid JSON" }
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return keys.isEmpty ? "the top level" : keys.joined(separator: ".")
        }
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\(path(context)) has the wrong type"
        case .keyNotFound(let key, _):
            return "\(key.stringValue) is missing"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not valid JSON" : "\(path(context)) is not valid"
        @unknown default:
            return "not valid JSON"
        }
    }
}
