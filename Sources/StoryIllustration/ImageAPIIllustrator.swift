import AstroDomain
import Foundation
import LLMClient
import Stories

/// Illustrates pages with an OpenAI-compatible images API, the prompt built from the shipped
/// template (`Resources/Illustration/image-prompt.json`).
///
/// A page without a previous image is drawn from the prompt (`images/generations`); a page after
/// an illustrated one sends that PNG as the reference (`images/edits`) so the characters and style
/// stay the same. A previous image that is not a PNG (a built-in SVG) cannot be sent, and a
/// built-in PNG is not the model's style to keep, so after either the page is drawn from the
/// prompt alone. The answer must be a PNG.
public struct ImageAPIIllustrator: StoryIllustrator {
    public let name: String
    private let client: ImageClient
    /// Every picture is billed by the images API.
    public var isPaid: Bool { true }

    /// - Parameter client: the configured images client (its model names the illustrator).
    public init(client: ImageClient) {
        self.client = client
        self.name = "images:\(client.configuration.model)"
    }

    /// The prompt template's version (`image-prompt-v1`), or nil when the shipped file is broken.
    public var promptVersion: String? { try? ImagePromptTemplate.shipped.get().version }

    /// The prompt sent for `request` (without the continuation line an edit adds).
    /// - Throws: `IllustrationError` `image-prompt-missing` when the shipped template is broken.
    public func prompt(for request: IllustrationRequest) throws(IllustrationError) -> String {
        try ImagePromptTemplate.shipped.get().prompt(for: request)
    }

    /// Asks the images API for the page's illustration.
    /// - Returns: a PNG stored as `png`.
    /// - Throws: `IllustrationError`: `image-unauthorized`, `image-bad-request`,
    ///   `image-content-policy` (not transient); `rate-limited`, `server-error`, `timeout`,
    ///   `network`, `cancelled` (transient, except a used-up quota); `image-invalid-answer` when
    ///   the answer is not a PNG.
    public func illustrate(_ request: IllustrationRequest) async throws(IllustrationError) -> StoryImage {
        let template = try ImagePromptTemplate.shipped.get()
        let prompt = template.prompt(for: request)
        let result: ImageResult
        do {
            // A picture of ours (the built-in fallback's) is no style for the model to continue.
            if let previous = request.previousImage, previous.mediaType == "image/png",
                StoryImage.isPNG(previous.data), !BuiltInIllustrator.drew(previous)
            {
                result = try await client.edit(
                    prompt: prompt + " " + template.continuation,
                    image: previous.data,
                    imageMediaType: "image/png"
                )
            } else {
                result = try await client.generate(prompt: prompt)
            }
        } catch {
            throw Self.illustrationError(error)
        }
        guard StoryImage.isPNG(result.image) else {
            throw IllustrationError(
                code: .imageInvalidAnswer,
                message: "the images API answered \(result.image.count) bytes that are not a PNG "
                    + "(\(result.attempts) attempt\(result.attempts == 1 ? "" : "s"))",
                isTransient: false
            )
        }
        return StoryImage(data: result.image, fileExtension: "png", mediaType: "image/png")
    }

    /// The client's error as the page's: the same transience, a code the worker stores.
    static func illustrationError(_ error: LLMError) -> IllustrationError {
        let code: ErrorCode
        switch error.kind {
        case .unauthorized: code = .image("unauthorized")
        case .badRequest:
            // OpenAI names a refused prompt `content_policy_violation` (DALL·E) or
            // `moderation_blocked` (gpt-image-1).
            let policyCodes: Set<String> = ["content_policy_violation", "moderation_blocked"]
            code = policyCodes.contains(error.errorCode ?? "") ? .image("content-policy") : .image("bad-request")
        case .rateLimited: code = .rateLimited
        case .serverError: code = .serverError
        case .timeout, .deadlineExceeded: code = .timeout
        case .network: code = .network
        case .cancelled: code = .cancelled
        case .malformedResponse: code = .imageInvalidAnswer
        }
        return IllustrationError(code: code, message: error.description, isTransient: error.isTransient)
    }
}

/// The images prompt as data: lines with slots, the line an edit adds, and the words for themes,
/// age groups and languages.
struct ImagePromptTemplate: Sendable {
    static let slots = [
        "title", "themeDescription", "ages", "mainCharacter", "page", "count", "languageName", "pageText",
    ]

    let version: String
    let prompt: SlotTemplate
    let continuation: String
    let maxPageTextCharacters: Int
    let themes: [String: String]
    let ageGroups: [String: String]
    let languages: [String: String]

    private struct File: Decodable {
        var version: String
        var lines: [String]
        var continuation: String
        var maxPageTextCharacters: Int
        var themes: [String: String]
        var ageGroups: [String: String]
        var languages: [String: String]
    }

    /// The shipped template, loaded once.
    static let shipped: Result<ImagePromptTemplate, IllustrationError> = {
        guard let folder = Bundle.module.url(forResource: "Illustration", withExtension: nil) else {
            return .failure(missing("the Illustration resource folder is missing from the StoryIllustration bundle"))
        }
        return load(folder.appendingPathComponent("image-prompt.json"))
    }()

    static func load(_ file: URL) -> Result<ImagePromptTemplate, IllustrationError> {
        do {
            let decoded = try JSONDecoder().decode(File.self, from: Data(contentsOf: file))
            guard decoded.maxPageTextCharacters >= 100 else {
                return .failure(missing("\(file.path): maxPageTextCharacters must be at least 100"))
            }
            return .success(
                ImagePromptTemplate(
                    version: decoded.version,
                    prompt: try SlotTemplate(decoded.lines.joined(separator: " "), runtime: slots),
                    continuation: decoded.continuation,
                    maxPageTextCharacters: decoded.maxPageTextCharacters,
                    themes: decoded.themes,
                    ageGroups: decoded.ageGroups,
                    languages: decoded.languages
                )
            )
        } catch let error as SlotTemplate.Invalid {
            return .failure(missing("\(file.path): \(error.message)"))
        } catch {
            return .failure(missing("\(file.path) is not an image prompt template: \(error)"))
        }
    }

    private static func missing(_ message: String) -> IllustrationError {
        IllustrationError(code: .imagePromptMissing, message: message, isTransient: false)
    }

    /// The prompt for `request`: the page text with its whitespace collapsed and cut at a word
    /// boundary to `maxPageTextCharacters` (prompts have a length limit: 1,000 characters for
    /// DALL·E 2).
    func prompt(for request: IllustrationRequest) -> String {
        let words = request.pageText.split(whereSeparator: \.isWhitespace)
        var text = ""
        for word in words {
            if text.count + word.count + 1 > maxPageTextCharacters {
                text += "…"
                break
            }
            text += text.isEmpty ? String(word) : " " + word
        }
        return prompt.render([
            request.title.trimmingCharacters(in: .whitespacesAndNewlines),
            themes[request.theme] ?? request.theme,
            ageGroups[String(request.ageGroup.rawValue)] ?? "3 to 10",
            request.mainCharacter.trimmingCharacters(in: .whitespacesAndNewlines),
            String(request.pageNumber),
            String(request.pageCount),
            languages[request.language.rawValue] ?? request.language.rawValue,
            text,
        ])
    }
}
