import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import Stories

/// `astroctl stories`: Magical Stories from the command line — the story-worker's jobs
/// (generate, illustrate, read), what is stored (show, achievements), collections, and an offline
/// preview of the built-in writer.
struct StoriesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stories",
        abstract: "Magical Stories: write, illustrate and read children's stories.",
        subcommands: [
            StoriesGenerate.self, StoriesIllustrate.self, StoriesRead.self, StoriesShow.self,
            StoriesAchievements.self, StoriesCollection.self, StoriesPreview.self,
        ]
    )
}

extension StoryAgeGroup: ExpressibleByArgument {
    public init?(argument: String) {
        switch argument.lowercased() {
        case "0", "preschool": self = .preschool
        case "1", "elementary": self = .elementary
        case "2", "preteen": self = .preteen
        default: return nil
        }
    }
}

struct StoriesPreview: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preview",
        abstract: "Write a story offline with the built-in writer (no broker, no database).",
        discussion: """
            Themes: courage, friendship, kindness, curiosity, honesty, perseverance, \
            sharing, feelings. Age groups: 0 or preschool (3-5), 1 or elementary (6-8), 2 \
            or preteen (9-10).

            Examples:
              astroctl stories preview --child Mia --hero "Felix the Fox" \\
                  --theme courage --age 1
              astroctl stories preview --child Оленка --hero "Лисичка Фрося" \\
                  --theme kindness --age 0 --language uk
            """
    )

    @Option(help: "The child's name (the hero's friend in the story).") var child: String
    @Option(help: "The main character, as the story should name it.") var hero: String
    @Option(help: "The theme.") var theme: String
    @Option(help: "Age group: 0/preschool, 1/elementary, 2/preteen.") var age: StoryAgeGroup
    @Option(help: "en or uk.") var language: ReportLanguage = .en
    @Option(parsing: .unconditional, help: "Pages, 3…9 (default: the age group's).") var pages: Int?

    func run() async throws {
        let writer: BuiltInStoryWriter
        do {
            writer = try BuiltInStoryWriter()
        } catch {
            throw CommandFailure("story knowledge base: \(error)")
        }
        let story: WrittenStory
        do {
            story = try writer.write(
                StoryRequestDetails(
                    childName: child,
                    ageGroup: age,
                    theme: theme,
                    mainCharacter: hero,
                    language: language,
                    pageCount: pages
                )
            )
        } catch {
            FileHandle.standardError.write(Data("astroctl: \(error.code): \(error.message)\n".utf8))
            throw ExitCode(2)
        }
        print(Terminal.safe(story.title))
        for (index, page) in story.pages.enumerated() {
            print(Terminal.safe("\n[\(index + 1)] \(page)"))
        }
        print("\n(\(story.pages.count) pages, \(story.writer), \(story.version))")
    }
}
