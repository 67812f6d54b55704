import Foundation
import HTTPTransport
import RetryBackoff

/// Where the client calls an OpenAI-compatible chat-completions API, with which model and key, and
/// how patiently.
///
/// Validated when made. The API key never appears in `description`, `debugDescription` or a dump;
/// it leaves the process only in the `Authorization` header.
public struct LLMConfiguration: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// How a call is retried: on 408, 409, 429, 5xx, timeouts and connection failures only, with
    /// capped exponential backoff and full jitter, honouring `Retry-After`, within a total deadline.
    public struct RetryPolicy: Sendable, Hashable, CustomStringConvertible {
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
            baseDelay: Duration = .seconds(1),
            maxDelay: Duration = .seconds(20),
            deadline: Duration = .seconds(120)
        ) {
            self.maxAttempts = maxAttempts
            self.baseDelay = baseDelay
            self.maxDelay = maxDelay
            self.deadline = deadline
        }

        /// One attempt, no retries.
        public static let none = RetryPolicy(maxAttempts: 1)

        public var description: String {
            "RetryPolicy(maxAttempts: \(maxAttempts), baseDelay: \(baseDelay), maxDelay: \(maxDelay), "
                + "deadline: \(deadline))"
        }

        func validate() throws(LLMConfigurationError) {
            try Self.checkMaxAttempts(maxAttempts, name: "retry maxAttempts")
            guard baseDelay > .zero, baseDelay <= maxDelay else {
                throw LLMConfigurationError(
                    "retry baseDelay must be above zero and at most maxDelay (\(baseDelay) vs \(maxDelay))"
                )
            }
            try Self.checkDeadline(deadline, name: "retry deadline")
        }

        /// The policy with every value forced into a usable range (the fields are mutable, so the
        /// client never trusts them blindly).
        var normalized: RetryPolicy {
            let base = max(baseDelay, .zero)
            return RetryPolicy(
                maxAttempts: maxAttempts.clamped(to: 1...100),
                baseDelay: base,
                maxDelay: max(maxDelay, base),
                deadline: max(deadline, .milliseconds(1))
            )
        }

        static func checkMaxAttempts(_ value: Int, name: String) throws(LLMConfigurationError) {
            guard (1...20).contains(value) else { throw LLMConfigurationError("\(name) must be 1...20, not \(value)") }
        }

        static func checkDeadline(_ value: Duration, name: String) throws(LLMConfigurationError) {
            guard value > .zero, value <= .seconds(3_600) else {
                throw LLMConfigurationError("\(name) must be above zero and at most 3600 s, not \(value)")
            }
        }
    }

    /// The API's root, e.g. `https://api.openai.com/v1` (no trailing slash); requests go to
    /// `{baseURL}/chat/completions`. Plain `http` only on a loopback host (local fakes and servers).
    public let baseURL: URL
    /// The model every request names, e.g. `gpt-4o-mini`.
    public let model: String
    /// One request's timeout (each attempt; the deadline may cut the last one short).
    public var requestTimeout: Duration
    public var retryPolicy: RetryPolicy
    private let apiKey: String

    /// - Parameters:
    ///   - baseURL: the API's root, e.g. `https://api.openai.com/v1`.
    ///   - model: the model to ask.
    ///   - apiKey: the bearer key (printable ASCII, no spaces).
    ///   - requestTimeout: per attempt, 60 s by default.
    ///   - retryPolicy: 4 attempts, 1 s base delay, 20 s cap, 120 s deadline by default.
    /// - Throws: `LLMConfigurationError` naming the first invalid field (never quoting the key).
    public init(
        baseURL: URL,
        model: String,
        apiKey: String,
        requestTimeout: Duration = .seconds(60),
        retryPolicy: RetryPolicy = RetryPolicy()
    ) throws(LLMConfigurationError) {
        self.baseURL = try Self.checkFields(
            baseURL: baseURL,
            model: model,
            apiKey: apiKey,
            requestTimeout: requestTimeout,
            retryPolicy: retryPolicy,
            keyVariable: "LLM_API_KEY"
        )
        self.model = model
        self.apiKey = apiKey
        self.requestTimeout = requestTimeout
        self.retryPolicy = retryPolicy
    }

    /// `Bearer <key>`, the `Authorization` header's value.
    var authorization: String { "Bearer \(apiKey)" }

    /// `text` with the key, and any word that looks like it (one sharing its first characters, or
    /// a masked key such as `sk-ab***yz`), replaced by `<redacted>`: the API may echo a rejected key.
    func redactingKey(_ text: String) -> String { Self.redacting(apiKey, in: text) }

    /// `text` with `apiKey` and anything resembling it replaced by `<redacted>` (see `redactingKey`).
    static func redacting(_ apiKey: String, in text: String) -> String {
        var text = text.replacingOccurrences(of: apiKey, with: "<redacted>")
        let prefix = String(apiKey.prefix(min(8, apiKey.count / 2)))
        let words = text.split(separator: " ", omittingEmptySubsequences: false).map { word -> String in
            let telling = (prefix.count >= 4 && word.contains(prefix)) || word.contains("***")
            guard telling else { return String(word) }
            let trailing = word.reversed().prefix { ".,;:!?)\"'".contains($0) }
            return "<redacted>" + String(trailing.reversed())
        }
        text = words.joined(separator: " ")
        return text
    }

    /// Reads the configuration from environment variables.
    ///
    /// | variable | meaning |
    /// |---|---|
    /// | `LLM_BASE_URL` | the API's root, e.g. `https://api.openai.com/v1`; unset or empty: no LLM (`nil`) |
    /// | `LLM_MODEL` | required with `LLM_BASE_URL` |
    /// | `LLM_API_KEY` or `LLM_API_KEY_FILE` | the key, or a file holding it (trimmed); exactly one is required |
    /// | `LLM_TIMEOUT_SECONDS` | one request's timeout, default 60 |
    /// | `LLM_MAX_ATTEMPTS` | requests per call at most, default 4 |
    /// | `LLM_DEADLINE_SECONDS` | a call's total deadline, retries included, default 120 |
    ///
    /// Values are trimmed; an empty value counts as unset.
    /// - Returns: `nil` when `LLM_BASE_URL` is unset or empty.
    /// - Throws: `LLMConfigurationError` naming the variable at fault (never quoting the key).
    public static func fromEnvironment(
        _ environment: [String: String]
    ) throws(LLMConfigurationError) -> LLMConfiguration? {
        guard
            let settings = try APIEnvironment.read(
                environment,
                prefix: "LLM",
                requestTimeout: .seconds(60),
                retryPolicy: RetryPolicy()
            )
        else { return nil }
        return try LLMConfiguration(
            baseURL: settings.baseURL,
            model: settings.model,
            apiKey: settings.apiKey,
            requestTimeout: settings.requestTimeout,
            retryPolicy: settings.retryPolicy
        )
    }

    // MARK: - Checks (each names the field or variable it checks)

    /// Checks the fields every OpenAI-compatible client configuration has (chat and images).
    /// - Returns: the base URL without trailing slashes.
    /// - Throws: `LLMConfigurationError` naming the first invalid field.
    static func checkFields(
        baseURL: URL,
        model: String,
        apiKey: String,
        requestTimeout: Duration,
        retryPolicy: RetryPolicy,
        keyVariable: String
    ) throws(LLMConfigurationError) -> URL {
        let url = try checkBaseURL(baseURL, name: "baseURL", keyVariable: keyVariable)
        try checkModel(model, name: "model")
        try checkAPIKey(apiKey, name: "apiKey")
        try checkTimeout(requestTimeout, name: "requestTimeout")
        try retryPolicy.validate()
        return url
    }

    /// The URL without trailing slashes, when it is an acceptable API root.
    /// - Parameter keyVariable: where the key belongs instead, for the message.
    static func checkBaseURL(_ url: URL, name: String, keyVariable: String) throws(LLMConfigurationError) -> URL {
        guard url.user == nil, url.password == nil else {
            // Not quoted: the credentials would end up in logs.
            throw LLMConfigurationError("\(name) must not carry credentials (the key goes in \(keyVariable))")
        }
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            throw LLMConfigurationError("\(name) \(url.redactedForMessages) is not an absolute http(s) URL")
        }
        let loopbackHosts: Set<String> = ["127.0.0.1", "localhost", "::1", "[::1]"]
        guard scheme == "https" || (scheme == "http" && loopbackHosts.contains(host.lowercased())) else {
            throw LLMConfigurationError(
                "\(name) \(url.redactedForMessages) must be https (plain http only on a loopback host)"
            )
        }
        guard url.query == nil, url.fragment == nil else {
            // Not quoted: a query often carries a key (?api-key=…).
            throw LLMConfigurationError("\(name) \(url.redactedForMessages) must not have a query or fragment")
        }
        var text = url.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        return URL(string: text) ?? url
    }

    static func checkModel(_ model: String, name: String) throws(LLMConfigurationError) {
        guard !model.isEmpty else { throw LLMConfigurationError("\(name) is empty") }
        guard model.count <= 256,
            model.unicodeScalars.allSatisfy({ !CharacterSet.controlCharacters.contains($0) }),
            model.trimmingCharacters(in: .whitespaces) == model
        else {
            throw LLMConfigurationError(
                "\(name) must be at most 256 characters, without control characters or surrounding spaces"
            )
        }
    }

    static func checkAPIKey(_ key: String, name: String) throws(LLMConfigurationError) {
        guard !key.isEmpty else { throw LLMConfigurationError("\(name) is empty") }
        guard key.utf8.count <= 4_096, key.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw LLMConfigurationError(
                "\(name) must be printable ASCII without spaces (it goes in an HTTP header); the key is not shown"
            )
        }
    }

    static func checkTimeout(_ value: Duration, name: String) throws(LLMConfigurationError) {
        guard value > .zero, value <= .seconds(600) else {
            throw LLMConfigurationError("\(name) must be above zero and at most 600 s, not \(value)")
        }
    }

    /// A positive number of seconds (fractions allowed, to the millisecond).
    static func seconds(_ text: String, name: String) throws(LLMConfigurationError) -> Duration {
        guard let value = Double(text), value.isFinite, value > 0, value <= 1e6 else {
            throw LLMConfigurationError("\(name) must be a number of seconds above zero, not \(text.debugDescription)")
        }
        return .milliseconds(Int64(max(1, (value * 1_000).rounded())))
    }

    /// The file's content, trimmed, when it is a usable key.
    static func readKeyFile(_ path: String, name: String) throws(LLMConfigurationError) -> String {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            let reason: String
            switch (error as? CocoaError)?.code {
            case .fileReadNoSuchFile?: reason = "no such file"
            case .fileReadNoPermission?: reason = "permission denied"
            default: reason = "cannot read it"
            }
            throw LLMConfigurationError("\(name) \(path): \(reason)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw LLMConfigurationError("\(name) \(path) is not UTF-8 text")
        }
        let key = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !key.isEmpty else { throw LLMConfigurationError("\(name) \(path) is empty") }
        try checkAPIKey(key, name: "the key in \(name) \(path)")
        return key
    }

    // MARK: - Descriptions without the key

    public var description: String {
        "LLMConfiguration(baseURL: \(baseURL.absoluteString), model: \(model), apiKey: <redacted>, "
            + "requestTimeout: \(requestTimeout), retryPolicy: \(retryPolicy))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "baseURL": baseURL, "model": model, "apiKey": "<redacted>", "requestTimeout": requestTimeout,
                "retryPolicy": retryPolicy,
            ]
        )
    }
}

