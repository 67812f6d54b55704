import AstroDomain
import Crypto
import Foundation
import Hummingbird
import JOSE
import StoreKitVerification

/// The shape of an App Store Server Notification V2 request body, `{"signedPayload": "<JWS>"}`,
/// checked before anything is published: one JSON object whose `signedPayload` is a compact JWS
/// of three base64url parts, a header with `alg` ES256 and an `x5c` chain, a payload that is a
/// JSON object, and a 64-byte ES256 signature.
///
/// Shape only, a cheap first filter: the route then verifies the signature, the chain to the
/// trusted root and the payload's app and environment (`SignedDataVerifier`, the billing-worker's
/// verifier under the same policy) before anything is queued — this endpoint has no bearer token
/// because Apple calls it, so the signature is its only credential. Members other than
/// `signedPayload` are ignored, so a field Apple adds later is not refused (a refusal would be
/// retried).
public struct AppStoreNotificationShape: Sendable, Hashable {
    /// The largest body read (64 KiB): a notification carries the signed transaction and renewal
    /// info, each a JWS with its own certificate chain, inside its own signed payload — about
    /// 30 KB in practice; the billing-worker accepts up to 128 KiB per JWS.
    public static let maxBodyBytes = 65_536
    /// The longest JWS header part (base64url), which carries the `x5c` certificates.
    public static let maxHeaderBytes = 24_576
    /// The most certificates in `x5c` (Apple's chain has three).
    public static let maxCertificates = 8

    /// The JWS, as Apple sent it.
    public var signedPayload: String
    /// What the payload says its `notificationUUID` and `notificationType` are — unverified, for
    /// logs only.
    public var claimedUUID: String?
    public var claimedType: String?

    /// Checks `body`.
    /// - Throws: `Problem` 400 `invalid-json` (not a JSON object) or `invalid-notification` (with
    ///   `field` `signedPayload`) for any other deviation.
    public init(body: Data) throws(Problem) {
        guard let value = try? JSONValue.parse(body), case .object(let members) = value else {
            throw Problem(.invalidJSON, "the body is not a JSON object")
        }
        guard case .string(let jws)? = members["signedPayload"] else {
            throw Self.invalid("signedPayload: expected the notification's JWS string")
        }
        let segments = jws.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3, segments.allSatisfy({ !$0.isEmpty }) else {
            throw Self.invalid("signedPayload: expected a compact JWS (header.payload.signature)")
        }
        let headerProblem = Self.invalid(
            "signedPayload: the JWS header is not base64url JSON of at most \(Self.maxHeaderBytes) bytes"
        )
        let payloadProblem = Self.invalid("signedPayload: the JWS payload is not base64url JSON")
        let signatureProblem = Self.invalid("signedPayload: the JWS signature is not a 64-byte ES256 signature")
        // Bounded before anything is decoded.
        guard segments[0].count <= Self.maxHeaderBytes else { throw headerProblem }
        let parsed: CompactJWS
        do {
            parsed = try CompactJWS(parsing: jws)
        } catch {
            switch error {
            case .segmentCount, .notBase64URL(.header): throw headerProblem
            case .notBase64URL(.payload): throw payloadProblem
            case .notBase64URL(.signature): throw signatureProblem
            }
        }
        guard let header = try? JSONValue.parse(parsed.header), case .object(let fields) = header else {
            throw headerProblem
        }
        guard fields["alg"] == "ES256" else {
            throw Self.invalid("signedPayload: the JWS header's alg is not ES256")
        }
        guard case .array(let chain)? = fields["x5c"], (1...Self.maxCertificates).contains(chain.count),
            chain.allSatisfy({ $0.stringValue.map { !$0.isEmpty } ?? false })
        else {
            throw Self.invalid(
                "signedPayload: the JWS header has no x5c chain of 1–\(Self.maxCertificates) certificates"
            )
        }
        guard let payload = try? JSONValue.parse(parsed.payload), case .object(let claims) = payload else {
            throw payloadProblem
        }
        guard parsed.signature.count == 64 else { throw signatureProblem }
        signedPayload = jws
        claimedUUID = claims["notificationUUID"]?.stringValue.map { String($0.prefix(64)) }
        claimedType = claims["notificationType"]?.stringValue.map { String($0.prefix(64)) }
    }

    static func invalid(_ detail: String) -> Problem {
        Problem(.invalidNotification, detail, field: "signedPayload")
    }

