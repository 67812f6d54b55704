import Foundation
import Testing
import WorkerRuntime

@testable import Gateway

/// Issue 29, F2: the gateway's daily quotas of paid work, as configured and as charged.
@Suite struct DailyQuotasTests {
    @Test func theQuotasAreReadWithDefaultsAndBounds() throws {
        let defaults = try DailyQuotas.fromEnvironment([:])
        #expect(defaults.storyGenerations == 20 && defaults.illustrationRedraws == 30)
        let set = try DailyQuotas.fromEnvironment([
            "STORY_GENERATIONS_PER_DAY": "3", "ILLUSTRATION_REDRAWS_PER_DAY": "0",
        ])
        #expect(set.storyGenerations == 3 && set.illustrationRedraws == 0)
        for value in ["-1", "10001", "many"] {
            #expect(throws: ConfigurationError.self) {
                try DailyQuotas.fromEnvironment(["STORY_GENERATIONS_PER_DAY": value])
            }
        }
        #expect(set.storyGeneration.units == 1 && set.storyGeneration.code == .storyQuotaExceeded)
        #expect(set.redraw(pages: 9).units == 9 && set.redraw(pages: 9).code == .redrawQuotaExceeded)
    }

    @Test func aRefusalIsA429WithRetryAfterTheNextUTCMidnight() {
        // 2026-01-01T23:59:30Z: 30 s to go; midnight itself: a whole day.
        #expect(DailyQuotas.secondsUntilReset(now: Date(timeIntervalSince1970: 1_767_311_970)) == 30)
        #expect(DailyQuotas.secondsUntilReset(now: Date(timeIntervalSince1970: 1_767_312_000)) == 86_400)
        let problem = QuotaExceeded(charge: DailyQuotas().redraw(pages: 9), used: 27).problem
        #expect(problem.status == 429 && problem.code == .redrawQuotaExceeded)
        #expect((problem.retryAfter ?? 0) > 0)
    }
}
