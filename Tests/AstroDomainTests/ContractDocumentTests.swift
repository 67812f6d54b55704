import Foundation
import Testing

@testable import AstroDomain

/// CONTRACT.md and the code name the same job and event types: the first column of the table
/// under "## Job types" is `JobType.all` and that under "## Event types" is `EventType.all`,
/// each name in backticks, in the same order — no extra, none missing.
@Suite struct ContractDocumentTests {
    /// The repository's CONTRACT.md, found from this file (Tests/AstroDomainTests/…).
    static let document: String? = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return try? String(contentsOf: root.appendingPathComponent("CONTRACT.md"), encoding: .utf8)
    }()

    @Test func jobTypesAreJobTypeAll() throws {
        let names = try Self.firstColumn(under: "## Job types")
        Self.expect(names, equal: JobType.all.map(\.rawValue), section: "Job types", source: "JobType.all")
    }

    @Test func eventTypesAreEventTypeAll() throws {
        let names = try Self.firstColumn(under: "## Event types")
        Self.expect(names, equal: EventType.all.map(\.rawValue), section: "Event types", source: "EventType.all")
    }

    /// Every event the job types table names for a job is an event type of the contract.
    @Test func theJobTypesTableNamesOnlyContractEvents() throws {
        let rows = try Self.rows(under: "## Job types")
        let known = Set(EventType.all.map(\.rawValue))
        for row in rows {
            let events = try #require(row.last)
            for name in Self.backticked(events) { #expect(known.contains(name), "\(row[0]) names \(name)") }
        }
    }

    @Test func theParserReadsTablesOnly() throws {
        let text = """
            ## Job types

            Some text with `not.a.row`.

            | job type | what |
            |---|---|
            | `a.b` | x `c.d` |
            | `e.f` | y |

            After the table: | `g.h` | is not a row.
            ## Event types
            """
        #expect(try Self.firstColumn(under: "## Job types", in: text) == ["a.b", "e.f"])
        #expect(throws: ContractParseError.self) { try Self.firstColumn(under: "## Event types", in: text) }
        #expect(throws: ContractParseError.self) { try Self.firstColumn(under: "## Queues", in: text) }
    }

    // MARK: - Reading the document

    struct ContractParseError: Error, CustomStringConvertible {
        var description: String
    }

    private static func expect(_ names: [String], equal expected: [String], section: String, source: String) {
        let missing = expected.filter { !names.contains($0) }
        let extra = names.filter { !expected.contains($0) }
        #expect(missing.isEmpty, "CONTRACT.md's \(section) table lacks \(missing), which \(source) has")
        #expect(extra.isEmpty, "CONTRACT.md's \(section) table lists \(extra), which \(source) does not have")
        #expect(Set(names).count == names.count, "CONTRACT.md's \(section) table lists a name twice: \(names)")
        if missing.isEmpty, extra.isEmpty {
            #expect(names == expected, "CONTRACT.md's \(section) table is not in the order of \(source)")
        }
    }

    /// The names in the first column of the first table after `heading`: each cell must be one
    /// backticked name.
    static func firstColumn(under heading: String, in text: String? = document) throws -> [String] {
        try rows(under: heading, in: text).map { row in
            let names = backticked(row[0])
            guard names.count == 1, row[0] == "`\(names[0])`" else {
                throw ContractParseError(description: "\(heading): a first cell is not one `name`: \(row[0])")
            }
            return names[0]
        }
    }

    /// The body rows (cells trimmed) of the first Markdown table after the line `heading`, before
    /// the next heading.
    static func rows(under heading: String, in text: String? = document) throws -> [[String]] {
        guard let text else { throw ContractParseError(description: "CONTRACT.md is missing from the repository root") }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces) == heading }) else {
            throw ContractParseError(description: "no heading \"\(heading)\"")
        }
        var table: [String] = []
        for line in lines[(start + 1)...] {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("#") { break }
            if trimmed.hasPrefix("|") {
                table.append(trimmed)
            } else if !table.isEmpty {
                break
            }
        }
        // A header row, a |---| separator, then the rows.
        guard table.count >= 2, table[1].allSatisfy({ "|-: ".contains($0) }) else {
            throw ContractParseError(description: "no table under \"\(heading)\"")
        }
        return table.dropFirst(2).map { line in
            line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
        }
    }

    /// Every `…` span of a cell.
    static func backticked(_ cell: String) -> [String] {
        cell.split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }
}
