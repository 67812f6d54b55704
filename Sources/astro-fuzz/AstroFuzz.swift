import Foundation
import FuzzTargets

// The libFuzzer driver of the targets in FuzzTargets (Fuzz/README.md).
//
// Fuzzing build (scripts/fuzz.sh: -sanitize=fuzzer and -DASTRO_FUZZING): `main` hands over to libFuzzer
// (`LLVMFuzzerRunDriver`, with the command line as libFuzzer options and corpus folders), which calls
// `LLVMFuzzerTestOneInput` for every input. SwiftPM links an executable's `main` to its module's entry
// point, so the driver keeps an ordinary `@main` rather than libFuzzer's own `main`.
//
// Ordinary build: `astro-fuzz FILE|FOLDER…` runs each file once through the target and prints its name,
// to replay a crash outside libFuzzer (under a debugger, with a plain backtrace).
//
// Either way the target is `ASTRO_FUZZ_TARGET` (json, amqp-table, jws, url, http), read once.

/// The target chosen by `ASTRO_FUZZ_TARGET`, looked up once (on first use, before any input).
let selectedTarget: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["ASTRO_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTargets.named(name) else {
        let problem = name.isEmpty ? "ASTRO_FUZZ_TARGET is not set" : "no fuzz target \(name.debugDescription)"
        FileHandle.standardError.write(Data("astro-fuzz: \(problem); targets: \(FuzzTargets.names)\n".utf8))
        exit(2)
    }
    return target
}()

#if ASTRO_FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = data.map { Data(bytes: $0, count: size) } ?? Data()
    selectedTarget.run(input)
    return 0
}

/// libFuzzer's entry point for programs with a `main` of their own (compiler-rt FuzzerInterface.h).
@_silgen_name("LLVMFuzzerRunDriver")
func runDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

@main
struct AstroFuzz {
    static func main() {
        selectedTarget.prepare()
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(runDriver(&argc, &argv, testOneInput))
    }
}
#else
@main
struct AstroFuzz {
    static func main() {
        let paths = CommandLine.arguments.dropFirst()
        guard !paths.isEmpty, !paths.contains(where: { $0.hasPrefix("-") }) else {
            print(
                """
                usage: ASTRO_FUZZ_TARGET=<target> astro-fuzz FILE|FOLDER…
                Runs each file once through the fuzz target (a folder: each file in it). This build does not
                fuzz; scripts/fuzz.sh builds the libFuzzer one. Targets:
                """
            )
            for target in FuzzTargets.all {
                print("  \(target.name): \(target.summary)")
            }
            exit(paths.isEmpty ? 2 : 0)
        }
        let target = selectedTarget
        target.prepare()
        var count = 0
        for path in paths {
            for file in files(at: path) {
                guard let data = FileManager.default.contents(atPath: file) else {
                    FileHandle.standardError.write(Data("astro-fuzz: cannot read \(file)\n".utf8))
                    exit(1)
                }
                print("\(target.name): \(file) (\(data.count) bytes)")
                target.run(data)
                count += 1
            }
        }
        print("\(target.name): \(count) input(s) ran without a crash")
    }

    /// `path` itself, or the regular files in it (sorted) when it is a folder.
    static func files(at path: String) -> [String] {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue else {
            return [path]
        }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { (path as NSString).appendingPathComponent($0) }
    }
}
#endif
