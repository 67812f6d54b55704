import Billing
import Foundation
import TestProcesses
import Testing

@Suite struct ZipWriterTests {
    /// Writes an archive and checks it with the system's own readers: `unzip -t` (when
    /// installed) and Python's zipfile, which verifies every CRC on `testzip`.
    @Test func anArchiveIsReadByUnzipAndPython() throws {
        var writer = ZipWriter(maxBytes: 1 << 20)
        let document = Data("{\"schemaVersion\":1,\"name\":\"Олена\"}".utf8)
        let picture = Data((0..<5_000).map { UInt8($0 % 251) })
        try writer.add("export.json", document)
        try writer.add("illustrations/abc/page-01.png", picture)
        try writer.add("empty.txt", Data())
        let archive = writer.finish()
        #expect(archive.count == writer.size)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("zip-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("test.zip")
        try archive.write(to: file)

        let python = try Self.run(
            "/usr/bin/env",
            [
                "python3", "-c",
                """
                import sys, zipfile, hashlib
                z = zipfile.ZipFile(sys.argv[1])
                assert z.testzip() is None
                for i in z.infolist():
                    print(i.filename, i.compress_type, i.file_size, hashlib.sha256(z.read(i)).hexdigest())
                """,
                file.path,
            ]
        )
        #expect(python.status == 0, "\(python.output)")
        let lines = python.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines.first?.hasPrefix("export.json 0 \(document.count) ") == true, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("illustrations/abc/page-01.png 0 5000 ") }, "\(lines)")
        #expect(lines.contains("empty.txt 0 0 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"))
        let read = try Self.run(
            "/usr/bin/env",
            [
                "python3", "-c",
                "import sys,zipfile;sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read('export.json').decode())",
                file.path,
            ]
        )
        #expect(read.output == String(decoding: document, as: UTF8.self))

        if FileManager.default.isExecutableFile(atPath: "/usr/bin/unzip") {
            let unzip = try Self.run("/usr/bin/unzip", ["-t", file.path])
            #expect(unzip.status == 0 && unzip.output.contains("No errors detected"), "\(unzip.output)")
        }
    }

    /// A corrupted byte is caught by the CRC: the check above can fail.
    @Test func aCorruptedEntryFailsPythonsCheck() throws {
        var writer = ZipWriter(maxBytes: 1 << 20)
        try writer.add("a.txt", Data(repeating: 0x41, count: 100))
        var archive = writer.finish()
        archive[30 + 5 + 10] ^= 0xFF
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("zip-\(UUID()).zip")
        defer { try? FileManager.default.removeItem(at: file) }
        try archive.write(to: file)
        let python = try Self.run(
            "/usr/bin/env",
            ["python3", "-c", "import sys,zipfile;print(zipfile.ZipFile(sys.argv[1]).testzip())", file.path]
        )
        #expect(python.output.trimmingCharacters(in: .whitespacesAndNewlines) == "a.txt")
    }

    @Test func boundsAndNamesAreEnforcedWithoutChangingTheArchive() throws {
        var writer = ZipWriter(maxBytes: 200)
        try writer.add("a", Data(repeating: 1, count: 10))
        let before = writer.finish()
        #expect(throws: ZipWriterError.tooLarge(limit: 200)) { try writer.add("b", Data(repeating: 2, count: 100)) }
        #expect(throws: ZipWriterError.duplicateName("a")) { try writer.add("a", Data()) }
        for bad in ["", "/etc/passwd", "../x", "a/../../b", "a//b", "a\\b", "./a"] {
            #expect(throws: ZipWriterError.invalidName(bad)) { try writer.add(bad, Data()) }
        }
        #expect(writer.finish() == before)
        #expect(before.count <= 200)
    }

    /// Runs a program (a `ChildProcess`: ended with the test, at most 60 s) and returns its exit
    /// status and standard output followed by its standard error.
    static func run(_ path: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try ProcessRunner.runWaiting(path, arguments, timeout: .seconds(60))
        return (result.status, result.output + result.error)
    }
}
