import AstroDomain
import Foundation
import Stories
import StoryIllustration
import Testing

@Suite("BuiltInIllustrator: the offline pages as SVG (BUILTIN_ILLUSTRATION_FORMAT=svg)")
struct BuiltInIllustratorTests {
    let illustrator: BuiltInIllustrator

    init() throws { illustrator = try BuiltInIllustrator(format: .svg) }

    private func svg(_ request: IllustrationRequest) throws -> (image: StoryImage, text: String, parsed: ParsedSVG) {
        let image = try illustrator.render(request)
        let text = try #require(String(data: image.data, encoding: .utf8))
        return (image, text, parseSVG(image.data))
    }

    @Test("an SVG named built-in, valid XML, with the character's name, the title on page 1 and the page number")
    func validPage() async throws {
        #expect(illustrator.name == "built-in")
        #expect(illustrator.version == "illustration-scenes-v1")
        let image = try await illustrator.illustrate(pageRequest())
        #expect(image.fileExtension == "svg")
        #expect(image.mediaType == "image/svg+xml")
        let parsed = parseSVG(image.data)
        #expect(parsed.isValid, "\(parsed.error ?? "")")
        #expect(parsed.rootName == "svg")
        #expect(parsed.rootAttributes["viewBox"] == "0 0 800 600")
        #expect(parsed.texts["title"] == ["Bunny Bo and the Dark Cave"])
        #expect(parsed.texts["desc"] == ["Bunny Bo in the forest, page 1 of 5"])
        let labels = parsed.texts["text"] ?? []
        #expect(labels == ["Bunny Bo", "Bunny Bo and the Dark Cave", "1"])

        let later = try svg(pageRequest(pageNumber: 3, pageText: "A little bridge goes over the stream."))
        #expect(later.parsed.isValid)
        // No title banner after page 1.
        #expect(later.parsed.texts["text"] == ["Bunny Bo", "3"])
    }

    @Test("the same request gives the same bytes")
    func deterministic() throws {
        let request = pageRequest(pageNumber: 2, pageText: "Boom! goes the thunder.")
        let first = try illustrator.render(request)
        let second = try BuiltInIllustrator(format: .svg).render(request)
        #expect(first == second)
        #expect(try illustrator.render(pageRequest(pageNumber: 3)) != first)
    }

    @Test("names and titles with < & \" ' and control characters are escaped and still valid XML")
    func escaping() throws {
        let name = #"Bo <b>&"Co"'s"#
        let page = try svg(pageRequest(title: "A & B <story> \"quoted\" 'single'\u{1}", mainCharacter: name))
        #expect(page.parsed.isValid, "\(page.parsed.error ?? "")")
        #expect(page.parsed.texts["text"]?.first == name)
        #expect(page.parsed.texts["title"] == ["A & B <story> \"quoted\" 'single' "])
        #expect(!page.text.contains("<b>"))
        #expect(page.text.contains("Bo &lt;b&gt;&amp;&quot;Co&quot;&apos;s"))
    }

    @Test("each theme has its own palette; the scene follows the setting named in the page")
    func themesAndScenes() throws {
        let base = try StoryKnowledgeBase.load(.en)
        var backdrops: Set<[String]> = []
        for theme in base.themes.keys.sorted() {
            let page = try svg(pageRequest(theme: theme, pageText: "Nothing in particular happens here."))
            #expect(page.parsed.isValid)
            // The colours of everything but the character (which is the same story) differ per theme.
            backdrops.insert(page.parsed.fills)
        }
        #expect(backdrops.count == base.themes.count)

        let waterfall = try svg(pageRequest(pageText: "Bo lives in the quiet valley by the waterfall."))
        #expect(waterfall.parsed.rootAttributes["data-scene"] == "waterfall")
        let sea = try svg(pageRequest(pageText: "The Windy Cliffs Above The Sea were loud."))
        #expect(sea.parsed.rootAttributes["data-scene"] == "sea")
        let none = try svg(pageRequest(pageText: "Bo walks on."))
        #expect(none.parsed.rootAttributes["data-scene"] == "forest")
        // A page naming no setting keeps the previous page's scene.
        let carried = try svg(pageRequest(pageNumber: 2, pageText: "Bo walks on.", previousImage: sea.image))
        #expect(carried.parsed.rootAttributes["data-scene"] == "sea")
        #expect(carried.parsed.texts["desc"] == ["Bunny Bo by the sea, page 2 of 5"])
    }

