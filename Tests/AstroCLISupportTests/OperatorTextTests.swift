import AMQP
import AstroCLISupport
import Foundation
import Testing

@Suite struct RedactionTests {
    static let jws =
        "eyJhbGciOiJFUzI1NiIsIng1YyI6WyJNSUlCIl19.eyJ0cmFuc2FjdGlvbklkIjoiMjAwMDAwMDAwMCJ9.c2lnbmF0dXJlLWJ5dGVz"

    @Test func secretKeysAreRedactedAtAnyDepth() throws {
        let body = Data(
            """
            {"jobId":"7d1c3c8e-1b9a-4f5e-9d55-0c2f7f2b1a10","userId":"u1",
             "signedTransaction":"abc","nested":{"access_token":"t0k3n","list":[{"Password":"p"}]},
             "profile":{"name":"Olena"}}
            """.utf8
        )
        let shown = Redaction.body(body)
        #expect(!shown.contains("abc\""))
        #expect(!shown.contains("t0k3n"))
        #expect(!shown.contains("\"p\""))
        #expect(shown.contains("[redacted: 3 bytes]"))
        #expect(shown.contains("Olena"))
        #expect(shown.contains("7d1c3c8e-1b9a-4f5e-9d55-0c2f7f2b1a10"))
    }

    @Test func jwsLookingValuesAreRedactedWhateverTheirKey() {
        let shown = Redaction.body(Data("{\"payload\":\"\(Self.jws)\",\"note\":\"a.b.c\"}".utf8))
        #expect(!shown.contains(Self.jws))
        #expect(shown.contains("a.b.c"))
        #expect(Redaction.body(Data(Self.jws.utf8)).hasPrefix("[redacted:"))
        #expect(Redaction.looksLikeSecret("Bearer abc"))
        #expect(!Redaction.looksLikeSecret("chart.calculate.dead"))
    }

    @Test func keyMatchingIgnoresCaseAndSeparators() {
        for key in ["signedPayload", "X-API-KEY", "appAccountToken", "client_secret", "Authorization"] {
            #expect(Redaction.isSecretKey(key), "\(key)")
        }
        for key in ["jobId", "userId", "profile", "transactionId", "area"] {
            #expect(!Redaction.isSecretKey(key), "\(key)")
        }
    }

    @Test func textBodiesHaveControlCharactersEscapedAndAreCut() {
        let shown = Redaction.body(Data("not json \u{1B}[2J".utf8))
        #expect(shown == "not json \\u{1b}[2J")
        let long = Redaction.body(Data(String(repeating: "x", count: Redaction.maximumShownBytes + 10).utf8))
        #expect(long.hasSuffix("(10 more bytes not shown)"))
    }

    @Test func headersAreFlattenedAndRedacted() {
        let death: AMQPFieldValue = .array([.table(["count": .int(1), "reason": .string("rejected")])])
        #expect(Redaction.header("x-death", death) == "[{count=1 reason=rejected}]")
        #expect(Redaction.header("authorization", .string("x")) == "[redacted]")
        #expect(Redaction.header("x-astro-reason", .string(Self.jws)).hasPrefix("[redacted:"))
    }
}

@Suite struct OperatorOptionTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func sinceTakesDurationsAndTimes() throws {
        #expect(try SinceOption.parse("30m", now: Self.now) == Self.now.addingTimeInterval(-1800))
        #expect(try SinceOption.parse("2h", now: Self.now) == Self.now.addingTimeInterval(-7200))
        #expect(try SinceOption.parse("7d", now: Self.now) == Self.now.addingTimeInterval(-7 * 86400))
        #expect(try SinceOption.parse("2026-11-24T10:00:00Z") == Date(timeIntervalSince1970: 1_795_514_400))
        #expect(try SinceOption.parse("2026-11-24") == Date(timeIntervalSince1970: 1_795_478_400))
    }

    @Test func sinceRefusesEverythingElse() {
        for text in ["", "soon", "-5m", "5w", "99999d", "m", String(repeating: "1", count: 50) + "s"] {
            #expect(throws: OperatorInputError.self, "\(text)") { try SinceOption.parse(text, now: Self.now) }
        }
    }

    @Test func operatorComesFromTheOptionThenTheEnvironment() throws {
        #expect(try OperatorIdentity.resolve(option: "olena", environment: ["USER": "root"]) == "olena")
        #expect(
            try OperatorIdentity.resolve(option: nil, environment: ["ASTRO_OPERATOR": "ops", "USER": "root"]) == "ops"
        )
        #expect(
            try OperatorIdentity.resolve(option: nil, environment: ["SUDO_USER": "ivan", "USER": "root"]) == "ivan"
        )
        #expect(try OperatorIdentity.resolve(option: nil, environment: ["USER": " "]) == "unknown")
        #expect(throws: OperatorInputError.self) { try OperatorIdentity.resolve(option: "", environment: [:]) }
        #expect(throws: OperatorInputError.self) {
            try OperatorIdentity.resolve(option: String(repeating: "a", count: 101), environment: [:])
        }
        #expect(throws: OperatorInputError.self) { try OperatorIdentity.resolve(option: "a\u{7}", environment: [:]) }
    }

    @Test func reasonsAreTrimmedAndBounded() throws {
        #expect(try OperatorIdentity.reason("  fixed the ephemeris \n") == "fixed the ephemeris")
        #expect(try OperatorIdentity.reason("   ") == nil)
        #expect(try OperatorIdentity.reason(nil) == nil)
        #expect(throws: OperatorInputError.self) { try OperatorIdentity.reason(String(repeating: "x", count: 501)) }
    }

    @Test func confirmationNeedsAYes() {
        #expect(Confirmation.accepts("yes"))
        #expect(Confirmation.accepts(" Y "))
        #expect(!Confirmation.accepts("no"))
        #expect(!Confirmation.accepts(""))
        #expect(!Confirmation.accepts(nil))
    }

    @Test func tablesPadCutAndEscape() {
        let table = TextTable.render(
            header: ["JOB", "WHY"],
            rows: [["a", String(repeating: "r", count: 100)], ["bbbb", "line\nbreak \u{1B}"]]
        )
        let lines = table.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines[0] == "JOB   WHY")
        #expect(lines[1].hasSuffix("…"))
        #expect(lines[1].count == 6 + TextTable.maximumCellWidth)
        #expect(lines[2] == "bbbb  line break \\u{1b}")
    }
}
