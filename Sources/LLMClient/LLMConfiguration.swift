import Foundation
import HTTPTransport

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
        self.baseURL = try Self.checkBaseURL(baseURL, name: "baseURL")
        try Self.checkModel(model, name: "model")
        try Self.checkAPIKey(apiKey, name: "apiKey")
        try Self.checkTimeout(requestTimeout, name: "requestTimeout")
        try retryPolicy.validate()
        self.model = model
        self.apiKey = apiKey
        self.requestTimeout = requestTimeout
        self.retryPolicy = retryPolicy
    }

    /// `Bearer <key>`, the `Authorization` header's value.
    var authorization: String { "Bearer \(apiKey)" }

    /// `text` with the key, and any word that looks like it (one sharing its first characters, or
    /// a masked key such as `sk-ab***yz`), replaced by `<redacted>`: the API may echo a rejected key.
    func redactingKey(_ text: String) -> String {
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
        func value(_ name: String) -> String? {
            guard let text = environment[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty
            else { return nil }
            return text
        }
        guard let baseText = value("LLM_BASE_URL") else { return nil }
        guard let url = URL(string: baseText) else {
            throw LLMConfigurationError("LLM_BASE_URL is not a URL (expected e.g. https://api.openai.com/v1)")
        }
        let baseURL = try checkBaseURL(url, name: "LLM_BASE_URL")
        guard let model = value("LLM_MODEL") else {
            throw LLMConfigurationError("LLM_MODEL is required when LLM_BASE_URL is set")
        }
        try checkModel(model, name: "LLM_MODEL")

        let apiKey: String
        switch (value("LLM_API_KEY"), value("LLM_API_KEY_FILE")) {
        case (nil, nil):
            throw LLMConfigurationError("LLM_API_KEY or LLM_API_KEY_FILE is required when LLM_BASE_URL is set")
        case (.some, .some):
            throw LLMConfigurationError("set LLM_API_KEY or LLM_API_KEY_FILE, not both")
        case (let key?, nil):
            try checkAPIKey(key, name: "LLM_API_KEY")
            apiKey = key
        case (nil, let path?):
            apiKey = try readKeyFile(path, name: "LLM_API_KEY_FILE")
        }

        var requestTimeout = Duration.seconds(60)
        if let text = value("LLM_TIMEOUT_SECONDS") {
            requestTimeout = try seconds(text, name: "LLM_TIMEOUT_SECONDS")
            try checkTimeout(requestTimeout, name: "LLM_TIMEOUT_SECONDS")
        }
        var retryPolicy = RetryPolicy()
        if let text = value("LLM_MAX_ATTEMPTS") {
            guard let attempts = Int(text) else {
                throw LLMConfigurationError(
                    "LLM_MAX_ATTEMPTS must be a whole number 1...20, not \(text.debugDescription)"
                )
            }
            try RetryPolicy.checkMaxAttempts(attempts, name: "LLM_MAX_ATTEMPTS")
            retryPolicy.maxAttempts = attempts
        }
        if let text = value("LLM_DEADLINE_SECONDS") {
            retryPolicy.deadline = try seconds(text, name: "LLM_DEADLINE_SECONDS")
            try RetryPolicy.checkDeadline(retryPolicy.deadline, name: "LLM_DEADLINE_SECONDS")
        }
        return try LLMConfiguration(
            baseURL: baseURL,
            model: model,
            apiKey: apiKey,
            requestTimeout: requestTimeout,
            retryPolicy: retryPolicy
        )
    }

    // MARK: - Checks (each names the field or variable it checks)

    /// The URL without trailing slashes, when it is an acceptable API root.
    static func checkBaseURL(_ url: URL, name: String) throws(LLMConfigurationError) -> URL {
        guard url.user == nil, url.password == nil else {
            // Not quoted: the credentials would end up in logs.
            throw LLMConfigurationError("\(name) must not carry credentials (the key goes in LLM_API_KEY)")
        }
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            throw LLMConfigurationError("\(name) \(url.absoluteString) is not an absolute http(s) URL")
        }
        let loopbackHosts: Set<String> = ["127.0.0.1", "localhost", "::1", "[::1]"]
        guard scheme == "https" || (scheme == "http" && loopbackHosts.contains(host.lowercased())) else {
            throw LLMConfigurationError(
                "\(name) \(url.absoluteString) must be https (plain http only on a loopback host)"
            )
        }
        guard url.query == nil, url.fragment == nil else {
            throw LLMConfigurationError("\(name) \(url.absoluteString) must not have a query or fragment")
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
    private static func seconds(_ text: String, name: String) throws(LLMConfigurationError) -> Duration {
        guard let value = Double(text), value.isFinite, value > 0, value <= 1e6 else {
            throw LLMConfigurationError("\(name) must be a number of seconds above zero, not \(text.debugDescription)")
        }
        return .milliseconds(Int64(max(1, (value * 1_000).rounded())))
    }

    /// The file's content, trimmed, when it is a usable key.
    private static func readKeyFile(_ path: String, name: String) throws(LLMConfigurationError) -> String {
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
