// swift-crypto 3 does not annotate Sendable; its keys are immutable values, safe to share.
@preconcurrency import Crypto
import Foundation
import JOSE
import StoreKitVerification
import SwiftASN1
import X509

/// `jws`: StoreKit 2 signed data (`SignedDataVerifier.verifyTransaction` and `.verifyNotification`).
///
/// A development PKI (`DevPKI.generate`) is made once per process; the verifier trusts its root and
/// the root of the App Store Server Library fixtures (Tests/StoreKitVerificationTests/Fixtures), so
/// both the corpus's fixture tokens and tokens the target signs itself can verify all the way.
///
/// Input: a mode byte, an environment byte, then the body.
/// - mode `T`: the body is a token, verified as it is;
/// - mode `P`: the body is a payload, signed here with the PKI's leaf (header `{"alg":"ES256","x5c":[…]}`);
/// - mode `H`: the body is a header line, `\n`, then a payload; `$leaf`, `$intermediate` and `$root` in
///   the header become the PKI's certificates (standard base64 DER), and the two are signed here;
/// - mode `N`: the body is a transaction payload, `\n`, then a notification payload in which `$inner`
///   becomes the transaction signed here; the notification is signed here too.
/// Other mode bytes count as `T`, `P`, `H`, `N` by their value modulo 4.
/// The environment byte picks the policy: `P` Production, `S` Sandbox, `X` Xcode, `L` LocalTesting
/// (others modulo 4), always for bundle id `com.astrosvitla.astroinsight` (app Apple ID 1234567890).
///
/// Each token is verified as a transaction and as a notification, twice with the same verifier.
/// Invariant: the second round (chain cache warm) gives the same outcomes as the first.
public enum JWSTarget {
    static let target = FuzzTarget(
        name: "jws",
        summary: "SignedDataVerifier.verifyTransaction/verifyNotification with a development PKI",
        setUp: { _ = context },
        runAsync: { data in _ = await outcomes(data) }
    )

    public static let bundleID = "com.astrosvitla.astroinsight"
    public static let appAppleID: Int64 = 1_234_567_890

    private struct Context: Sendable {
        var pki: DevPKI
        var policies: [VerificationPolicy]
        var leaf: String
        var intermediate: String
        var root: String
    }

    private static let context: Context = {
        do {
            let pki = try DevPKI.generate(
                commonNamePrefix: "AstroSvitla Fuzz",
                notValidBefore: Date(timeIntervalSince1970: 978_307_200),  // 2001-01-01
                notValidAfter: Date(timeIntervalSince1970: 4_102_444_800)  // 2100-01-01
            )
            let fixtureRoot = try Certificate(derEncoded: Array(Data(base64Encoded: fixtureRootBase64)!))
            let environments: [StoreEnvironment] = [.production, .sandbox, .xcode, .localTesting]
            let policies = try environments.map { environment in
                try VerificationPolicy(
                    trustedRoots: [pki.root, fixtureRoot],
                    bundleID: bundleID,
                    environment: environment,
                    appAppleID: appAppleID
                )
            }
            return Context(
                pki: pki,
                policies: policies,
                leaf: try base64DER(pki.leaf),
                intermediate: try base64DER(pki.intermediate),
                root: try base64DER(pki.root)
            )
        } catch {
            fatalError("jws: cannot set up the development PKI: \(error)")
        }
    }()

    /// Verifies one input (see the type's documentation) and returns the outcomes of the first round:
    /// `transaction: ok <transactionId>` or `transaction: <reason>`, then the same for `notification`.
    public static func outcomes(_ data: Data) async -> [String] {
        let bytes = [UInt8](data)
        guard bytes.count >= 2 else { return [] }
        let context = context
        let policy = context.policies[Int(environmentIndex(bytes[1]))]
        let body = Array(bytes[2...])
        let token: String
        switch modeIndex(bytes[0]) {
        case 0:
            token = String(decoding: body, as: UTF8.self)
        case 1:
            token = sign(header: defaultHeader(context), payload: body, context)
        case 2:
            let (headerTemplate, payload) = split(body)
            let header = String(decoding: headerTemplate, as: UTF8.self)
                .replacingOccurrences(of: "$leaf", with: context.leaf)
                .replacingOccurrences(of: "$intermediate", with: context.intermediate)
                .replacingOccurrences(of: "$root", with: context.root)
            token = sign(header: Array(header.utf8), payload: payload, context)
        default:
            let (inner, outerTemplate) = split(body)
            let innerToken = sign(header: defaultHeader(context), payload: inner, context)
            let outer = String(decoding: outerTemplate, as: UTF8.self).replacingOccurrences(
                of: "$inner",
                with: innerToken
            )
            token = sign(header: defaultHeader(context), payload: Array(outer.utf8), context)
        }

        let verifier = SignedDataVerifier(policy: policy)
        let first = [await transaction(token, verifier), await notification(token, verifier)]
        let second = [await transaction(token, verifier), await notification(token, verifier)]
        invariant(
            first == second,
            "the verifier's outcome changed on the second round (chain cache): \(first) then \(second), "
                + "environment \(policy.environment.rawValue), token \(quoted(token, limit: 400))"
        )
        return first
    }

