import AstroDomain
import Foundation
import LLMClient
import LLMFake
import Stories
import StoryIllustration
import Synchronization

#if canImport(FoundationXML)
import FoundationXML
#endif

/// A page request with sensible defaults.
func pageRequest(
    storyID: UUID = UUID(uuidString: "7A1C2E4B-0000-4000-8000-00000000C0DE")!,
    title: String = "Bunny Bo and the Dark Cave",
    theme: String = "courage",
    ageGroup: StoryAgeGroup = .preschool,
    language: ReportLanguage = .en,
    mainCharacter: String = "Bunny Bo",
    childName: String = "Mia",
    pageNumber: Int = 1,
    pageCount: Int = 5,
    pageText: String = "This is Bunny Bo. Bunny Bo lives in the old forest behind the hill.",
    previousImage: StoryImage? = nil
) -> IllustrationRequest {
    IllustrationRequest(
        storyID: storyID,
        title: title,
        theme: theme,
        ageGroup: ageGroup,
        language: language,
        mainCharacter: mainCharacter,
        childName: childName,
        pageNumber: pageNumber,
        pageCount: pageCount,
        pageText: pageText,
        previousImage: previousImage
    )
}

/// What XMLParser read from a document: whether it parsed, the root's attributes, every
/// element's text, and each element name's count.
struct ParsedSVG {
    var isValid: Bool
    var error: String?
    var rootName: String?
    var rootAttributes: [String: String] = [:]
    var texts: [String: [String]] = [:]
    var elementCounts: [String: Int] = [:]
    /// The `fill` attributes, in document order.
    var fills: [String] = []
}

func parseSVG(_ data: Data) -> ParsedSVG {
    let delegate = SVGCollector()
    let parser = XMLParser(data: data)
    parser.delegate = delegate
    let ok = parser.parse()
    var result = delegate.result
    result.isValid = ok
    result.error = parser.parserError.map { "\($0)" }
    return result
}

private final class SVGCollector: NSObject, XMLParserDelegate {
    var result = ParsedSVG(isValid: false)
    private var stack: [String] = []
    private var text = ""

    func parser(
        _ parser: XMLParser,
        didStartElement elementName: String,
        namespaceURI: String?,
        qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        if stack.isEmpty {
            result.rootName = elementName
            result.rootAttributes = attributes
        }
        result.elementCounts[elementName, default: 0] += 1
        if let fill = attributes["fill"] { result.fills.append(fill) }
        stack.append(elementName)
        text = ""
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    func parser(
        _ parser: XMLParser,
        didEndElement elementName: String,
        namespaceURI: String?,
        qualifiedName: String?
    ) {
        if !text.isEmpty { result.texts[elementName, default: []].append(text) }
        text = ""
        stack.removeLast()
    }
}

/// The images fake and clients configured for it.
struct ImagesFixture {
    static let apiKey = "sk-images-\(UUID().uuidString)"
    static let model = "gpt-image-test"

    let fake: OpenAIImagesFake

    init(defaultDelay: Duration = .zero) throws {
        fake = try OpenAIImagesFake(apiKey: Self.apiKey, defaultDelay: defaultDelay)
    }

    func client(
        apiKey: String = ImagesFixture.apiKey,
        requestTimeout: Duration = .seconds(30),
        retryPolicy: LLMConfiguration.RetryPolicy = .init(
            maxAttempts: 3,
            baseDelay: .milliseconds(10),
            maxDelay: .milliseconds(40),
            deadline: .seconds(60)
        ),
        timing: ImageClient.Timing = .system
    ) throws -> ImageClient {
        ImageClient(
            configuration: try ImageConfiguration(
                baseURL: fake.baseURL,
                model: Self.model,
                apiKey: apiKey,
                size: "512x512",
                requestTimeout: requestTimeout,
                retryPolicy: retryPolicy
            ),
            timing: timing
        )
    }
}

/// The error `body` threw, or nil when it succeeded.
func imageError(_ body: () async throws(LLMError) -> ImageResult) async -> LLMError? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}

/// Virtual time: `sleep` returns at once and records the delay.
final class RecordedSleeps: Sendable {
    private let recorded = Mutex<[Duration]>([])
    private let offset = Mutex<Duration>(.zero)

    var sleeps: [Duration] { recorded.withLock { $0 } }

    var timing: ImageClient.Timing {
        ImageClient.Timing(
            now: { ContinuousClock.now + self.offset.withLock { $0 } },
            sleep: { duration in
                self.recorded.withLock { $0.append(duration) }
                self.offset.withLock { $0 += duration }
            },
            random: { 0.5 }
        )
    }
}
