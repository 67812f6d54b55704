import AstroDomain
import Foundation
import Testing

@testable import Stories

/// The story knowledge base (both languages) and the built-in writer: completeness, length per
/// age group, names, theme, language, determinism and refusals.
@Suite struct BuiltInStoryWriterTests {
    static let writer = try! BuiltInStoryWriter()
    static let themes = [
        "courage", "friendship", "kindness", "curiosity", "honesty", "perseverance", "sharing", "feelings",
    ]

    @Test(arguments: ReportLanguage.allCases)
    func theKnowledgeBaseIsComplete(language: ReportLanguage) throws {
        let base = Self.writer.knowledgeBase(language)
        #expect(base.themes.keys.sorted() == Self.themes.sorted())
        #expect(base.blocklist.count >= 40)
        for (key, theme) in base.themes {
            #expect(theme.titles.count == 3 && theme.settings.count == 3, "\(language) \(key)")
            for age in StoryAgeGroup.allCases {
                let beats = theme.beats(age)
                #expect(
                    beats.openings.count == 2 && beats.middles.count == 6 && beats.resolutions.count == 2
                        && beats.endings.count == 2,
                    "\(language) \(key) age \(age.rawValue)"
                )
                for text in beats.openings {
                    #expect(text.contains("{hero}") && text.contains("{name}") && text.contains("{setting}"))
                }
                for text in beats.middles + beats.resolutions + beats.endings {
                    #expect(text.contains("{hero}"), "\(language) \(key): \(text.prefix(40))")
                }
            }
        }
    }

    @Test(arguments: ReportLanguage.allCases, StoryAgeGroup.allCases)
    func everyThemeMakesAStoryOfTheRightShapeForTheAge(language: ReportLanguage, age: StoryAgeGroup) throws {
        let base = Self.writer.knowledgeBase(language)
        let hero = language == .en ? "Felix the Fox" : "Лисичка Фрося"
        let child = language == .en ? "Mia" : "Оленка"
        for theme in Self.themes {
            let story = try Self.writer.write(
                StoryRequestDetails(
                    childName: child,
                    ageGroup: age,
                    theme: theme,
                    mainCharacter: hero,
                    language: language
                )
            )
            #expect(story.pages.count == base.ageRules[age]!.defaultPages, "\(language) \(theme) \(age)")
            #expect(story.title.contains(hero))
            #expect(story.pages.allSatisfy { $0.contains(hero) }, "every page names the main character")
            #expect(story.pages.first?.contains(child) == true && story.pages.last != nil)
            #expect(!story.pages.joined().contains("{"), "a placeholder was left unfilled")
            #expect(Set(story.pages).count == story.pages.count, "a page repeats")
            let problems = StoryContentCheck.problems(title: story.title, pages: story.pages, ageGroup: age, base: base)
            #expect(problems.isEmpty, "\(language) \(theme) \(age): \(problems)")
            if language == .uk {
                let text = story.pages.joined()
                #expect(text.unicodeScalars.contains { (0x0400...0x04FF).contains($0.value) })
                #expect(text.contains { "іїєґ".contains($0) }, "Ukrainian letters")
            }
        }
    }

    @Test func longerStoriesAreLongerAndTheSameRequestGivesTheSameStory() throws {
        let details = StoryRequestDetails(
            childName: "Sam",
            ageGroup: .elementary,
            theme: "curiosity",
            mainCharacter: "Robo the Robot",
            language: .en,
            pageCount: 9
        )
        let story = try Self.writer.write(details)
        #expect(story.pages.count == 9)
        #expect(try Self.writer.write(details) == story)
        var three = details
        three.pageCount = 3
        #expect(try Self.writer.write(three).pages.count == 3)
    }

    @Test func badRequestsAreRefusedWithACode() {
        func code(_ details: StoryRequestDetails) -> String? {
            do {
                _ = try Self.writer.write(details)
                return nil
            } catch {
                return error.code
            }
        }
        let good = StoryRequestDetails(
            childName: "Sam",
            ageGroup: .preschool,
            theme: "kindness",
            mainCharacter: "Teddy",
            language: .en
        )
        var unknown = good
        unknown.theme = "pirates"
        #expect(code(unknown) == "unknown-theme")
        for pages in [2, 10] {
            var wrong = good
            wrong.pageCount = pages
            #expect(code(wrong) == "invalid-page-count")
        }
        var empty = good
        empty.childName = "  "
        #expect(code(empty) == "invalid-name")
        let blocked = Self.writer.knowledgeBase(.en).blocklist.sorted().first!
        var rude = good
        rude.mainCharacter = "Captain \(blocked)"
        #expect(code(rude) == "unsuitable-content")
    }

    @Test func theContentCheckCatchesBlockedWordsAndPagesTooLong() {
        let base = Self.writer.knowledgeBase(.en)
        let blocked = base.blocklist.sorted().first!
        let fine = Array(repeating: "Teddy hops and hops in the sunny garden with a happy smile today.", count: 5)
        #expect(StoryContentCheck.problems(title: "Teddy", pages: fine, ageGroup: .preschool, base: base).isEmpty)
        var bad = fine
        bad[2] = "Teddy finds a \(blocked) in the garden and hops away from it quickly today."
        bad[3] = Array(repeating: "Teddy hops.", count: 60).joined(separator: " ")
        let problems = StoryContentCheck.problems(title: "Teddy", pages: bad, ageGroup: .preschool, base: base)
        #expect(problems.contains { $0.hasPrefix("page 3 contains") })
        #expect(problems.contains { $0.hasPrefix("page 4 has 120 words") })
    }
}