/// An LLM setting is invalid; the message names the field or environment variable (and never
/// quotes a key).
public struct LLMConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { "LLM configuration: \(message)" }
}

/// The settings every OpenAI-compatible client reads from `<PREFIX>_…` variables (`LLM_…` for
/// chat, `IMAGE_…` for images), read and checked one way for both.
struct APIEnvironment {
    var baseURL: URL
    var model: String
    var apiKey: String
    var requestTimeout: Duration
    var retryPolicy: LLMConfiguration.RetryPolicy

    /// The value of `name`, trimmed; nil when unset or empty.
    static func value(_ name: String, in environment: [String: String]) -> String? {
        guard let text = environment[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty
        else { return nil }
        return text
    }

    /// Reads `<prefix>_BASE_URL`, `_MODEL`, `_API_KEY` or `_API_KEY_FILE`, `_TIMEOUT_SECONDS`,
    /// `_MAX_ATTEMPTS` and `_DEADLINE_SECONDS`.
    /// - Parameters:
    ///   - requestTimeout: the timeout when `_TIMEOUT_SECONDS` is unset.
    ///   - retryPolicy: the policy whose attempts and deadline the variables may change.
    /// - Returns: nil when `<prefix>_BASE_URL` is unset or empty.
    /// - Throws: `LLMConfigurationError` naming the variable at fault (never quoting the key).
    static func read(
        _ environment: [String: String],
        prefix: String,
        requestTimeout defaultTimeout: Duration,
        retryPolicy defaultPolicy: LLMConfiguration.RetryPolicy
    ) throws(LLMConfigurationError) -> APIEnvironment? {
        typealias Checks = LLMConfiguration
        func value(_ suffix: String) -> String? { Self.value("\(prefix)_\(suffix)", in: environment) }
        let baseVariable = "\(prefix)_BASE_URL"
        let keyVariable = "\(prefix)_API_KEY"
        let keyFileVariable = "\(prefix)_API_KEY_FILE"
        guard let baseText = value("BASE_URL") else { return nil }
        guard let url = URL(string: baseText) else {
            throw LLMConfigurationError("\(baseVariable) is not a URL (expected e.g. https://api.openai.com/v1)")
        }
        let baseURL = try Checks.checkBaseURL(url, name: baseVariable, keyVariable: keyVariable)
        guard let model = value("MODEL") else {
            throw LLMConfigurationError("\(prefix)_MODEL is required when \(baseVariable) is set")
        }
        try Checks.checkModel(model, name: "\(prefix)_MODEL")

        let apiKey: String
        switch (value("API_KEY"), value("API_KEY_FILE")) {
        case (nil, nil):
            throw LLMConfigurationError("\(keyVariable) or \(keyFileVariable) is required when \(baseVariable) is set")
        case (.some, .some):
            throw LLMConfigurationError("set \(keyVariable) or \(keyFileVariable), not both")
        case (let key?, nil):
            try Checks.checkAPIKey(key, name: keyVariable)
            apiKey = key
        case (nil, let path?):
            apiKey = try Checks.readKeyFile(path, name: keyFileVariable)
        }

        var requestTimeout = defaultTimeout
        if let text = value("TIMEOUT_SECONDS") {
            requestTimeout = try Checks.seconds(text, name: "\(prefix)_TIMEOUT_SECONDS")
            try Checks.checkTimeout(requestTimeout, name: "\(prefix)_TIMEOUT_SECONDS")
        }
        var retryPolicy = defaultPolicy
        if let text = value("MAX_ATTEMPTS") {
            let name = "\(prefix)_MAX_ATTEMPTS"
            guard let attempts = Int(text) else {
                throw LLMConfigurationError("\(name) must be a whole number 1...20, not \(text.debugDescription)")
            }
            try LLMConfiguration.RetryPolicy.checkMaxAttempts(attempts, name: name)
            retryPolicy.maxAttempts = attempts
        }
        if let text = value("DEADLINE_SECONDS") {
            retryPolicy.deadline = try Checks.seconds(text, name: "\(prefix)_DEADLINE_SECONDS")
            try LLMConfiguration.RetryPolicy.checkDeadline(retryPolicy.deadline, name: "\(prefix)_DEADLINE_SECONDS")
        }
        return APIEnvironment(
            baseURL: baseURL,
            model: model,
            apiKey: apiKey,
            requestTimeout: requestTimeout,
            retryPolicy: retryPolicy
        )
    }
}
