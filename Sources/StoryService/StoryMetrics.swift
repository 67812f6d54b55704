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

    /// Pages given a picture by this job, by illustrator (`built-in` or `images-api`), and what
    /// the images API's pictures cost at `pricePerImageUSD` (the built-in illustrator is free).
    static func illustrated(pages: Int, illustrator: String, pricePerImageUSD: Double = 0) -> [BusinessMeasurement] {
        guard pages > 0 else { return [] }
        let label = MetricLabel.illustrator(illustrator)
        var measurements = [BusinessMeasurement(.storyIllustrations, [label], amount: Double(pages))]
        if label == "images-api", pricePerImageUSD > 0 {
            measurements.append(BusinessMeasurement(.imageCost, amount: Double(pages) * pricePerImageUSD))
        }
        return measurements
    }
}
