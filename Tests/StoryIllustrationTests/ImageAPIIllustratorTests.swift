import Foundation
import LLMClient
import LLMFake
import StoryIllustration
import Testing

@Suite("ImageAPIIllustrator against the images fake", .timeLimit(.minutes(1)))
struct ImageAPIIllustratorTests {
    @Test("page 1 is a generation from the templated prompt; the answer is stored as PNG")
    func firstPage() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        let illustrator = ImageAPIIllustrator(client: try fixture.client())
        #expect(illustrator.name == "images:\(ImagesFixture.model)")
        #expect(illustrator.promptVersion == "image-prompt-v1")
        let request = pageRequest(title: "Bo & the {pageText} Cave", ageGroup: .elementary)
        let image = try await illustrator.illustrate(request)
        #expect(image.fileExtension == "png")
        #expect(image.mediaType == "image/png")
        #expect(StoryImage.isPNG(image.data))
        #expect(fixture.fake.generationsCount == 1)
        let prompt = try #require(fixture.fake.lastPrompt)
        #expect(prompt == (try illustrator.prompt(for: request)))
        #expect(prompt.contains(request.pageText))
        #expect(prompt.contains("Bunny Bo"))
        #expect(prompt.contains("ages 6 to 8"))
        #expect(prompt.contains("page 1 of 5"))
        #expect(prompt.contains("courage: being brave"))
        // A slot name inside a value is left as written, not expanded.
        #expect(prompt.contains("\"Bo & the {pageText} Cave\""))
    }

    @Test("a page after an API PNG page is an edit carrying that PNG; after a built-in page it is a generation")
    func laterPages() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        let illustrator = ImageAPIIllustrator(client: try fixture.client())
        let first = try await illustrator.illustrate(pageRequest())
        let second = try await illustrator.illustrate(
            pageRequest(pageNumber: 2, pageText: "Here is a dark cave.", previousImage: first)
        )
        #expect(fixture.fake.editsCount == 1)
        #expect(fixture.fake.lastEditImage == first.data)
        #expect(fixture.fake.lastEditPrompt?.contains("Here is a dark cave.") == true)
        #expect(fixture.fake.lastEditPrompt?.contains("previous page") == true)
        #expect(second.data != first.data)

        // After a built-in page (the fallback's), SVG or PNG, the page is drawn from the prompt.
        for format in BuiltInIllustrator.Format.allCases {
            let builtIn = try BuiltInIllustrator(format: format).render(pageRequest())
            _ = try await illustrator.illustrate(pageRequest(pageNumber: 2, previousImage: builtIn))
        }
        #expect(fixture.fake.generationsCount == 3)
        #expect(fixture.fake.editsCount == 1)
    }

    @Test("a Ukrainian page is sent with its text and language named")
    func ukrainian() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        let text = "Попереду — тиха печера біля річки."
        _ = try await ImageAPIIllustrator(client: try fixture.client()).illustrate(
            pageRequest(language: .uk, mainCharacter: "Лисичка", pageText: text)
        )
        let prompt = try #require(fixture.fake.lastPrompt)
        #expect(prompt.contains(text))
        #expect(prompt.contains("Ukrainian"))
        #expect(prompt.contains("Лисичка"))
    }

    @Test("a long page text is cut at a word to the template's limit")
    func longText() throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        let illustrator = ImageAPIIllustrator(client: try fixture.client())
        let prompt = try illustrator.prompt(for: pageRequest(pageText: String(repeating: "word ", count: 1_000)))
        #expect(prompt.contains("word…"))
        #expect(prompt.count < 2_000)
    }

    @Test(
        "API errors become illustration errors with stable codes and transience",
        arguments: [
            (OpenAIImagesFake.Scripted.unauthorized, "image-unauthorized", false),
            (.contentPolicy, "image-content-policy", false),
            (.badRequest(message: "Invalid size"), "image-bad-request", false),
            (.malformedJSON, "image-invalid-answer", false),
            (.success(image: Data("<svg/>".utf8)), "image-invalid-answer", false),
        ]
    )
    func errors(scripted: OpenAIImagesFake.Scripted, code: String, isTransient: Bool) async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(scripted)
        let illustrator = ImageAPIIllustrator(client: try fixture.client())
        do {
            _ = try await illustrator.illustrate(pageRequest())
            Issue.record("illustrated despite \(scripted)")
        } catch {
            #expect(error.code == code)
            #expect(error.isTransient == isTransient)
            #expect(!error.message.contains(ImagesFixture.apiKey))
        }
        #expect(fixture.fake.requestCount == 1)
    }

    @Test("rate limits and server errors on every attempt are transient")
    func transientErrors() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        let illustrator = ImageAPIIllustrator(client: try fixture.client(timing: RecordedSleeps().timing))
        fixture.fake.enqueue(.rateLimited(retryAfter: nil), count: 3)
        do {
            _ = try await illustrator.illustrate(pageRequest())
            Issue.record("illustrated despite rate limits")
        } catch {
            #expect(error.code == "rate-limited")
            #expect(error.isTransient)
        }
        fixture.fake.enqueue(.serverError(status: 503), count: 3)
        do {
            _ = try await illustrator.illustrate(pageRequest())
            Issue.record("illustrated despite server errors")
        } catch {
            #expect(error.code == "server-error")
            #expect(error.isTransient)
        }
        #expect(fixture.fake.requestCount == 6)
    }
}
