import Foundation
import FuzzTargets
import Testing

/// Replays every committed corpus file (Fuzz/corpus/<target>/) through its fuzz target, so an ordinary
/// `swift test` catches a regression on an input fuzzing once found (a crash ends the test process).
/// Fuzz/crashes/ holds inputs that still crash; it is not replayed.
@Suite struct CorpusReplayTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/corpus")

    static func files(of target: String) throws -> [URL] {
        let folder = corpus.appendingPathComponent(target)
        return try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { !$0.lastPathComponent.hasPrefix(".") }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    @Test(arguments: FuzzTargets.all.map(\.name))
    func replaysTheCorpus(_ name: String) async throws {
        let target = try #require(FuzzTargets.named(name))
        let files = try Self.files(of: name)
        #expect(!files.isEmpty, "Fuzz/corpus/\(name) has no seed")
        for file in files {
            await target.runAsync(try Data(contentsOf: file))
        }
    }

    @Test func everyCorpusFolderHasATarget() throws {
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.corpus.path)
            .filter { !$0.hasPrefix(".") }
        for folder in folders {
            #expect(FuzzTargets.named(folder) != nil, "Fuzz/corpus/\(folder) names no fuzz target")
        }
    }

    /// The seeds the jws target signs itself must verify: otherwise the fuzzer never gets past the
    /// signature to the payload checks.
    @Test func selfSignedSeedsVerify() async throws {
        for file in try Self.files(of: "jws") where file.lastPathComponent.hasPrefix("valid-") {
            let outcomes = await JWSTarget.outcomes(try Data(contentsOf: file))
            #expect(
                outcomes.contains { $0.contains(": ok ") },
                "\(file.lastPathComponent) verifies as nothing: \(outcomes)"
            )
        }
    }
}
