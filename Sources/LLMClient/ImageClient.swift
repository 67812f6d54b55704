import Foundation
import HTTPTransport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An image an images API made.
public struct ImageResult: Sendable, Hashable {
    /// The image's bytes, decoded from `data[0].b64_json` (the caller checks the format).
    public var image: Data
    /// `data[0].revised_prompt`, when the API rewrote the prompt (DALL·E 3 does).
    public var revisedPrompt: String?
    /// Requests sent for this image (1 unless earlier attempts failed and were retried).
    public var attempts: Int

    public init(image: Data, revisedPrompt: String?, attempts: Int) {
        self.image = image
        self.revisedPrompt = revisedPrompt
        self.attempts = attempts
    }
}

/// Calls an OpenAI-compatible images API: `POST {baseURL}/images/generations` (JSON) and
/// `POST {baseURL}/images/edits` (multipart/form-data with a reference image), asking for one
/// image as `b64_json`.
///
/// Retries exactly as `LLMClient` does (the same loop): 408, 409, 429, 5xx, timeouts and connection
/// failures with capped exponential backoff and full jitter, honouring `Retry-After`, within the
/// configuration's attempts and total deadline; 400, 401, 403, 404, 422 are answered at once. A
/// refused prompt (`content_policy_violation`) is a `bad-request` with that `errorCode`.
///
/// - Important: the key is never logged or put in an error; an API message that echoes it is
///   scrubbed.
public final class ImageClient: Sendable {
    public typealias Timing = LLMClient.Timing

    public let configuration: ImageConfiguration
    private let sender: RetryingSender
    private let generationsURL: URL
    private let editsURL: URL

    /// - Parameters:
    ///   - configuration: where, which model and size, which key, and how patiently.
    ///   - timing: the real clock and sleep unless a test injects its own.
    public init(configuration: ImageConfiguration, timing: Timing = .system) {
        self.configuration = configuration
        self.sender = RetryingSender(configuration: configuration, timing: timing)
        let images = configuration.baseURL.appendingPathComponent("images")
        self.generationsURL = images.appendingPathComponent("generations")
        self.editsURL = images.appendingPathComponent("edits")
    }

    deinit { sender.transport.invalidate() }

    /// Asks for one new image (`POST {baseURL}/images/generations`).
    /// - Parameter prompt: what to draw.
    /// - Returns: the image's bytes, the revised prompt if any, and the attempts made.
    /// - Throws: `LLMError`; an empty prompt is refused without asking (`bad-request`, 0 attempts).
    public func generate(prompt: String) async throws(LLMError) -> ImageResult {
        try Self.checkPrompt(prompt)
        let body: Data
        do {
            body = try Self.encoder.encode(
                GenerationBody(model: configuration.model, prompt: prompt, size: configuration.size)
            )
        } catch {
            throw LLMError(kind: .badRequest, reason: "cannot encode the request as JSON", attempts: 0)
        }
        let (answer, attempts) = try await sender.post(body, to: generationsURL, contentType: "application/json")
        return try Self.parseImage(answer, attempts: attempts, redact: configuration.redactingKey)
    }

