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

    @Test func aStoriesCursorReadsBackForItsOwnListOnly() throws {
        let id = UUID()
        let text = Pagination.timeCursor(kind: GatewayRoutes.storiesCursorKind, micros: 1_767_225_600_123_456, id: id)
        let position = try #require(
            try Pagination.cursor([text], kind: GatewayRoutes.storiesCursorKind).map(Pagination.timePosition)
        )
        #expect(position.micros == 1_767_225_600_123_456 && position.id == id)
        #expect(!text.contains("=") && !text.contains("/") && !text.contains("+"))
        #expect(throws: Problem.self) { try Pagination.cursor([text], kind: GatewayRoutes.childrenCursorKind) }
        for position in [
            "12:not-a-uuid", "-1:\(id.uuidString)", "1:2:\(id.uuidString)", "99999999999999999999:\(id.uuidString)",
        ] {
            #expect(throws: Problem.self, "\(position)") { try Pagination.timePosition(Substring(position)) }
        }
    }
}