    @Test("every setting of both knowledge bases is drawn as a scene of its own kind")
    func everySetting() throws {
        for language in ReportLanguage.allCases {
            let base = try StoryKnowledgeBase.load(language)
            for (key, theme) in base.themes {
                let defaultScene = try svg(pageRequest(theme: key, language: language, pageText: "…"))
                    .parsed.rootAttributes["data-scene"]
                var scenes: Set<String> = []
                for setting in theme.settings {
                    let page = try svg(pageRequest(theme: key, language: language, pageText: "Here is \(setting)."))
                        .parsed
                    #expect(page.isValid)
                    scenes.insert(page.rootAttributes["data-scene"] ?? "")
                }
                #expect(defaultScene != nil)
                // At least two different places per theme: the rules told the settings apart.
                #expect(scenes.count >= 2, "\(language) \(key): \(scenes)")
            }
        }
    }

    @Test("the character looks the same on every page of a story, and different in another story")
    func characterConsistency() throws {
        func characterFills(_ request: IllustrationRequest) throws -> [String] {
            let text = try svg(request).text
            // The figure is the group translated to the character's place and scaled to face a side.
            let start = try #require(text.range(of: ") scale("))
            let end = try #require(text[start.upperBound...].range(of: "</g><g transform"))
            return text[start.upperBound..<end.lowerBound].components(separatedBy: "fill=\"").dropFirst().map {
                String($0.prefix(while: { $0 != "\"" }))
            }
        }
        let story = UUID()
        let first = try characterFills(pageRequest(storyID: story, pageNumber: 1))
        #expect(first.count > 5)
        for page in 2...6 {
            let fills = try characterFills(
                pageRequest(storyID: story, theme: "courage", pageNumber: page, pageText: "Text of page \(page).")
            )
            #expect(fills == first, "page \(page)")
        }
        let other = try characterFills(pageRequest(storyID: UUID(), pageNumber: 1))
        #expect(other != first)
    }

    @Test("the character's kind follows its name, in both languages")
    func characterKinds() throws {
        let cases: [(String, ReportLanguage, String)] = [
            ("Bunny Bo", .en, "bunny"), ("Felix the Fox", .en, "fox"), ("Лисичка Міра", .uk, "fox"),
            ("Ведмедик Тедді", .uk, "bear"), ("Zara", .en, "friend"), ("Дракончик", .uk, "dragon"),
        ]
        for (name, language, kind) in cases {
            let page = try svg(pageRequest(language: language, mainCharacter: name)).parsed
            #expect(page.rootAttributes["data-kind"] == kind, "\(name)")
        }
    }

    @Test("Ukrainian pages: settings found in the Ukrainian text, the description in Ukrainian")
    func ukrainian() throws {
        let page = try svg(
            pageRequest(
                title: "Лисичка і темна печера",
                language: .uk,
                mainCharacter: "Лисичка",
                pageNumber: 2,
                pageText: "Попереду — тиха печера біля річки. Там темно й тихо."
            )
        )
        #expect(page.parsed.isValid)
        #expect(page.parsed.rootAttributes["data-scene"] == "cave")
        #expect(page.parsed.texts["desc"] == ["Лисичка біля печери, сторінка 2 з 5"])
        #expect(page.parsed.texts["text"]?.first == "Лисичка")
        // An English setting in a Ukrainian story is not a Ukrainian setting.
        let english = try svg(pageRequest(language: .uk, pageText: "the quiet valley by the waterfall"))
        #expect(english.parsed.rootAttributes["data-scene"] == "forest")
    }

    @Test("pages stay under 16 KB even with the longest names and titles")
    func sizeBound() throws {
        let long = String(repeating: "Щ&<", count: 200)
        for theme in try StoryKnowledgeBase.load(.uk).themes.keys {
            for page in 1...2 {
                let image = try illustrator.render(
                    pageRequest(
                        title: long,
                        theme: theme,
                        language: .uk,
                        mainCharacter: long,
                        pageNumber: page,
                        pageText: String(repeating: "слово ", count: 500)
                    )
                )
                #expect(image.data.count < 16_384, "\(theme): \(image.data.count) bytes")
                #expect(parseSVG(image.data).isValid)
            }
        }
    }

    @Test("an unknown theme is refused, not drawn")
    func unknownTheme() async {
        do {
            _ = try await illustrator.illustrate(pageRequest(theme: "dragons"))
            Issue.record("drew an unknown theme")
        } catch {
            #expect(error.code == "unknown-theme")
            #expect(!error.isTransient)
            #expect(error.message.contains("courage"))
        }
    }

    /// Speed is measured by the benchmark (`scripts/bench.sh`); a duration here would fail on a
    /// loaded machine.
    @Test("renders many pages in a row, each a full picture")
    func manyPages() throws {
        let requests = (1...200).map { pageRequest(pageNumber: $0 % 9 + 1, pageText: "Page \($0) in the forest.") }
        var bytes = 0
        for request in requests { bytes += try illustrator.render(request).data.count }
        #expect(bytes > 200 * 2_000)
    }
}
