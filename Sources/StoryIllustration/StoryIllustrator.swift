import AstroDomain
import Foundation
import Stories

/// What one page's illustration is made from: the story, the page, and the page before's image.
public struct IllustrationRequest: Sendable, Hashable {
    public var storyID: UUID
    public var title: String
    /// A key of the story knowledge base (`courage`, `friendship`, …).
    public var theme: String
    public var ageGroup: StoryAgeGroup
    public var language: ReportLanguage
    public var mainCharacter: String
    public var childName: String
    /// 1-based.
    public var pageNumber: Int
    public var pageCount: Int
    public var pageText: String
    /// The image of the latest illustrated page before this one, passed to the model for a consistent look.
    public var previousImage: StoryImage?

    public init(
        storyID: UUID,
        title: String,
        theme: String,
        ageGroup: StoryAgeGroup,
        language: ReportLanguage,
        mainCharacter: String,
        childName: String,
        pageNumber: Int,
        pageCount: Int,
        pageText: String,
        previousImage: StoryImage? = nil
    ) {
        self.storyID = storyID
        self.title = title
        self.theme = theme
        self.ageGroup = ageGroup
        self.language = language
        self.mainCharacter = mainCharacter
        self.childName = childName
        self.pageNumber = pageNumber
        self.pageCount = pageCount
        self.pageText = pageText
        self.previousImage = previousImage
    }
}

/// An illustration's bytes and how it is stored and served.
public struct StoryImage: Sendable, Hashable {
    public var data: Data
    /// `svg` or `png`: the stored file's extension.
    public var fileExtension: String
    /// `image/svg+xml` or `image/png`.
    public var mediaType: String

    public init(data: Data, fileExtension: String, mediaType: String) {
        self.data = data
        self.fileExtension = fileExtension
        self.mediaType = mediaType
    }

    /// The eight bytes every PNG file starts with.
    public static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// Whether `data` starts with the PNG signature.
    public static func isPNG(_ data: Data) -> Bool { data.starts(with: pngSignature) }
}

/// Why a page was not illustrated: a stable `code`, what happened, and whether illustrating the
/// page again later may succeed.
///
/// Codes: `image-unauthorized`, `image-bad-request`, `image-content-policy`, `rate-limited`,
/// `server-error`, `timeout`, `network`, `cancelled`, `image-invalid-answer`, `unknown-theme`,
/// `image-prompt-missing`. `message` never holds an API key.
public struct IllustrationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: String
    public var message: String
    /// Whether a later retry of the page may succeed (rate limits, server errors, timeouts).
    public var isTransient: Bool

    public init(code: ErrorCode, message: String, isTransient: Bool) {
        self.code = code.rawValue
        self.message = message
        self.isTransient = isTransient
    }

    public var description: String { "\(code): \(message)" }
}

/// Makes one page's illustration.
public protocol StoryIllustrator: Sendable {
    /// "built-in" or "images:<model>"; stored with each page.
    var name: String { get }

    /// Illustrates the page `request` describes.
    /// - Returns: the image to store for the page.
    /// - Throws: `IllustrationError`; `isTransient` says whether to try the page again later.
    func illustrate(_ request: IllustrationRequest) async throws(IllustrationError) -> StoryImage

    /// Whether each picture is a paid call (metered and bounded by the worker).
    var isPaid: Bool { get }
}

extension StoryIllustrator {
    public var isPaid: Bool { false }
}

extension IllustrationError {
    /// Whether the API answered (and so charged for) the call that failed this way: an answer
    /// that is not a picture was still drawn and billed.
    public var wasAnswered: Bool { code == ErrorCode.imageInvalidAnswer.rawValue }
}
