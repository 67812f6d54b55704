import Foundation
import Testing

@testable import AstroDomain

/// The catalogue of error codes: each code defined once, mapped once to an HTTP status, and
/// CONTRACT.md's "Error codes" table naming the same codes (both ways).
@Suite struct ErrorCodeTests {
    @Test func everyCodeIsDefinedOnce() {
        let codes = ErrorCode.catalogue.map(\.code.rawValue)
        let repeated = Dictionary(grouping: codes, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        #expect(repeated.isEmpty, "catalogued twice: \(repeated)")
        #expect(codes.count > 150, "the catalogue has only \(codes.count) codes")
        for code in codes {
            #expect(code.range(of: "^[a-z0-9]+(-[a-z0-9]+)*$", options: .regularExpression) != nil, "\(code)")
        }
    }

    /// Every `public static let x = ErrorCode(fixed: …)` is in `catalogue`: a code defined but
    /// not catalogued would have no status and no place in CONTRACT.md.
    @Test func everyStaticMemberIsCatalogued() throws {
        let source = try Self.source("Sources/AstroDomain/ErrorCode+Catalogue.swift")
        let defined = Self.matches(#"ErrorCode\(fixed: "([a-z0-9-]+)"\)"#, in: source)
        let catalogued = Set(ErrorCode.catalogue.map(\.code.rawValue))
        #expect(defined.count == catalogued.count, "\(defined.count) defined, \(catalogued.count) catalogued")
        #expect(Set(defined).subtracting(catalogued).isEmpty, "not catalogued: \(Set(defined).subtracting(catalogued))")
    }

    @Test func statusesAreHTTPErrorStatuses() {
        for definition in ErrorCode.catalogue {
            #expect((400...599).contains(definition.httpStatus), "\(definition.code): \(definition.httpStatus)")
        }
        #expect(ErrorCode.profileNotFound.httpStatus == 404)
        #expect(ErrorCode.chartNotFound.httpStatus == 409)
        #expect(ErrorCode.invalidJSON.httpStatus == 400)
        #expect(ErrorCode.rateLimited.httpStatus == 429)
    }

    @Test func familiesMakeAndRecognizeTheirCodes() {
        #expect(ErrorCode.appStore("unauthorized").rawValue == "appstore-unauthorized")
        #expect(ErrorCode.llm("bad-request").rawValue == "llm-bad-request")
        #expect(ErrorCode.image("content-policy").rawValue == "image-content-policy")
        #expect(ErrorCode.databaseError(sqlState: "22P02").rawValue == "database-error-22P02")
        #expect(ErrorCode.http(status: 415).rawValue == "http-415")
        #expect(ErrorCode.appStore("unauthorized").family == .appStore)
        #expect(ErrorCode.databaseError(sqlState: "22P02").family == .databaseError)
        #expect(ErrorCode.databaseError(sqlState: "22P02").httpStatus == 500)
        #expect(ErrorCode.http(status: 415).httpStatus == 415)
        #expect(ErrorCode.llm("unauthorized").httpStatus == 502)
        // A catalogued code is not a family's, even where its name starts like one.
        #expect(ErrorCode.databaseError.family == nil)
        #expect(ErrorCode.imageInvalidAnswer.family == nil)
        #expect(ErrorCode.llmRejectedAnswer.family == nil)
        // A bare prefix is no code.
        #expect(!ErrorCode(rawValue: "llm-").isKnown)
        #expect(!ErrorCode(rawValue: "no-such-code").isKnown)
        #expect(ErrorCode(rawValue: "no-such-code").httpStatus == 500)
    }

    @Test func problemFieldsComeFromTheCode() {
        #expect(ErrorCode.notFound.problemType == "https://astrosvitla.app/problems/not-found")
        #expect(ErrorCode.notFound.problemTitle == "Not found")
        #expect(ErrorCode.profileNotFound.problemTitle == "Not found")
        #expect(ErrorCode.reportInProgress.problemTitle == "Conflict")
        // One title per status: no status is titled two ways.
        var titles: [Int: Set<String>] = [:]
        for definition in ErrorCode.catalogue {
            titles[definition.httpStatus, default: []].insert(definition.code.problemTitle)
        }
        #expect(titles.values.allSatisfy { $0.count == 1 })
    }

    @Test func onlyClientErrorsAboutTheRequestRefuseTheUsersRequest() {
        // What the user asked: the job ends failed.
        for code: ErrorCode in [.duplicateProfileName, .storyNotFound, .creditNotFound, .userDeleted] {
            #expect(code.refusesTheUsersRequest, "\(code)")
        }
        // A broken message, a server-side failure, a family's code or an unknown one: dead.
        for code: ErrorCode in [
            .invalidPayload, .missingJobID, .jobIDReused, .messageTooLarge, .storedDataUnreadable,
            .retriesExhausted, .llm("unauthorized"), ErrorCode(rawValue: "no-such-code"),
        ] {
            #expect(!code.refusesTheUsersRequest, "\(code)")
        }
    }

    @Test func aJobErrorKeepsTheWireString() throws {
        let error = JobError(code: .chartNotFound, message: "no chart")
        #expect(error.code == "chart-not-found")
        #expect(error.errorCode == .chartNotFound)
        let data = try JSONEncoder().encode(error)
        #expect(String(decoding: data, as: UTF8.self).contains(#""code":"chart-not-found""#))
        #expect(try JSONDecoder().decode(ErrorCode.self, from: Data(#""zodiac-mismatch""#.utf8)) == .zodiacMismatch)
    }

    /// The typed code lists of AstroDomain name only catalogued codes.
    @Test func typedCodeListsAreCatalogued() {
        for code in ErrorCode.chartInputCodes + ErrorCode.chartJobCodes + RestoreCode.allCases {
            #expect(code.definition != nil, "\(code) is not catalogued")
        }
        for code in [PartnerRule.notAllowed, PartnerRule.sameProfile, PartnerRule.notFound, PartnerRule.chartNotFound] {
            #expect(code.definition != nil, "\(code) is not catalogued")
        }
        #expect(ChartResultQuota.code.definition != nil)
    }

    // MARK: - CONTRACT.md

    /// Backticked words of the table that are not codes: field and column names the rows quote.
    static let notCodes: Set<String> = ["info", "writer", "illustrator", "reason", "dead", "failed"]

    /// Every code CONTRACT.md's "Error codes" table names is catalogued (or a family's), and
    /// every catalogued code and family appears in the table.
    @Test func theContractTableIsTheCatalogue() throws {
        let rows = try ContractDocumentTests.rows(under: "## Error codes")
        let words = rows.flatMap { row in row.dropFirst().flatMap(ContractDocumentTests.backticked) }
        let codeLike = words.filter { $0.range(of: Self.codePattern, options: .regularExpression) != nil }
        let patterns = Set(ErrorCode.Family.allCases.map(\.pattern))
        var unknown: [String] = []
        for word in codeLike where !Self.notCodes.contains(word) && !patterns.contains(word) {
            if !ErrorCode(rawValue: word).isKnown { unknown.append(word) }
        }
        #expect(unknown.isEmpty, "CONTRACT.md's Error codes table names codes the catalogue lacks: \(unknown)")
        let named = Set(codeLike)
        let missing = ErrorCode.catalogue.map(\.code.rawValue).filter { !named.contains($0) }
        #expect(missing.isEmpty, "CONTRACT.md's Error codes table lacks catalogued codes: \(missing)")
        let missingFamilies = patterns.subtracting(named)
        #expect(missingFamilies.isEmpty, "CONTRACT.md's Error codes table lacks the families \(missingFamilies)")
        for word in Self.notCodes {
            #expect(ErrorCode(rawValue: word).definition == nil, "\(word) is a code: take it out of notCodes")
        }
    }

    /// The shape of a code or a family pattern: lower-case words joined by hyphens, the last
    /// possibly `<kind>`.
    static let codePattern = "^[a-z0-9]+(-[a-z0-9]+)*(-<[A-Za-z]+>)?$"

    @Test func theContractCheckSeesUnknownCodes() throws {
        let text = """
            ## Error codes

            | where | codes |
            |---|---|
            | jobs | `invalid-json`, `no-such-code`, `appstore-<kind>`, `chart.calculate` |
            """
        let rows = try ContractDocumentTests.rows(under: "## Error codes", in: text)
        let words = rows.flatMap { $0.dropFirst().flatMap(ContractDocumentTests.backticked) }
            .filter { $0.range(of: Self.codePattern, options: .regularExpression) != nil }
        #expect(words == ["invalid-json", "no-such-code", "appstore-<kind>"])
        #expect(words.filter { !ErrorCode(rawValue: $0).isKnown && !$0.contains("<") } == ["no-such-code"])
    }

    // MARK: - Reading sources

    static func source(_ path: String) throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    static func matches(_ pattern: String, in text: String) -> [String] {
        let regex = try! NSRegularExpression(pattern: pattern)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
    }
}
