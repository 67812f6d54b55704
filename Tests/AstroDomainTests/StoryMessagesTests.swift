import Foundation
import Testing

@testable import AstroDomain

/// The story bodies as they were before their ids were typed (bare `UUID`s, synthesized coding):
/// what the typed bodies must read and write exactly alike.
private enum Before {
    struct Generate: Codable {
        var jobID: JobID
        var userID: UserID
        var childProfileID: UUID?
        var childName: String?
        var timeZone: String?
        var ageGroup: Int
        var theme: String
        var mainCharacter: String
        var language: ReportLanguage
        var pageCount: Int?
        var collectionID: UUID?

        enum CodingKeys: String, CodingKey {
            case jobID = "jobId"
            case userID = "userId"
            case childProfileID = "childProfileId"
            case childName, timeZone, ageGroup, theme, mainCharacter, language, pageCount
            case collectionID = "collectionId"
        }
    }

    struct Illustrate: Codable {
        var jobID: JobID
        var userID: UserID
        var storyID: UUID
        var pages: [Int]?
        var force: Bool?

        enum CodingKeys: String, CodingKey {
            case jobID = "jobId"
            case userID = "userId"
            case storyID = "storyId"
            case pages, force
        }
    }

    struct Read: Codable {
        var jobID: JobID
        var userID: UserID
        var storyID: UUID
        var childProfileID: UUID?
        var at: Date?

        enum CodingKeys: String, CodingKey {
            case jobID = "jobId"
            case userID = "userId"
            case storyID = "storyId"
            case childProfileID = "childProfileId"
            case at
        }
    }
}

@Suite struct StoryMessagesTests {
    static let job = #""jobId":"9b2f0c4e-1d2a-4c3b-8e5f-6a7b8c9d0e1f","userId":"4c1a2b3c-0000-4000-8000-000000000001""#
    static let story = "5D1E8A7C-2B3F-4A6D-9E0C-1F2A3B4C5D6E"
    static let child = "a1b2c3d4-e5f6-4789-8abc-def012345678"

    static let generateBodies = [
        #"{\#(job),"childName":"Mia","ageGroup":1,"theme":"courage","mainCharacter":"Felix","language":"en"}"#,
        #"{\#(job),"childProfileId":"\#(child)","collectionId":"\#(story)","timeZone":"Europe/Kyiv","ageGroup":0,"#
            + #""theme":"kindness","mainCharacter":"Felix","language":"uk","pageCount":5}"#,
        #"{\#(job),"childProfileId":"not-a-uuid","ageGroup":1,"theme":"t","mainCharacter":"m","language":"en"}"#,
        #"{\#(job),"childProfileId":42,"ageGroup":1,"theme":"t","mainCharacter":"m","language":"en"}"#,
        #"{\#(job),"collectionId":"x","ageGroup":"1","theme":"t","mainCharacter":"m","language":"en"}"#,
        #"{\#(job),"ageGroup":1,"theme":"t","mainCharacter":"m","language":"de"}"#,
        #"{\#(job),"childProfileId":null,"ageGroup":1,"theme":"t","language":"en"}"#,
        #"{"userId":"x","storyId":"y"}"#,
        #"[]"#,
    ]

    static let illustrateBodies = [
        #"{\#(job),"storyId":"\#(story)"}"#,
        #"{\#(job),"storyId":"\#(story.lowercased())","pages":[2,3],"force":true}"#,
        #"{\#(job),"storyId":"\#(story)","pages":null,"force":null}"#,
        #"{\#(job)}"#,
        #"{\#(job),"storyId":null}"#,
        #"{\#(job),"storyId":"5d1e8a7c2b3f4a6d9e0c1f2a3b4c5d6e"}"#,
        #"{\#(job),"storyId":{"id":1}}"#,
        #"{\#(job),"storyId":"\#(story)","pages":"1"}"#,
    ]

    static let readBodies = [
        #"{\#(job),"storyId":"\#(story)"}"#,
        #"{\#(job),"storyId":"\#(story)","childProfileId":"\#(child)","at":"2026-11-23T19:30:00.250Z"}"#,
        #"{\#(job),"storyId":"\#(story)","childProfileId":"\#(child.uppercased())","at":"yesterday"}"#,
        #"{\#(job),"storyId":"\#(story)","childProfileId":""}"#,
        #"{\#(job),"storyId":7}"#,
    ]

    @Test(arguments: generateBodies) func generateReadsAndWritesAsBefore(body: String) throws {
        try expectSame(body, typed: StoryGenerateRequest.self, before: Before.Generate.self)
    }

    @Test(arguments: illustrateBodies) func illustrateReadsAndWritesAsBefore(body: String) throws {
        try expectSame(body, typed: StoryIllustrateRequest.self, before: Before.Illustrate.self)
    }

    @Test(arguments: readBodies) func readReadsAndWritesAsBefore(body: String) throws {
        try expectSame(body, typed: StoryReadRequest.self, before: Before.Read.self)
    }

    @Test func theIdsAreTyped() throws {
        let body = Data(Self.readBodies[1].utf8)
        let request = try JSONCoding.decoder.decode(StoryReadRequest.self, from: body)
        #expect(request.storyID == StoryID(Self.story))
        #expect(request.childProfileID == ChildID(Self.child))
        let generate = StoryGenerateRequest(
            jobID: request.jobID,
            userID: request.userID,
            childName: "Mia",
            ageGroup: 1,
            theme: "courage",
            mainCharacter: "Felix",
            language: .en
        )
        // Derived from the job's id, as before: a replayed job names the same story.
        #expect(generate.storyID.uuid == JobID.derived(from: request.jobID, purpose: "story").uuid)
    }

    /// Both read `body` alike: the same value written as the same bytes, or the same error.
    private func expectSame<Typed: Codable, Old: Codable>(
        _ body: String,
        typed: Typed.Type,
        before: Old.Type
    ) throws {
        let data = Data(body.utf8)
        let new = Result { try JSONCoding.decoder.decode(Typed.self, from: data) }
        let old = Result { try JSONCoding.decoder.decode(Old.self, from: data) }
        switch (new, old) {
        case (.success(let new), .success(let old)):
            let written = try JSONCoding.encoder.encode(new)
            #expect(
                String(decoding: written, as: UTF8.self)
                    == String(decoding: try JSONCoding.encoder.encode(old), as: UTF8.self)
            )
        case (.failure(let new), .failure(let old)):
            #expect(Self.describe(new) == Self.describe(old))
        default:
            Issue.record("\(body): typed \(new), before \(old)")
        }
    }

    /// What the runtime's rejection message is made of: the case, the path and the decoder's text.
    private static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context): return "keyNotFound \(key.stringValue) at \(path(context))"
        case .typeMismatch(let type, let context):
            return "typeMismatch \(type) at \(path(context)): \(context.debugDescription)"
        case .valueNotFound(let type, let context):
            return "valueNotFound \(type) at \(path(context)): \(context.debugDescription)"
        case .dataCorrupted(let context): return "dataCorrupted at \(path(context)): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}
