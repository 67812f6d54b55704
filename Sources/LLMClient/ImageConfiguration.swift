import Foundation
import HTTPTransport

/// Where `ImageClient` calls an OpenAI-compatible images API, with which model, key and size, and
/// how patiently.
///
/// Validated when made, by the same rules as `LLMConfiguration`. The API key never appears in
/// `description`, `debugDescription` or a dump; it leaves the process only in the `Authorization`
/// header.
public struct ImageConfiguration: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public typealias RetryPolicy = LLMConfiguration.RetryPolicy

    /// Images take longer than completions and cost more each: fewer attempts, a longer deadline.
    public static let defaultRetryPolicy = RetryPolicy(
        maxAttempts: 3,
        baseDelay: .seconds(1),
        maxDelay: .seconds(20),
        deadline: .seconds(300)
    )

    /// The API's root, e.g. `https://api.openai.com/v1` (no trailing slash); requests go to
    /// `{baseURL}/images/generations` and `{baseURL}/images/edits`.
    public let baseURL: URL
    /// The model every request names, e.g. `gpt-image-1`.
    public let model: String
    /// The image size asked for, `<width>x<height>` in pixels, e.g. `1024x1024`.
    public let size: String
    /// One request's timeout (each attempt; the deadline may cut the last one short).
    public var requestTimeout: Duration
    public var retryPolicy: RetryPolicy
    private let apiKey: String

    /// - Parameters:
    ///   - baseURL: the API's root, e.g. `https://api.openai.com/v1`.
    ///   - model: the model to ask.
    ///   - apiKey: the bearer key (printable ASCII, no spaces).
    ///   - size: `<width>x<height>`, each 64…4096 pixels; `1024x1024` by default.
    ///   - requestTimeout: per attempt, 120 s by default.
    ///   - retryPolicy: 3 attempts, 1 s base delay, 20 s cap, 300 s deadline by default.
    /// - Throws: `LLMConfigurationError` naming the first invalid field (never quoting the key).
    public init(
        baseURL: URL,
        model: String,
        apiKey: String,
        size: String = "1024x1024",
        requestTimeout: Duration = .seconds(120),
        retryPolicy: RetryPolicy = ImageConfiguration.defaultRetryPolicy
    ) throws(LLMConfigurationError) {
        self.baseURL = try LLMConfiguration.checkFields(
            baseURL: baseURL,
            model: model,
            apiKey: apiKey,
            requestTimeout: requestTimeout,
            retryPolicy: retryPolicy,
            keyVariable: "IMAGE_API_KEY"
        )
        try Self.checkSize(size, name: "size")
        self.model = model
        self.apiKey = apiKey
        self.size = size
        self.requestTimeout = requestTimeout
        self.retryPolicy = retryPolicy
    }

    /// `Bearer <key>`, the `Authorization` header's value.
    var authorization: String { "Bearer \(apiKey)" }

    /// `text` with the key (and anything resembling it) replaced by `<redacted>`.
    func redactingKey(_ text: String) -> String { LLMConfiguration.redacting(apiKey, in: text) }

    /// Reads the configuration from environment variables.
    ///
    /// | variable | meaning |
    /// |---|---|
    /// | `IMAGE_BASE_URL` | the API's root, e.g. `https://api.openai.com/v1`; unset or empty: no images API (`nil`) |
    /// | `IMAGE_MODEL` | required with `IMAGE_BASE_URL`, e.g. `gpt-image-1` |
    /// | `IMAGE_API_KEY` or `IMAGE_API_KEY_FILE` | the key, or a file holding it (trimmed); exactly one is required |
    /// | `IMAGE_SIZE` | `<width>x<height>`, default `1024x1024` |
    /// | `IMAGE_TIMEOUT_SECONDS` | one request's timeout, default 120 |
    /// | `IMAGE_MAX_ATTEMPTS` | requests per image at most, default 3 |
    /// | `IMAGE_DEADLINE_SECONDS` | an image's total deadline, retries included, default 300 |
    ///
    /// Values are trimmed; an empty value counts as unset.
    /// - Returns: `nil` when `IMAGE_BASE_URL` is unset or empty.
    /// - Throws: `LLMConfigurationError` naming the variable at fault (never quoting the key).
    public static func fromEnvironment(
        _ environment: [String: String]
    ) throws(LLMConfigurationError) -> ImageConfiguration? {
        guard
            let settings = try APIEnvironment.read(
                environment,
                prefix: "IMAGE",
                requestTimeout: .seconds(120),
                retryPolicy: defaultRetryPolicy
            )
        else { return nil }
        let size = APIEnvironment.value("IMAGE_SIZE", in: environment) ?? "1024x1024"
        try checkSize(size, name: "IMAGE_SIZE")
        return try ImageConfiguration(
            baseURL: settings.baseURL,
            model: settings.model,
            apiKey: settings.apiKey,
            size: size,
            requestTimeout: settings.requestTimeout,
            retryPolicy: settings.retryPolicy
        )
    }

    /// Pixels a side may have: what OpenAI-compatible image APIs take, at the outside.
    static let sideRange = 64...4_096

    /// `<width>x<height>` in pixels, each side within `sideRange`.
    static func checkSize(_ size: String, name: String) throws(LLMConfigurationError) {
        let sides = size.split(separator: "x", omittingEmptySubsequences: false)
        let valid =
            sides.count == 2
            && sides.allSatisfy { side in
                side.count <= 4 && side.allSatisfy { $0.isASCII && $0.isNumber }
                    && Int(side).map(sideRange.contains) == true
            }
        guard valid else {
            throw LLMConfigurationError(
                "\(name) must be <width>x<height> in pixels (each \(sideRange.lowerBound)…\(sideRange.upperBound)), "
                    + "e.g. 1024x1024, not \(size.debugDescription)"
            )
        }
    }

    // MARK: - Descriptions without the key

    public var description: String {
        "ImageConfiguration(baseURL: \(baseURL.absoluteString), model: \(model), size: \(size), apiKey: <redacted>, "
            + "requestTimeout: \(requestTimeout), retryPolicy: \(retryPolicy))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "baseURL": baseURL, "model": model, "size": size, "apiKey": "<redacted>",
                "requestTimeout": requestTimeout, "retryPolicy": retryPolicy,
            ]
        )
    }
}
