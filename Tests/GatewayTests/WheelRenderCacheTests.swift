import AstroDomain
import Foundation
import Testing

@testable import Gateway

/// The drawn wheels kept by `ETag`: bounded by count and bytes, oldest out first, a failed
/// drawing kept nowhere; and `If-None-Match` read as RFC 9110 says.
@Suite("Wheel render cache")
struct WheelRenderCacheTests {
    struct Refused: Error {}

    @Test func keepsAtMostItsCountAndBytesOldestOutFirst() throws {
        let cache = WheelRenderCache(maxEntries: 3, maxBytes: 10)
        var draws = 0
        func draw(_ text: String) -> () throws -> String {
            {
                draws += 1
                return text
            }
        }
        #expect(try cache.svg(etag: "a", draw: draw("aaa")) == "aaa")
        #expect(try cache.svg(etag: "a", draw: draw("other")) == "aaa")
        #expect(draws == 1)
        _ = try cache.svg(etag: "b", draw: draw("bbb"))
        _ = try cache.svg(etag: "c", draw: draw("ccc"))
        #expect(cache.usage.entries == 3 && cache.usage.bytes == 9)
        // A fourth entry pushes out the oldest ("a"): the count bound.
        _ = try cache.svg(etag: "d", draw: draw("dd"))
        #expect(cache.usage.entries == 3 && cache.usage.bytes == 8)
        draws = 0
        #expect(try cache.svg(etag: "a", draw: draw("a2")) == "a2")
        #expect(draws == 1)
        // The byte bound: eight bytes kept, a six-byte wheel pushes out until it fits.
        _ = try cache.svg(etag: "e", draw: draw("eeeeee"))
        #expect(cache.usage.bytes <= 10)
        // Larger than the whole cache: drawn, answered, not kept.
        #expect(try cache.svg(etag: "big", draw: draw(String(repeating: "x", count: 11))).count == 11)
        #expect(cache.usage.bytes <= 10)
        draws = 0
        _ = try cache.svg(etag: "big", draw: draw("x"))
        #expect(draws == 1)
    }

    @Test func aFailedDrawingIsRethrownAndNotKept() throws {
        let cache = WheelRenderCache(maxEntries: 4, maxBytes: 100)
        #expect(throws: Refused.self) { try cache.svg(etag: "a") { throw Refused() } }
        #expect(cache.usage.entries == 0)
        #expect(try cache.svg(etag: "a") { "drawn" } == "drawn")
    }

    @Test func ifNoneMatchComparesWeaklyAndBoundsTheHeader() {
        let tag = "\"0123456789abcdef0123456789abcdef\""
        #expect(ETagMatch.matches(tag, tag))
        #expect(ETagMatch.matches("W/\(tag)", tag))
        #expect(ETagMatch.matches("\"x\", \(tag)", tag))
        #expect(ETagMatch.matches("*", tag))
        #expect(!ETagMatch.matches("\"0123\"", tag))
        #expect(!ETagMatch.matches("", tag))
        #expect(!ETagMatch.matches(String(repeating: "\"x\", ", count: 300) + tag, tag))
    }
}
