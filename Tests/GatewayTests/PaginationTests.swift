import AstroDomain
import Foundation
import JOSE
import Testing

@testable import Gateway

/// `limit` and `cursor` of the list routes: bounded, and a cursor is read back only by the list
/// that wrote it.
@Suite("Pagination")
struct PaginationTests {
    func code(_ body: () throws -> some Any) -> String? {
        do {
            _ = try body()
            return nil
        } catch let problem as Problem {
            #expect(problem.status == 400)
            return problem.code.rawValue
        } catch {
            return "\(error)"
        }
    }

    @Test func theLimitIsOneToAHundredAndTwentyByDefault() throws {
        #expect(try Pagination.limit([]) == 20)
        #expect(try Pagination.limit(["1"]) == 1)
        #expect(try Pagination.limit(["100"]) == 100)
        #expect(try Pagination.limit(["007"]) == 7)
        for bad in [["0"], ["101"], ["1000"], ["-1"], ["+5"], ["5 "], [""], ["abc"], ["1e2"], ["2", "3"], ["٣"]] {
            #expect(code { try Pagination.limit(bad) } == "invalid-limit", "\(bad)")
        }
    }

    @Test func aCursorRoundTripsForItsOwnListOnly() throws {
        let profiles = Pagination.cursor(kind: "p", "Мама 👩")
        #expect(try Pagination.cursor([profiles], kind: "p").map(Pagination.profileName) == "Мама 👩")
        #expect(code { try Pagination.cursor([profiles], kind: "l") } == "invalid-cursor")
        #expect(try Pagination.cursor([], kind: "p") == nil)

        let ledger = Pagination.cursor(kind: "l", "42")
        #expect(try Pagination.cursor([ledger], kind: "l").map(Pagination.ledgerID) == 42)

        let id = ReportID.random()
        let reports = Pagination.cursor(kind: "r", "1732435500123457:\(id)")
        let position = try #require(try Pagination.cursor([reports], kind: "r").map(Pagination.reportPosition))
        #expect(position == ResourceStore.ReportPosition(micros: 1_732_435_500_123_457, id: id))
    }

    @Test func anythingElseIsAnInvalidCursor() {
        let encode = { (text: String) in Base64URL.encode(Array(text.utf8)) }
        let malformed: [[String]] = [
            ["!!!"], ["a"], [String(repeating: "A", count: 600)], ["cDpNZQ=="], [encode("p:")], [encode("p")],
            [encode("x:Me")], [Base64URL.encode([0x70, 0x3A, 0xFF, 0xFE])], [encode("p:Me"), encode("p:You")],
            // Base64url whose unused bits are set: another spelling of the same bytes.
            [String(encode("p:Me").dropLast()) + "R"],
        ]
        for cursor in malformed {
            #expect(code { try Pagination.cursor(cursor, kind: "p").map(Pagination.profileName) } == "invalid-cursor")
        }
        for name in [String(repeating: "x", count: 51), "a\u{0}b"] {
            #expect(code { try Pagination.cursor([encode("p:" + name)], kind: "p").map(Pagination.profileName) } != nil)
        }
        for position in ["0", "-1", "abc", "99999999999999999999", "1.5"] {
            #expect(code { try Pagination.ledgerID(Substring(position)) } == "invalid-cursor", "\(position)")
        }
        let id = ReportID.random()
        for position in [
            "1", "1:", ":\(id)", "x:\(id)", "9007199254740992:\(id)", "1:\(id):2", "1:{\(id)}",
            "1:\(id.description.replacingOccurrences(of: "-", with: ""))",
        ] {
            #expect(code { try Pagination.reportPosition(Substring(position)) } == "invalid-cursor", "\(position)")
        }
    }

    @Test func aSignedTransactionMustBeACompactJWS() {
        #expect(CompactJWS.hasCompactShape("eyJh.eyJi.c2ln"))
        #expect(CompactJWS.hasCompactShape("a-_b.c.d"))
        for bad in ["", "a.b", "a.b.c.d", "a..c", ".b.c", "a.b.", "a.b.c=", "a b.c.d", "a.b.c\n"] {
            #expect(!CompactJWS.hasCompactShape(bad), "\(bad)")
        }
    }
}
