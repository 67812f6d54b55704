import AstroDomain
import Foundation
import Testing
import WorkerRuntime

/// Issue 29, F1/F2: the daily budget per paid API and the per-user bound, as the workers read
/// and apply them, and what one answered call adds to the metrics.
@Suite struct PaidCallLimitsTests {
    @Test func theBudgetComesFirstThenTheUsersBound() {
        let limits = PaidCallLimits(
            dailyBudgetUSD: [.llm: 10, .images: 2],
            perUserDaily: [.story: 3, .illustration: 5]
        )
        #expect(limits.admission(.story, spentTodayUSD: 9.99, userCallsToday: 2) == .admitted)
        #expect(limits.admission(.story, spentTodayUSD: 10, userCallsToday: 0) == .budgetReached)
        #expect(limits.admission(.story, spentTodayUSD: 11, userCallsToday: 3) == .budgetReached)
        #expect(limits.admission(.story, spentTodayUSD: 0, userCallsToday: 3) == .userLimitReached)
        // Each purpose has its own API's budget and its own bound; one without a bound makes none.
        #expect(limits.admission(.illustration, spentTodayUSD: 9, userCallsToday: 4) == .budgetReached)
        #expect(limits.admission(.illustration, spentTodayUSD: 1.99, userCallsToday: 4) == .admitted)
        #expect(limits.admission(.report, spentTodayUSD: 0, userCallsToday: 0) == .userLimitReached)
        #expect(PaidCallAdmission.budgetReached.refusalReason == "budget")
        #expect(PaidCallAdmission.userLimitReached.refusalReason == "user-limit")
        #expect(PaidCallAdmission.admitted.refusalReason == nil)
    }

    @Test func theLimitsAreReadFromTheEnvironmentWithDefaults() throws {
        let defaults = try PaidCallLimits.fromEnvironment([:])
        #expect(defaults == PaidCallLimits())
        #expect(defaults.dailyBudgetUSD == [.llm: 50, .images: 20])
        #expect(defaults.perUserDaily == [.report: 20, .story: 20, .illustration: 60])
        let set = try PaidCallLimits.fromEnvironment([
            "LLM_DAILY_BUDGET_USD": "12.5", "IMAGE_DAILY_BUDGET_USD": "0", "STORY_LLM_CALLS_PER_USER_DAY": "4",
            "IMAGE_CALLS_PER_USER_DAY": " 9 ", "REPORT_LLM_CALLS_PER_USER_DAY": "",
        ])
        #expect(set.dailyBudgetUSD == [.llm: Decimal(string: "12.5")!, .images: 0])
        #expect(set.perUserDaily == [.report: 20, .story: 4, .illustration: 9])
        for (name, value) in [
            ("LLM_DAILY_BUDGET_USD", "-1"), ("IMAGE_DAILY_BUDGET_USD", "lots"), ("IMAGE_CALLS_PER_USER_DAY", "1.5"),
            ("STORY_LLM_CALLS_PER_USER_DAY", "100001"),
        ] {
            #expect(throws: ConfigurationError.self) { try PaidCallLimits.fromEnvironment([name: value]) }
            do {
                _ = try PaidCallLimits.fromEnvironment([name: value])
            } catch {
                #expect(error.variable == name)
            }
        }
    }

    @Test func anAnsweredCallCountsItsTokensAndCostByPurpose() {
        let report = PaidCallLedger.measurements(
            PaidCallUsage(purpose: .report, model: "m", promptTokens: 700, completionTokens: 500, costUSD: 0.0054)
        )
        #expect(report.map(\.metric) == [.paidCalls, .llmTokens, .llmTokens, .llmCost])
        #expect(
            report.map(\.labelValues) == [
                ["llm", "report"], ["report", "prompt"], ["report", "completion"], ["report"],
            ]
        )
        #expect(report.map(\.amount) == [1, 700, 500, 0.0054])
        let picture = PaidCallLedger.measurements(
            PaidCallUsage(purpose: .illustration, model: "images:m", images: 1, costUSD: 0.04)
        )
        #expect(picture.map(\.metric) == [.paidCalls, .imageCost])
        // Figures below zero (a forged usage) count as zero.
        let forged = PaidCallUsage(purpose: .story, model: "m", promptTokens: -5, completionTokens: -1, costUSD: -3)
        #expect(forged.promptTokens == 0 && forged.completionTokens == 0 && forged.costUSD == 0)
    }
}
