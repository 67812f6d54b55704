import Crypto
import Foundation
import HTTPTransport

/// Where and as whom the client calls the App Store Server API, and how patiently.
///
/// Validated when made: a value of this type is always usable. The signing key never appears in
/// `description` or a dump.
public struct AppStoreServerAPIConfiguration: Sendable, CustomStringConvertible, CustomReflectable {
    /// `https://api.storekit.itunes.apple.com`, the production App Store.
    public static let production = URL(string: "https://api.storekit.itunes.apple.com")!
    /// `https://api.storekit-sandbox.itunes.apple.com`, the sandbox (TestFlight, development builds).
    public static let sandbox = URL(string: "https://api.storekit-sandbox.itunes.apple.com")!

    /// How a call is retried: on 429, 5xx, timeouts and connection failures only, with capped
    /// exponential backoff and full jitter, honouring `Retry-After`, within a total deadline.
    public struct RetryPolicy: Sendable, Hashable {
        /// Requests per call at most, the first included (1 turns retries off).
        public var maxAttempts: Int
        /// The backoff before the second attempt is drawn from `0...baseDelay`, then doubles.
        public var baseDelay: Duration
        /// The backoff never exceeds this (a `Retry-After` may).
        public var maxDelay: Duration
        /// The whole call, every attempt and wait included, ends within this.
        public var deadline: Duration

        public init(
            maxAttempts: Int = 4,
            baseDelay: Duration = .milliseconds(500),
            maxDelay: Duration = .seconds(8),
            deadline: Duration = .seconds(30)
        ) {
            self.maxAttempts = maxAttempts
            self.baseDelay = baseDelay
            self.maxDelay = maxDelay
            self.deadline = deadline
        }

        /// One attempt, no retries.
        public static let none = RetryPolicy(maxAttempts: 1)

        func validate() throws(AppStoreServerAPIConfigurationError) {
            guard (1...20).contains(maxAttempts) else {
                throw AppStoreServerAPIConfigurationError("retry maxAttempts must be 1...20, not \(maxAttempts)")
            }
            guard baseDelay > .zero, baseDelay <= maxDelay else {
                throw AppStoreServerAPIConfigurationError(
                    "retry baseDelay must be above zero and at most maxDelay (\(baseDelay) vs \(maxDelay))"
                )
            }
            guard deadline > .zero, deadline <= .seconds(600) else {
                throw AppStoreServerAPIConfigurationError(
                    "retry deadline must be above zero and at most 600 s, not \(deadline)"
                )
            }
        }
    }

    /// The API's root, e.g. `production`; `http` only for loopback hosts (local fakes).
    public let baseURL: URL
    /// The In-App Purchase key's id from App Store Connect (the JWT's `kid`).
    public let keyID: String
    /// The issuer id from App Store Connect's Keys page (the JWT's `iss`).
    public let issuerID: String
    /// The app's bundle id (the JWT's `bid`).
    public let bundleID: String
    /// One request's timeout (each attempt; the deadline may cut the last one short).
    public let requestTimeout: Duration
    public let retryPolicy: RetryPolicy
    private let signingKeyBytes: Data

    /// The key the tokens are signed with (ES256).
    public var signingKey: P256.Signing.PrivateKey {
        // The bytes came from a valid key in `init`, so this cannot fail.
        try! P256.Signing.PrivateKey(rawRepresentation: signingKeyBytes)
    }

    /// - Parameters:
    ///   - baseURL: `production`, `sandbox`, or a local fake's URL.
    ///   - keyID: the In-App Purchase key's id.
    ///   - issuerID: the issuer id.
    ///   - bundleID: the app's bundle id.
    ///   - signingKey: the key of the `.p8` file (see `loadSigningKey(fromFile:)`).
    ///   - requestTimeout: per attempt, 10 s by default.
    ///   - retryPolicy: 4 attempts, 0.5 s base delay, 8 s cap, 30 s deadline by default.
    /// - Throws: `AppStoreServerAPIConfigurationError` naming the first invalid field.
    public init(
        baseURL: URL,
        keyID: String,
        issuerID: String,
        bundleID: String,
        signingKey: P256.Signing.PrivateKey,
        requestTimeout: Duration = .seconds(10),
        retryPolicy: RetryPolicy = RetryPolicy()
    ) throws(AppStoreServerAPIConfigurationError) {
        guard baseURL.user == nil, baseURL.password == nil else {
            // Not quoted: the credentials would end up in logs.
            throw AppStoreServerAPIConfigurationError("baseURL must not carry credentials")
        }
        guard let scheme = baseURL.scheme?.lowercased(), let host = baseURL.host, !host.isEmpty else {
            throw AppStoreServerAPIConfigurationError(
                "baseURL \(baseURL.redactedForMessages) is not an absolute http(s) URL"
            )
        }
        let loopbackHosts: Set<String> = ["127.0.0.1", "localhost", "::1", "[::1]"]
        guard scheme == "https" || (scheme == "http" && loopbackHosts.contains(host.lowercased())) else {
            throw AppStoreServerAPIConfigurationError(
                "baseURL \(baseURL.redactedForMessages) must be https (plain http only on a loopback host)"
            )
        }
        guard baseURL.query == nil, baseURL.fragment == nil else {
            throw AppStoreServerAPIConfigurationError(
                "baseURL \(baseURL.redactedForMessages) must not have a query or fragment"
            )
        }
        try Self.requireToken(keyID, "keyID")
        try Self.requireToken(issuerID, "issuerID")
        try Self.requireToken(bundleID, "bundleID")
        guard requestTimeout > .zero, requestTimeout <= .seconds(300) else {
            throw AppStoreServerAPIConfigurationError(
                "requestTimeout must be above zero and at most 300 s, not \(requestTimeout)"
            )
        }
        try retryPolicy.validate()

        var text = baseURL.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        self.baseURL = URL(string: text) ?? baseURL
        self.keyID = keyID
        self.issuerID = issuerID
        self.bundleID = bundleID
        self.requestTimeout = requestTimeout
        self.retryPolicy = retryPolicy
        self.signingKeyBytes = signingKey.rawRepresentation
    }

