import Foundation
import Testing

@testable import Postgres

@Suite struct MigrationTests {
    private func withDirectory(_ files: [String: String], _ body: (URL) throws -> Void) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for (name, text) in files {
            try text.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        try body(directory)
    }

    @Test func loadsInVersionOrderAndIgnoresOtherFiles() throws {
        try withDirectory([
            "0010_add_reports.sql": "CREATE TABLE reports ();",
            "0002_users.sql": "CREATE TABLE users ();",
            "0001_schema_v1.sql": "CREATE TABLE charts ();",
            "README.md": "not a migration",
        ]) { directory in
            let migrations = try Migration.load(directory: directory)
            #expect(migrations.map(\.version) == [1, 2, 10])
            #expect(migrations.map(\.name) == ["schema_v1", "users", "add_reports"])
            #expect(migrations[0].sql == "CREATE TABLE charts ();")
        }
    }

    @Test func rejectsBadNames() throws {
        for bad in ["schema.sql", "v1_schema.sql", "0001.sql", "0001_.sql", "0001_bad name.sql"] {
            try withDirectory(["0001_ok.sql": "", bad: ""]) { directory in
                let error = #expect(throws: PostgresError.self) { try Migration.load(directory: directory) }
                #expect(error?.kind == .migration)
                #expect(error?.message.contains(bad) == true, "\(bad)")
            }
        }
    }

    @Test func rejectsDuplicateVersions() throws {
        try withDirectory(["0003_a.sql": "", "3_b.sql": ""]) { directory in
            let error = #expect(throws: PostgresError.self) { try Migration.load(directory: directory) }
            #expect(error?.kind == .migration)
            #expect(error?.message.contains("0003_a.sql") == true)
            #expect(error?.message.contains("3_b.sql") == true)
        }
    }

    @Test func missingDirectoryIsAMigrationError() {
        let error = #expect(throws: PostgresError.self) {
            try Migration.load(directory: URL(fileURLWithPath: "/nonexistent/migrations-\(UUID().uuidString)"))
        }
        #expect(error?.kind == .migration)
    }

    @Test func checksumIsStableAndSensitive() {
        let a = Migration(version: 1, name: "a", sql: "CREATE TABLE t ();")
        #expect(a.checksum == Migration(version: 9, name: "b", sql: "CREATE TABLE t ();").checksum)
        #expect(a.checksum != Migration(version: 1, name: "a", sql: "CREATE TABLE t ( );").checksum)
        #expect(a.checksum.count == 16)
        // FNV-1a 64 reference values.
        #expect(Migration(version: 1, name: "x", sql: "").checksum == "cbf29ce484222325")
        #expect(Migration(version: 1, name: "x", sql: "a").checksum == "af63dc4c8601ec8c")
    }
}
