import AstroDomain
import Foundation
import Testing

@testable import Gateway

/// `PUT /v1/consent`'s body: what is accepted, and the code of each refusal.
@Suite struct ConsentAnswerTests {
    static let now = Date(timeIntervalSince1970: 1_795_000_000)

    static func parse(_ json: String) throws(Problem) -> ConsentAnswer {
        try ConsentAnswer(body: Data(json.utf8), now: now)
    }

    static func code(_ json: String) -> String? {
        do {
            _ = try parse(json)
            return nil
        } catch {
            return error.code.rawValue
        }
    }

    @Test func aWellFormedAnswerIsRead() throws {
        let answeredAt = ISO8601.string(from: Self.now.addingTimeInterval(-3600))
        let answer = try Self.parse(
            #"{"consented": true, "textVersion": "2026-11.a_b", "answeredAt": "\#(answeredAt)", "extra": 1}"#
        )
        #expect(
            answer
                == ConsentAnswer(
                    consented: true,
                    textVersion: "2026-11.a_b",
                    answeredAt: Self.now.addingTimeInterval(-3600)
                )
        )
        let withdrawn = try Self.parse(#"{"consented": false, "textVersion": "1", "answeredAt": "\#(answeredAt)"}"#)
        #expect(!withdrawn.consented)
        // A phone's clock a few minutes ahead is accepted.
        let ahead = ISO8601.string(from: Self.now.addingTimeInterval(240))
        #expect(throws: Never.self) {
            try Self.parse(#"{"consented": true, "textVersion": "1", "answeredAt": "\#(ahead)"}"#)
        }
    }

    @Test func everyRefusalHasItsCode() {
        let at = ISO8601.string(from: Self.now)
        #expect(Self.code("[]") == "invalid-json")
        #expect(Self.code("not json") == "invalid-json")
        #expect(Self.code(#"{"textVersion": "1", "answeredAt": "\#(at)"}"#) == "missing-field")
        #expect(Self.code(#"{"consented": "yes", "textVersion": "1", "answeredAt": "\#(at)"}"#) == "invalid-field-type")
        #expect(Self.code(#"{"consented": true, "answeredAt": "\#(at)"}"#) == "missing-field")
        #expect(Self.code(#"{"consented": true, "textVersion": 3, "answeredAt": "\#(at)"}"#) == "invalid-field-type")
        #expect(Self.code(#"{"consented": true, "textVersion": "", "answeredAt": "\#(at)"}"#) == "invalid-text-version")
        #expect(
            Self.code(#"{"consented": true, "textVersion": "v 1", "answeredAt": "\#(at)"}"#) == "invalid-text-version"
        )
        let long = String(repeating: "a", count: 33)
        #expect(
            Self.code(#"{"consented": true, "textVersion": "\#(long)", "answeredAt": "\#(at)"}"#)
                == "invalid-text-version"
        )
        #expect(Self.code(#"{"consented": true, "textVersion": "1"}"#) == "missing-field")
        #expect(
            Self.code(#"{"consented": true, "textVersion": "1", "answeredAt": "yesterday"}"#) == "invalid-answered-at"
        )
        let future = ISO8601.string(from: Self.now.addingTimeInterval(3600))
        #expect(
            Self.code(#"{"consented": true, "textVersion": "1", "answeredAt": "\#(future)"}"#) == "invalid-answered-at"
        )
        let old = ISO8601.string(from: Self.now.addingTimeInterval(-400 * 86_400))
        #expect(
            Self.code(#"{"consented": true, "textVersion": "1", "answeredAt": "\#(old)"}"#) == "invalid-answered-at"
        )
    }
}
