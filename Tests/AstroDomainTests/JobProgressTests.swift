import Foundation
import Testing

@testable import AstroDomain

/// A job that hands its work on is done for the client when its follow-up is.
@Suite struct JobProgressTests {
    let reportJob = JobID.random()
    let started = Date(timeIntervalSince1970: 1_800_000_000)

    func request(status: JobStatus = .succeeded, reportJob: JobID? = nil) -> JobProgress {
        var fields: [String: JSONValue] = ["creditId": "c1", "area": "career"]
        if let reportJob { fields["reportJobId"] = .string(reportJob.description) }
        return JobProgress(
            status: status.rawValue,
            attempts: 1,
            error: nil,
            result: .object(fields),
            finishedAt: started
        )
    }

    @Test func onlyASucceededHandingOnJobNamesAFollowUp() {
        #expect(request(reportJob: reportJob).followUpJobID(kind: .reportRequest) == reportJob)
        // Already delivered, or no credit: nothing follows.
        #expect(request().followUpJobID(kind: .reportRequest) == nil)
        #expect(request(status: .failed, reportJob: reportJob).followUpJobID(kind: .reportRequest) == nil)
        // The same member on a job type that does not hand on is not a follow-up.
        #expect(request(reportJob: reportJob).followUpJobID(kind: .chartCalculate) == nil)
        let export = JobProgress(
            status: "succeeded",
            attempts: 1,
            error: nil,
            result: ["packJobId": .string(reportJob.description), "exportId": "e"],
            finishedAt: started
        )
        #expect(export.followUpJobID(kind: .userExport) == reportJob)
    }

    @Test func runningUntilTheFollowUpEnds() {
        let parent = request(reportJob: reportJob)
        for followUp in [nil, JobProgress(status: "queued", attempts: 0, error: nil, result: nil, finishedAt: nil)]
            + [JobProgress(status: "running", attempts: 1, error: nil, result: nil, finishedAt: nil)]
        {
            let seen = parent.composed(with: followUp)
            #expect(seen.status == "running")
            #expect(seen.finishedAt == nil)
            #expect(seen.result?["creditId"] == "c1")
        }
    }

    @Test func succeededWithTheFollowUpsFields() {
        let written = JobProgress(
            status: "succeeded",
            attempts: 2,
            error: nil,
            result: ["reportId": "r1", "area": "career", "wordCount": 812],
            finishedAt: started.addingTimeInterval(9)
        )
        let seen = request(reportJob: reportJob).composed(with: written)
        #expect(seen.status == "succeeded")
        #expect(seen.attempts == 1)
        #expect(seen.finishedAt == started.addingTimeInterval(9))
        #expect(seen.result?["reportId"] == "r1")
        #expect(seen.result?["creditId"] == "c1")
        #expect(seen.result?["reportJobId"]?.stringValue == reportJob.description)
        #expect(seen.error == nil)
    }

    @Test func aFailedOrDeadFollowUpIsTheJobsEnd() {
        for status in ["failed", "dead", "cancelled"] {
            let error: JSONValue = ["code": "llm-unauthorized", "message": "the LLM refused the key"]
            let ended = JobProgress(
                status: status,
                attempts: 3,
                error: error,
                result: nil,
                finishedAt: started.addingTimeInterval(30)
            )
            let seen = request(reportJob: reportJob).composed(with: ended)
            #expect(seen.status == status)
            #expect(seen.error == error)
            #expect(seen.finishedAt == started.addingTimeInterval(30))
            #expect(seen.result?["creditId"] == "c1")
        }
    }
}
