import ArgumentParser
import AstroCLISupport
import AstroDomain
import ChartEngine
import Ephemeris
import Foundation

struct BenchSynastry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "synastry",
        abstract: "Synastry plus composite per second in this process (one thread).",
        discussion: """
            Natal charts for distinct birth pairs are computed first (not measured); then, on \
            one dedicated thread, each pair's synastry (144 pairs tested, overlays), its \
            compatibility score and its composite chart (houses cast from the composite MC \
            through libswe). Also prints synastry alone and composite alone.

              astro-bench synastry --count 5000
            """
    )

    @Option(parsing: .unconditional, help: "Chart pairs per measurement.") var count = 5000

    func validate() throws {
        guard (1...1_000_000).contains(count) else { throw ValidationError("--count must be 1…1000000") }
    }

    func run() async throws {
        let ephemeris: Ephemeris
        do {
            ephemeris = try Ephemeris(configuration: EphemerisConfiguration(threads: 1))
        } catch {
            throw CommandFailure("ephemeris: \(error.message)")
        }
        let engine = ChartEngine(ephemeris: ephemeris)
        let inputs = BenchChart.inputs(count: count * 2)
        let count = self.count
        // libswe blocks: everything runs on a thread of its own, never on the concurrency pool.
        let result: Result<String, any Error> = await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(
                    returning: Result {
                        try Self.measure(engine: engine, inputs: inputs, count: count)
                    }
                )
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
        print(try result.get())
    }

    static func measure(engine: ChartEngine, inputs: [BirthData], count: Int) throws -> String {
        let charts = try inputs.map { try engine.chartOnCurrentThread(for: $0) }
        let pairs = (0..<count).map { (charts[2 * $0], charts[2 * $0 + 1]) }
        // Warm-up.
        for (a, b) in pairs.prefix(100) {
            _ = try ChartEngine.synastry(a, b)
            _ = try engine.compositeOnCurrentThread(a, b)
        }
        var aspects = 0
        var start = ContinuousClock.now
        for (a, b) in pairs {
            let synastry = try ChartEngine.synastry(a, b)
            aspects += synastry.aspects.count
            _ = CompatibilityScoring.score(synastry)
            _ = try engine.compositeOnCurrentThread(a, b)
        }
        let both = (ContinuousClock.now - start).benchSeconds
        start = ContinuousClock.now
        for (a, b) in pairs { _ = try ChartEngine.synastry(a, b) }
        let synastryOnly = (ContinuousClock.now - start).benchSeconds
        start = ContinuousClock.now
        for (a, b) in pairs { _ = try engine.compositeOnCurrentThread(a, b) }
        let compositeOnly = (ContinuousClock.now - start).benchSeconds
        start = ContinuousClock.now
        for (a, b) in pairs { _ = try engine.davisonOnCurrentThread(a, b) }
        let davisonOnly = (ContinuousClock.now - start).benchSeconds
        let n = Double(count)
        return [
            "bench synastry: \(count) chart pairs, 1 thread (mean \(aspects / max(count, 1)) inter-aspects a pair)",
            String(format: "  synastry + score + composite: %8.0f pairs/s", n / both),
            String(format: "  synastry alone:               %8.0f pairs/s", n / synastryOnly),
            String(format: "  composite alone:              %8.0f pairs/s", n / compositeOnly),
            String(format: "  davison alone:                %8.0f pairs/s", n / davisonOnly),
        ].joined(separator: "\n")
    }
}