    /// Asks for one image made from a reference image (`POST {baseURL}/images/edits`): how OpenAI's
    /// API takes an earlier picture to keep characters and style consistent.
    /// - Parameters:
    ///   - prompt: what to draw.
    ///   - image: the reference image's bytes (PNG for most models).
    ///   - imageMediaType: its media type, e.g. `image/png`; names the uploaded file's extension.
    /// - Returns: the image's bytes, the revised prompt if any, and the attempts made.
    /// - Throws: `LLMError`; an empty prompt or image is refused without asking (`bad-request`,
    ///   0 attempts).
    public func edit(prompt: String, image: Data, imageMediaType: String) async throws(LLMError) -> ImageResult {
        try Self.checkPrompt(prompt)
        guard !image.isEmpty else {
            throw LLMError(kind: .badRequest, reason: "an image edit needs a reference image", attempts: 0)
        }
        // Random, so it cannot occur in the image by design; 36 characters, within RFC 2046's 70.
        let boundary = "astrosvitla-\(UUID().uuidString)"
        let body = Self.multipartBody(
            fields: [
                ("model", configuration.model), ("prompt", prompt), ("n", "1"), ("size", configuration.size),
                ("response_format", "b64_json"),
            ],
            file: MultipartFile(
                field: "image",
                filename: "reference.\(Self.fileExtension(imageMediaType))",
                mediaType: imageMediaType,
                data: image
            ),
            boundary: boundary
        )
        let (answer, attempts) = try await sender.post(
            body,
            to: editsURL,
            contentType: "multipart/form-data; boundary=\(boundary)"
        )
        return try Self.parseImage(answer, attempts: attempts, redact: configuration.redactingKey)
    }

    // MARK: - Requests

    private struct GenerationBody: Encodable {
        var model: String
        var prompt: String
        var n = 1
        var size: String
        var responseFormat = "b64_json"

        enum CodingKeys: String, CodingKey {
            case model
            case prompt
            case n
            case size
            case responseFormat = "response_format"
        }
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    private static func checkPrompt(_ prompt: String) throws(LLMError) {
        guard !prompt.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw LLMError(kind: .badRequest, reason: "an image needs a prompt", attempts: 0)
        }
    }

    /// The file part of a multipart body.
    struct MultipartFile {
        var field: String
        var filename: String
        var mediaType: String
        var data: Data
    }

    /// A `multipart/form-data` body (RFC 7578): the text fields, then the file.
    static func multipartBody(fields: [(String, String)], file: MultipartFile, boundary: String) -> Data {
        var body = Data()
        func append(_ text: String) { body.append(contentsOf: Array(text.utf8)) }
        for (name, value) in fields {
            append("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)\r\n")
        }
        append(
            "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(file.field)\"; filename=\"\(file.filename)\"\r\n"
                + "Content-Type: \(file.mediaType)\r\n\r\n"
        )
        body.append(file.data)
        append("\r\n--\(boundary)--\r\n")
        return body
    }

    /// The usual extension of an image media type (the API reads the format from the file name
    /// as well as the bytes).
    static func fileExtension(_ mediaType: String) -> String {
        switch mediaType.lowercased() {
        case "image/jpeg", "image/jpg": return "jpg"
        case "image/webp": return "webp"
        default: return "png"
        }
    }

    // MARK: - Answers

    private struct ResponseBody: Decodable {
        struct Item: Decodable {
            var b64JSON: String?
            var revisedPrompt: String?

            enum CodingKeys: String, CodingKey {
                case b64JSON = "b64_json"
                case revisedPrompt = "revised_prompt"
            }
        }

        var data: [Item]?
    }

    /// Reads a 2xx answer; anything but `data[0].b64_json` holding base64 is malformed.
    static func parseImage(_ body: Data, attempts: Int, redact: (String) -> String) throws(LLMError) -> ImageResult {
        func malformed(_ reason: String) -> LLMError {
            LLMError.malformedAnswer(body, reason: reason, attempts: attempts, redact: redact)
        }
        guard let decoded = try? JSONDecoder().decode(ResponseBody.self, from: body) else {
            throw malformed("the answer is not an images response in JSON (\(body.count) bytes)")
        }
        guard let item = decoded.data?.first else { throw malformed("the answer has no data[0]") }
        guard let encoded = item.b64JSON else {
            throw malformed("the answer's data[0] has no b64_json (was response_format ignored?)")
        }
        guard let image = Data(base64Encoded: encoded, options: .ignoreUnknownCharacters), !image.isEmpty else {
            throw malformed("the answer's data[0].b64_json is not base64 image data")
        }
        return ImageResult(image: image, revisedPrompt: item.revisedPrompt, attempts: attempts)
    }
}
