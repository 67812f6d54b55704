import Foundation
import TestProcesses
import Testing

@testable import Billing

@Suite struct ZipWriterTests {
    /// Writes an archive and checks it with the system's own readers: `unzip -t` (when
    /// installed) and Python's zipfile, which verifies every CRC on `testzip`.
    @Test func anArchiveIsReadByUnzipAndPython() throws {
        var writer = ZipWriter(maxBytes: 1 << 20)
        let document = Data("{\"schemaVersion\":1,\"name\":\"Олена\"}".utf8)
        let picture = Data((0..<5_000).map { UInt8($0 % 251) })
        var archive = try writer.add("export.json", document)
        // Streamed: the header first, then the content, as the export's pack writes a file (the
        // CRC-32 read from the header a twin writer made with `add`; Python checks it below).
        var twin = writer
        let crc = try twin.add("illustrations/abc/page-01.png", picture).subdata(in: 14..<18)
            .withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
        archive += try writer.addEntry("illustrations/abc/page-01.png", byteCount: picture.count, crc: crc)
        archive += picture
        archive += try writer.add("empty.txt", Data())
        #expect(writer.written == archive.count)
        archive += writer.finish()
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
        var archive = try writer.add("a.txt", Data(repeating: 0x41, count: 100))
        archive += writer.finish()
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
        let entry = try writer.add("a", Data(repeating: 1, count: 10))
        let before = writer.finish()
        let size = writer.size
        #expect(throws: ZipWriterError.tooLarge(limit: 200)) { try writer.add("b", Data(repeating: 2, count: 100)) }
        #expect(throws: ZipWriterError.tooLarge(limit: 200)) { try writer.addEntry("b", byteCount: 100, crc: 0) }
        #expect(throws: ZipWriterError.duplicateName("a")) { try writer.add("a", Data()) }
        for bad in ["", "/etc/passwd", "../x", "a/../../b", "a//b", "a\\b", "./a"] {
            #expect(throws: ZipWriterError.invalidName(bad)) { try writer.add(bad, Data()) }
        }
        #expect(writer.finish() == before && writer.size == size && writer.written == entry.count)
        #expect(entry.count + before.count == size && size <= 200)
        // What `addEntry` plans without the content is the size `add` reaches with it.
        var plan = ZipWriter(maxBytes: 200)
        _ = try plan.addEntry("a", byteCount: 10, crc: 0)
        #expect(plan.size == size)
    }

    /// The export's zip is stored in chunks as it is produced: every chunk full but the last,
    /// numbered from 0, together the stream as written, whatever the pieces written were.
    @Test func chunkedOutputCutsTheStreamIntoFullChunks() throws {
        let stream = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        for pieces in [[10_000], [1, 999, 0, 3_000, 6_000], [4_096, 4_096, 1_808], Array(repeating: 100, count: 100)] {
            var output = ChunkedOutput(size: 1_024)
            var chunks: [(seq: Int, data: Data)] = []
            var start = 0
            for piece in pieces {
                output.write(stream[start..<start + piece]) { chunks.append(($0, $1)) }
                start += piece
            }
            output.close { chunks.append(($0, $1)) }
            #expect(chunks.map(\.seq) == Array(0..<10), "\(pieces)")
            #expect(chunks.dropLast().allSatisfy { $0.data.count == 1_024 })
            #expect(chunks.last?.data.count == 10_000 - 9 * 1_024)
            #expect(chunks.reduce(Data()) { $0 + $1.data } == stream)
            #expect(output.bytes == 10_000 && output.chunks == 10)
        }
        // A stream that ends on a chunk has no empty last chunk; a failed store is not counted.
        var exact = ChunkedOutput(size: 4)
        var stored = 0
        struct Refused: Error {}
        #expect(throws: Refused.self) { try exact.write(Data(count: 4)) { _, _ in throw Refused() } }
        #expect(exact.chunks == 0)
        var fresh = ChunkedOutput(size: 4)
        fresh.write(Data(count: 8)) { _, _ in stored += 1 }
        fresh.close { _, _ in stored += 1 }
        #expect(stored == 2)
    }

    /// Runs a program (a `ChildProcess`: ended with the test, at most 60 s) and returns its exit
    /// status and standard output followed by its standard error.
    static func run(_ path: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try ProcessRunner.runWaiting(path, arguments, timeout: .seconds(60))
        return (result.status, result.output + result.error)
    }
}
