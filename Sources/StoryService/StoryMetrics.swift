import AstroDomain
import Foundation
import Reports
import Stories
import WorkerRuntime

/// The story-worker's business measurements, counted once the job's transaction committed.
enum StoryMeasurements {
    /// A story stored with its pages, and what its LLM answer cost when an LLM wrote it.
    static func written(_ story: WrittenStory, language: ReportLanguage, usage: ReportUsage?) -> [BusinessMeasurement] {
        let language = MetricLabel.bounded(language.rawValue, among: MetricLabel.languages)
        var measurements = [
            BusinessMeasurement(.stories, [language, MetricLabel.writer(story.writer)]),
            BusinessMeasurement(.storyPages, [language], amount: Double(story.pages.count)),
        ]
        if let usage {
            measurements += BusinessMeasurement.llmUsage(
                purpose: "story",
                promptTokens: usage.promptTokens,
                completionTokens: usage.completionTokens,
                costUSD: NSDecimalNumber(decimal: usage.costUSD).doubleValue
            )
        }
        return measurements
    }

    /// Pages given a picture by this job, by illustrator (`built-in` or `images-api`).
    static func illustrated(pages: Int, illustrator: String) -> [BusinessMeasurement] {
        guard pages > 0 else { return [] }
        return [BusinessMeasurement(.storyIllustrations, [MetricLabel.illustrator(illustrator)], amount: Double(pages))]
    }
}
