import Foundation
import Testing

@testable import AstroDomain

@Suite struct TypedIDTests {
    @Test func parsesAnyCaseAndPrintsLowercase() throws {
        let id = try #require(JobID("9B2F0C4E-1D2A-4C3B-8E5F-6A7B8C9D0E1F"))
        #expect(id.description == "9b2f0c4e-1d2a-4c3b-8e5f-6a7b8c9d0e1f")
        #expect(JobID("not-a-uuid") == nil)
    }

    @Test func codableAsString() throws {
        let id = UserID.random()
        let data = try JSONEncoder().encode(["userId": id])
        #expect(String(decoding: data, as: UTF8.self) == "{\"userId\":\"\(id.description)\"}")
        let back = try JSONDecoder().decode([String: UserID].self, from: data)
        #expect(back["userId"] == id)
    }

    @Test func rejectsNonUUIDWithAClearMessage() {
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([String: JobID].self, from: Data("{\"jobId\":\"42\"}".utf8))
        }
    }
}

@Suite struct JobTypeTests {
    @Test func contractJobTypesAndFailedEvents() {
        #expect(JobType.all.count == 9)
        #expect(JobType.storyIllustrate.failedEvent == "story.failed")
        #expect(JobType.chartCalculate.failedEvent == "chart.failed")
        #expect(JobType.reportRequest.failedEvent == "report.failed")
        #expect(JobType.reportGenerate.failedEvent == "report.failed")
        #expect(JobType.billingVerifyPurchase.failedEvent == "billing.verify-purchase.failed")
        #expect(JobType(rawValue: "sample.work").failedEvent == "sample.work.failed")
    }

    @Test func terminalStatuses() {
        #expect(JobStatus.allCases.filter(\.isTerminal) == [.succeeded, .failed, .dead])
        #expect(BrokerNames.deadLetterQueue(of: "chart.calculate") == "chart.calculate.dead")
    }
}

@Suite struct EventTests {
    @Test func eventJSONHasTheContractKeys() throws {
        let jobID = JobID.random()
        let date = Date(timeIntervalSince1970: 1_795_000_000)
        let event = JobEvent(jobID: jobID, type: "chart.calculated", occurredAt: date, fields: ["chartId": "abc"])
        let object = try #require(try JSONSerialization.jsonObject(with: event.jsonData()) as? [String: Any])
        #expect(object["jobId"] as? String == jobID.description)
        #expect(object["type"] as? String == "chart.calculated")
        #expect(object["occurredAt"] as? String == "2026-11-18T11:06:40Z")
        #expect(object["chartId"] as? String == "abc")
        #expect(object["error"] == nil)
    }

    @Test func failedEventCarriesCodeAndMessage() throws {
        let event = JobEvent(
            jobID: .random(),
            type: "chart.failed",
            error: JobError(code: "invalid-payload", message: "missing field \"userId\"")
        )
        let object = try #require(try JSONSerialization.jsonObject(with: event.jsonData()) as? [String: Any])
        let error = try #require(object["error"] as? [String: String])
        #expect(error == ["code": "invalid-payload", "message": "missing field \"userId\""])
    }

    @Test func iso8601KeepsMillisecondsOnlyWhenPresent() throws {
        #expect(ISO8601.string(from: Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
        #expect(ISO8601.string(from: Date(timeIntervalSince1970: 0.25)) == "1970-01-01T00:00:00.250Z")
        let parsed = try #require(ISO8601.date(from: "2026-11-22T10:00:00.500+02:00"))
        #expect(parsed.timeIntervalSince1970 == 1_795_334_400.5)
        #expect(ISO8601.date(from: "yesterday") == nil)
    }

    @Test func jsonValueRoundTrips() throws {
        let value: JSONValue = ["a": 1, "b": [true, nil, "x"], "c": 2.5]
        let data = try JSONCoding.encoder.encode(value)
        #expect(String(decoding: data, as: UTF8.self) == "{\"a\":1,\"b\":[true,null,\"x\"],\"c\":2.5}")
        #expect(try JSONDecoder().decode(JSONValue.self, from: data) == value)
        #expect(value["a"] == .number(1))
        #expect(value["b"]?.stringValue == nil)
    }
}
