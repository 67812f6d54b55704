import AstroDomain
import Foundation
import Reports
import Stories
import WorkerRuntime

/// The story-worker's business measurements, counted once the job's transaction committed.
enum StoryMeasurements {
    /// A story stored with its pages. What its LLM answers cost is counted when they were
    /// answered (`PaidCallLedger`): a story never stored still paid for them.
    static func written(_ story: WrittenStory, language: ReportLanguage) -> [BusinessMeasurement] {
        let language = MetricLabel.bounded(language.rawValue, among: MetricLabel.languages)
        return [
            BusinessMeasurement(.stories, [language, MetricLabel.writer(story.writer)]),
            BusinessMeasurement(.storyPages, [language], amount: Double(story.pages.count)),
        ]
    }

    /// Pages given a picture by this job, by illustrator (`built-in` or `images-api`). What the
    /// images API's pictures cost is counted when they were drawn (`PaidCallLedger`).
    static func illustrated(pages: Int, illustrator: String) -> [BusinessMeasurement] {
        guard pages > 0 else { return [] }
        return [
            BusinessMeasurement(
                .storyIllustrations,
                [MetricLabel.illustrator(illustrator)],
                amount: Double(pages)
            )
        ]
    }
}
