import Foundation
import Testing

/// ARCHITECTURE.md's module table is the rule for what each module may import: every module in
/// Sources is listed, and none imports a module (of this package or a dependency) its row does
/// not allow. A new import is a decision written down, not an accident.
@Suite struct ArchitectureTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Modules of the platform every module may use.
    static let platform: Set<String> = [
        "Foundation", "FoundationEssentials", "FoundationNetworking", "Glibc", "Musl", "Darwin", "Dispatch",
        "Synchronization",
    ]

    /// The module table: module name → the modules it may import.
    static func allowedImports() throws -> [String: Set<String>] {
        let text = try String(contentsOf: root.appendingPathComponent("ARCHITECTURE.md"), encoding: .utf8)
        guard let start = text.range(of: "\n## Modules\n") else {
            throw ArchitectureError("ARCHITECTURE.md has no '## Modules' section")
        }
        var table: [String: Set<String>] = [:]
        for line in text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## ") { break }
            guard line.hasPrefix("| `") else { continue }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            // | `Module` | layer | its job | may import |
            guard cells.count >= 5 else { throw ArchitectureError("a module row has too few cells: \(line)") }
            let module = cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            let allowed = Self.backticked(cells[4])
            guard table.updateValue(allowed, forKey: module) == nil else {
                throw ArchitectureError("\(module) is listed twice")
            }
        }
        return table
    }

    static func backticked(_ cell: String) -> Set<String> {
        var names: Set<String> = []
        var rest = cell[...]
        while let open = rest.firstIndex(of: "`") {
            let after = rest.index(after: open)
            guard let close = rest[after...].firstIndex(of: "`") else { break }
            names.insert(String(rest[after..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return names
    }

    /// The modules each Sources folder's Swift files import.
    static func actualImports() throws -> [String: Set<String>] {
        let sources = root.appendingPathComponent("Sources")
        var result: [String: Set<String>] = [:]
        for module in try FileManager.default.contentsOfDirectory(atPath: sources.path) {
            let folder = sources.appendingPathComponent(module)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory), isDirectory.boolValue
            else { continue }
            var imports: Set<String> = []
            let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)
            while let file = files?.nextObject() as? URL {
                guard file.pathExtension == "swift" || file.lastPathComponent == "module.modulemap" else { continue }
                let text = try String(contentsOf: file, encoding: .utf8)
                // Lines inside multi-line string literals (help texts) are prose, not imports.
                var inString = false
                for line in text.split(separator: "\n") {
                    let quotes = line.components(separatedBy: "\"\"\"").count - 1
                    defer { if quotes % 2 == 1 { inString.toggle() } }
                    if inString || quotes > 0 { continue }
                    let words = line.split(separator: " ").filter { !$0.hasPrefix("@") }
                    guard let keyword = words.firstIndex(where: { $0 == "import" }), keyword <= 1,
                        keyword + 1 < words.count
                    else { continue }
                    if keyword == 1, !["package", "public", "internal"].contains(words[0]) { continue }
                    let name = String(words[keyword + 1].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
                    if !Self.platform.contains(name) { imports.insert(name) }
                }
            }
            result[module] = imports
        }
        return result
    }

    @Test func everyModuleIsListedAndImportsOnlyWhatItsRowAllows() throws {
        let allowed = try Self.allowedImports()
        let actual = try Self.actualImports()
        #expect(
            Set(allowed.keys) == Set(actual.keys),
            "listed but missing: \(Set(allowed.keys).subtracting(actual.keys).sorted()); in Sources but not listed: \(Set(actual.keys).subtracting(allowed.keys).sorted())"
        )
        for (module, imports) in actual.sorted(by: { $0.key < $1.key }) {
            let extra = imports.subtracting(allowed[module] ?? [])
            #expect(extra.isEmpty, "\(module) imports \(extra.sorted()), which ARCHITECTURE.md does not allow it")
        }
    }

    /// Top-level code is main-actor isolated: a closure written in a `main.swift` is inferred to
    /// be too, and traps (SIGILL) when the runtime or a logger calls it on another thread. The
    /// report-worker shipped such a crash (issue 29, F10), so every executable's `main.swift` is
    /// imports, comments and one call, with no braces: the wiring lives in a type of its own.
    @Test func noExecutableWritesAClosureInTopLevelCode() throws {
        let sources = Self.root.appendingPathComponent("Sources")
        var checked = 0
        for module in try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted() {
            let main = sources.appendingPathComponent(module).appendingPathComponent("main.swift")
            guard let text = try? String(contentsOf: main, encoding: .utf8) else { continue }
            checked += 1
            let code = text.split(separator: "\n").map { line in
                line.range(of: "//").map { String(line[..<$0.lowerBound]) } ?? String(line)
            }
            for (number, line) in code.enumerated() where line.contains("{") || line.contains("}") {
                Issue.record("Sources/\(module)/main.swift:\(number + 1) has a brace in top-level code: \(line)")
            }
        }
        #expect(checked >= 7, "expected the executables' main.swift files, found \(checked)")
    }

    @Test func theDomainModelImportsNoInputOrOutput() throws {
        // The rule the table encodes for the two modules every other one builds on.
        let allowed = try Self.allowedImports()
        #expect(allowed["AstroDomain"] == ["UUIDText", "CivilCalendar"])
        #expect(allowed["UUIDText"] == [])
        #expect(allowed["CivilCalendar"] == [])
    }
}

struct ArchitectureError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
