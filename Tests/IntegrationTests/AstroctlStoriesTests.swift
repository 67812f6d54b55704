import Foundation
import TestProcesses
import Testing

/// `astroctl stories preview` as a user runs it: offline, both languages, and a clear refusal.
@Suite(.timeLimit(.minutes(1)))
struct AstroctlStoriesTests {
    func astroctl(_ arguments: [String]) async throws -> ProcessRunner.Result {
        try await ProcessRunner.run(ProcessRunner.productPath("astroctl"), arguments)
    }

    @Test func previewPrintsATitledStoryOfTheAskedLength() async throws {
        let english = try await astroctl([
            "stories", "preview", "--child", "Mia", "--hero", "Felix the Fox", "--theme", "courage", "--age", "1",
            "--pages", "5",
        ])
        #expect(english.status == 0, "\(english.error)")
        let lines = english.output.split(separator: "\n").map(String.init)
        #expect(lines.first?.contains("Felix the Fox") == true)
        #expect((1...5).allSatisfy { page in lines.contains { $0.hasPrefix("[\(page)] ") } })
        #expect(!lines.contains { $0.hasPrefix("[6] ") })
        #expect(english.output.contains("(5 pages, built-in, stories-en-"))

        let ukrainian = try await astroctl([
            "stories", "preview", "--child", "Оленка", "--hero", "Лисичка Фрося", "--theme", "kindness", "--age",
            "preschool", "--language", "uk",
        ])
        #expect(ukrainian.status == 0, "\(ukrainian.error)")
        #expect(ukrainian.output.contains("Оленка") && ukrainian.output.contains("stories-uk-"))
    }

    @Test func anUnknownThemeExitsTwoNamingTheThemes() async throws {
        let result = try await astroctl([
            "stories", "preview", "--child", "Mia", "--hero", "Felix", "--theme", "pirates", "--age", "1",
        ])
        #expect(result.status == 2)
        #expect(result.error.contains("unknown-theme") && result.error.contains("courage"))
    }
}
