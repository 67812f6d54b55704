import Foundation
import Testing

@testable import Gateway

/// The story routes' pure parts: which stored picture paths are ever opened, and list cursors.
@Suite("Story routes")
struct StoryRoutesTests {
    @Test func onlyPlainRelativePathsOfKnownPictureTypesAreOpened() throws {
        #expect(try IllustrationFiles.check("0b7e/page-01.png") == "image/png")
        #expect(try IllustrationFiles.check("0b7e/page-02.SVG") == "image/svg+xml")
        #expect(try IllustrationFiles.check("a/b/page.jpeg") == "image/jpeg")
        #expect(try IllustrationFiles.check("page.webp") == "image/webp")
        for refused in [
            "/etc/passwd.png", "../secret.png", "a/../../b.png", "a/./b.png", "a//b.png", "a/", "", "a/b.png/",
            "a\u{0}.png", String(repeating: "a", count: 600) + ".png",
        ] {
            #expect(throws: IllustrationFiles.Failure.refusedPath(refused), "\(refused.debugDescription)") {
                try IllustrationFiles.check(refused)
            }
        }
        for unknown in ["a/page.exe", "a/page", "a/png", "a/page.png.sh", "a/.png.", "a/page.html"] {
            #expect(throws: IllustrationFiles.Failure.unknownType(unknown), "\(unknown)") {
                try IllustrationFiles.check(unknown)
            }
        }
    }

    @Test func aCursorReadsBackAndNothingElseIsOne() throws {
        let id = UUID()
        let cursor = StoryStore.Cursor(createdAtMicros: 1_767_225_600_123_456, id: id)
        let parsed = try #require(StoryStore.Cursor(cursor.text))
        #expect(parsed == cursor)
        #expect(!cursor.text.contains("=") && !cursor.text.contains("/") && !cursor.text.contains("+"))
        for text in [
            "", "nonsense", Base64URL.encode(Array("12.not-a-uuid".utf8)),
            Base64URL.encode(Array("-1.\(id.uuidString)".utf8)), Base64URL.encode(Array("1.2.\(id.uuidString)".utf8)),
            Base64URL.encode(Array("99999999999999999999.\(id.uuidString)".utf8)),
            String(repeating: "A", count: 200),
        ] {
            #expect(StoryStore.Cursor(text) == nil, "\(text)")
        }
    }
}
