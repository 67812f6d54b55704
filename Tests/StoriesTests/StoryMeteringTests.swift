import AstroDomain
import Foundation
import LLMFake
import Synchronization
import Testing

@testable import Stories

/// A meter that remembers what it was told and admits as scripted.
final class RecordingMeter: PaidCallMeter {
    let admission: PaidCallAdmission
    private let state = Mutex<(asked: Int, recorded: [PaidCallUsage])>((0, []))

    init(admission: PaidCallAdmission = .admitted) { self.admission = admission }

    var asked: Int { state.withLock { $0.asked } }
    var recorded: [PaidCallUsage] { state.withLock { $0.recorded } }

    func admit(_ purpose: PaidPurpose) async -> PaidCallAdmission {
        state.withLock { $0.asked += 1 }
        return admission
    }

    func record(_ usage: PaidCallUsage) async { state.withLock { $0.recorded.append(usage) } }
}

/// Issue 29, F2: the story writer asks its meter before each LLM call and tells it of each
/// answer as it arrives, rejected ones included; a refused call is never sent.
@Suite(.timeLimit(.minutes(1)))
struct StoryMeteringTests {
    @Test func everyAnsweredCallIsMeteredAndARejectedOneToo() async throws {
        let details = LLMStoryWriterTests.requests[.en]!
        let fake = try LLMStoryWriterTests.fake(answering: LLMStoryWriterTests.answer(details))
        defer { fake.stop() }
        // The first answer is cut off (rejected, but paid for), the second is taken.
        fake.enqueue(.truncated(content: "Once"))
        let meter = RecordingMeter()
        let (_, usage) = try await LLMStoryWriterTests.writer(fake).write(details, meter: meter)
        #expect(fake.requestCount == 2 && meter.asked == 2)
        #expect(meter.recorded.count == 2)
        #expect(meter.recorded.allSatisfy { $0.purpose == .story && $0.model == "test-model" })
        #expect(meter.recorded.map(\.promptTokens).reduce(0, +) == usage.promptTokens)
        #expect(meter.recorded.map(\.completionTokens).reduce(0, +) == usage.completionTokens)
        #expect(meter.recorded.map(\.costUSD).reduce(0, +) == usage.costUSD)
    }

    @Test(arguments: [PaidCallAdmission.budgetReached, .userLimitReached])
    func aRefusedCallIsNotMade(_ admission: PaidCallAdmission) async throws {
        let details = LLMStoryWriterTests.requests[.uk]!
        let fake = try LLMStoryWriterTests.fake(answering: LLMStoryWriterTests.answer(details))
        defer { fake.stop() }
        let meter = RecordingMeter(admission: admission)
        do {
            _ = try await LLMStoryWriterTests.writer(fake).write(details, meter: meter)
            Issue.record("wrote a story the meter refused")
        } catch {
            #expect((error as? StoryWriterError)?.code == StoryWriterError.paidCallRefused)
        }
        #expect(fake.requestCount == 0 && meter.recorded.isEmpty)
    }
}