    /// Reads the `.p8` file App Store Connect gave for the In-App Purchase key (PKCS#8 PEM,
    /// `-----BEGIN PRIVATE KEY-----`; a SEC1 `EC PRIVATE KEY` PEM is accepted too).
    /// - Throws: `AppStoreServerAPIConfigurationError` naming the file (never quoting its content).
    public static func loadSigningKey(
        fromFile path: String
    ) throws(AppStoreServerAPIConfigurationError)
        -> P256.Signing.PrivateKey
    {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            let reason: String
            switch (error as? CocoaError)?.code {
            case .fileReadNoSuchFile?: reason = "no such file"
            case .fileReadNoPermission?: reason = "permission denied"
            default: reason = (error as NSError).localizedDescription
            }
            throw AppStoreServerAPIConfigurationError(
                "cannot read the App Store Server API key file \(path): \(reason)"
            )
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw AppStoreServerAPIConfigurationError("the App Store Server API key file \(path) is not PEM text")
        }
        return try signingKey(pem: text, source: "the App Store Server API key file \(path)")
    }

    /// Parses a PEM private key (PKCS#8 as in a `.p8` file, or SEC1).
    /// - Parameter source: names the key in errors, e.g. an environment variable.
    /// - Throws: `AppStoreServerAPIConfigurationError` naming `source` (never quoting the key).
    public static func signingKey(
        pem: String,
        source: String = "the PEM key"
    ) throws(AppStoreServerAPIConfigurationError)
        -> P256.Signing.PrivateKey
    {
        guard pem.contains("-----BEGIN PRIVATE KEY-----") || pem.contains("-----BEGIN EC PRIVATE KEY-----") else {
            throw AppStoreServerAPIConfigurationError(
                "\(source) is not a PEM private key (expected -----BEGIN PRIVATE KEY-----, as in a .p8 file)"
            )
        }
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: pem.trimmingCharacters(in: .whitespacesAndNewlines))
        } catch {
            throw AppStoreServerAPIConfigurationError(
                "\(source) is not a P-256 (ES256) private key in PKCS#8 or SEC1 PEM form"
            )
        }
    }

    private static func requireToken(_ value: String, _ name: String) throws(AppStoreServerAPIConfigurationError) {
        guard !value.isEmpty else { throw AppStoreServerAPIConfigurationError("\(name) is empty") }
        guard value.count <= 200,
            value.unicodeScalars.allSatisfy({
                $0.isASCII && $0.value > 0x20 && $0.value < 0x7F && $0 != "\"" && $0 != "\\"
            })
        else {
            throw AppStoreServerAPIConfigurationError(
                "\(name) \(value.debugDescription) must be printable ASCII without spaces or quotes"
            )
        }
    }

    public var description: String {
        "AppStoreServerAPIConfiguration(baseURL: \(baseURL.redactedForMessages), keyID: \(keyID), issuerID: \(issuerID), "
            + "bundleID: \(bundleID), signingKey: <redacted>, requestTimeout: \(requestTimeout), "
            + "retryPolicy: \(retryPolicy))"
    }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "baseURL": baseURL, "keyID": keyID, "issuerID": issuerID, "bundleID": bundleID,
                "signingKey": "<redacted>", "requestTimeout": requestTimeout, "retryPolicy": retryPolicy,
            ]
        )
    }
}

/// An App Store Server API setting is invalid; the message names it (and never quotes a key).
public struct AppStoreServerAPIConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { "App Store Server API configuration: \(message)" }
}