    /// The job id: a version-8 UUID from the SHA-256 of the JWS, so every delivery of the same
    /// notification is the same job. Apple retries until it gets a 200 (and a 200 may be lost on
    /// the way back), and the worker runs a job id once: a retry is acknowledged as a duplicate
    /// instead of becoming another job. Derived from the whole JWS, not from its (unverified)
    /// `notificationUUID`: a forged payload that copied a real notification's UUID would
    /// otherwise take the real one's job id first and make the real notification a duplicate of
    /// a rejected job. A redelivery Apple signed again has another id; billing then recognizes
    /// it by its verified `notificationUUID` (NotificationLedger) and changes nothing twice.
    public var jobID: JobID {
        var bytes = Array(SHA256.hash(data: Data(signedPayload.utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let uuid = UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            )
        )
        return JobID(uuid)
    }
}

extension GatewayRoutes {
}

extension GatewayRoutes {
    /// App Store Server Notifications (no bearer token: Apple signs the body).
    struct AppStore: GatewayController {
        let appStoreVerifier: SignedDataVerifier?
        let metrics: GatewayMetrics
        let jobs: JobAcceptor
        let body: BodyReader

        func addRoutes(to routes: Registrar) {
            routes.open(.receiveAppStoreNotification, use: appStoreNotification)
        }

        /// `POST /v1/appstore/notifications`: App Store Server Notifications V2. Checks the body's
        /// size and shape, verifies the JWS (signature, x5c chain to a trusted root, bundle id,
        /// environment and, in Production, the app's Apple ID, and the transaction inside) with the
        /// billing-worker's verifier and policy, publishes `billing.store-notification` and answers 200
        /// only once the broker confirmed it; a broker failure is 503, which Apple retries (so nothing
        /// is lost), and a duplicate is harmless (the same job id, and billing deduplicates by
        /// `notificationUUID`). The billing-worker verifies again before the ledger changes.
        ///
        /// A notification that does not verify is answered 403 `notification-unverified` and logged
        /// with its reason and claimed type, never its body; nothing is queued or stored (issue 29:
        /// forged notifications had become jobs rows and dead letters). Why 403 and not 200: Apple
        /// retries any non-200 answer for about three days, so a genuine notification refused because
        /// of our own setup (a wrong `BILLING_ENVIRONMENT`, a missing root) comes back after the fix
        /// instead of being lost; a forger gains nothing from either answer. Why not 400 or 401: the
        /// request is well-formed (400 is the shape check's answer), and there is no credential to
        /// send instead (401 asks for one); the signature was understood and grants nothing.
        /// - Throws: `Problem` 400, 403, 408, 413 or 503 (also when verification is not configured).
        func appStoreNotification(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            guard let verifier = appStoreVerifier else {
                throw Problem.unavailable(
                    .appStoreNotificationsOff,
                    "this gateway has no App Store verification policy (BILLING_ENVIRONMENT is not set)"
                )
            }
            let data = try await body(request, limit: AppStoreNotificationShape.maxBodyBytes)
            let notification: AppStoreNotificationShape
            do {
                notification = try AppStoreNotificationShape(body: data)
            } catch {
                metrics.recordAppStoreNotification(outcome: "malformed")
                context.logger.notice("app store notification refused", metadata: ["problem.code": "\(error.code)"])
                throw error
            }
            do {
                _ = try await verifier.verifyNotification(notification.signedPayload)
            } catch {
                metrics.recordAppStoreNotification(outcome: "unverified")
                context.logger.notice(
                    "app store notification refused",
                    metadata: [
                        "problem.code": "\(ErrorCode.notificationUnverified)",
                        "verification.reason": "\(error.reason.rawValue)",
                        // What the payload claims, unverified and shortened; never the body.
                        "notification.claimed_type": "\(notification.claimedType ?? "")",
                    ]
                )
                throw Problem(
                    .notificationUnverified,
                    "the signedPayload does not verify (\(error.reason.rawValue))"
                )
            }
            let jobID = notification.jobID
            let job = StoreNotificationRequest(jobID: jobID, signedPayload: notification.signedPayload)
            try await jobs.publish(
                .billingStoreNotification,
                jobID: jobID,
                body: try JSONCoding.encoder.encode(job),
                context: context
            )
            metrics.recordAppStoreNotification(outcome: "queued")
            context.logger.info(
                "app store notification queued",
                metadata: [
                    "job.id": "\(jobID)", "job.type": "billing.store-notification",
                    "notification.claimed_uuid": "\(notification.claimedUUID ?? "")",
                    "notification.claimed_type": "\(notification.claimedType ?? "")",
                ]
            )
            return try respond(NotificationAcceptedAnswer(jobId: jobID), status: .ok)
        }
    }
}