    private static func transaction(_ token: String, _ verifier: SignedDataVerifier) async -> String {
        do {
            let verified = try await verifier.verifyTransaction(token)
            invariant(!verified.transactionID.isEmpty, "a verified transaction has an empty transactionId")
            return "transaction: ok \(verified.transactionID)"
        } catch {
            return "transaction: \(error.reason.rawValue)"
        }
    }

    private static func notification(_ token: String, _ verifier: SignedDataVerifier) async -> String {
        do {
            let verified = try await verifier.verifyNotification(token)
            return "notification: ok \(verified.transaction?.transactionID ?? "(no transaction)")"
        } catch {
            return "notification: \(error.reason.rawValue)"
        }
    }

    /// `T`, `P`, `H`, `N` → 0…3; any other byte modulo 4.
    private static func modeIndex(_ byte: UInt8) -> UInt8 {
        switch byte {
        case UInt8(ascii: "T"): 0
        case UInt8(ascii: "P"): 1
        case UInt8(ascii: "H"): 2
        case UInt8(ascii: "N"): 3
        default: byte % 4
        }
    }

    /// `P`, `S`, `X`, `L` → 0…3 (the order of `Context.policies`); any other byte modulo 4.
    private static func environmentIndex(_ byte: UInt8) -> UInt8 {
        switch byte {
        case UInt8(ascii: "P"): 0
        case UInt8(ascii: "S"): 1
        case UInt8(ascii: "X"): 2
        case UInt8(ascii: "L"): 3
        default: byte % 4
        }
    }

    /// The bytes before and after the first newline (everything and nothing when there is none).
    private static func split(_ bytes: [UInt8]) -> ([UInt8], [UInt8]) {
        guard let newline = bytes.firstIndex(of: 0x0A) else { return (bytes, []) }
        return (Array(bytes[..<newline]), Array(bytes[(newline + 1)...]))
    }

    private static func defaultHeader(_ context: Context) -> [UInt8] {
        Array("{\"alg\":\"ES256\",\"x5c\":[\"\(context.leaf)\",\"\(context.intermediate)\",\"\(context.root)\"]}".utf8)
    }

    /// A compact JWS of `header` and `payload` as they are, signed ES256 with the PKI's leaf key.
    private static func sign(header: [UInt8], payload: [UInt8], _ context: Context) -> String {
        do {
            return try CompactJWS.signES256(header: header, payload: payload, key: context.pki.leafKey)
        } catch {
            fatalError("jws: ES256 signing failed: \(error)")
        }
    }

    private static func base64DER(_ certificate: Certificate) throws -> String {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return Data(serializer.serializedBytes).base64EncodedString()
    }

    /// Tests/StoreKitVerificationTests/Fixtures/test-root.der ("Test Root CA - G3", AstroSvitla Test PKI,
    /// not Apple; SHA-256 2d624a0b…201d52), the root the fixture tokens chain to.
    private static let fixtureRootBase64 = """
        MIICOjCCAeCgAwIBAgIUQCYLXsKYcoGp2WsK5Lsa+y6Ge34wCgYIKoZIzj0EAwIwezEaMBgGA1UEAwwRVGVzdCBSb290IENBIC0g\
        RzMxJTAjBgNVBAsMHFRlc3QgQ2VydGlmaWNhdGlvbiBBdXRob3JpdHkxKTAnBgNVBAoMIEFzdHJvU3ZpdGxhIFRlc3QgUEtJIChu\
        b3QgQXBwbGUpMQswCQYDVQQGEwJVUzAeFw0xNDA0MzAwMDAwMDBaFw0zOTA0MzAwMDAwMDBaMHsxGjAYBgNVBAMMEVRlc3QgUm9v\
        dCBDQSAtIEczMSUwIwYDVQQLDBxUZXN0IENlcnRpZmljYXRpb24gQXV0aG9yaXR5MSkwJwYDVQQKDCBBc3Ryb1N2aXRsYSBUZXN0\
        IFBLSSAobm90IEFwcGxlKTELMAkGA1UEBhMCVVMwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQn3+9wmVELIlnFp2tggSmaFtu9\
        MBpHCUGIxLOIOS0HhmmBt49HMWsC2JOfROLnk84JTTNtbNcuuKM3E2FxfYnao0IwQDAdBgNVHQ4EFgQUXEVv+RjqaoeCFhYHZCmw\
        aZgXYLUwDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8EBAMCAQYwCgYIKoZIzj0EAwIDSAAwRQIhAMFlgq6n6jEUq6RdKQVtQr/z\
        HnnXlmwTk0zxQhLERrDSAiB0VU0TDxXZrJNvpOLgwUsqQLVMtaRMKMjrNTgcAgMXmQ==
        """
}
