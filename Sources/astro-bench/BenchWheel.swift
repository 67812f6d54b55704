import ArgumentParser
import AstroCLISupport
import AstroDomain
import ChartEngine
import ChartWheel
import Ephemeris
import Foundation

struct BenchWheel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wheel",
        abstract: "SVG chart wheels (single and bi-wheel) per second in this process, and their size in bytes.",
        discussion: """
            The charts are computed first (not measured), each for a different birth date \
            with the four optional points; then each is drawn as a single wheel, and each \
            with the next chart as a bi-wheel with cross aspects found by the fallback. \
            One thread.
            """
    )

    @Option(parsing: .unconditional, help: "Wheels per measurement (1…100000).") var count = 2000

    func validate() throws {
        guard (1...100_000).contains(count) else { throw ValidationError("--count must be 1…100000") }
    }

    func run() async throws {
        let engine: ChartEngine
        do {
            engine = ChartEngine(ephemeris: try Ephemeris(configuration: EphemerisConfiguration(threads: 1)))
        } catch {
            throw CommandFailure("ephemeris: \(error.message)")
        }
        let charts = try BenchChart.inputs(count: count).map { birth in
            var birth = birth
            birth.points = ChartPoint.allCases
            return try engine.chartOnCurrentThread(for: birth, calculatedAt: Date(timeIntervalSince1970: 0))
        }
        print("bench wheel: \(count) charts with points")
        _ = try charts.prefix(50).map { try ChartWheel.svg(.natal($0, name: "Warm-up")) }
        for kind in ["single", "bi-wheel"] {
            var sizes: [Int] = []
            sizes.reserveCapacity(charts.count)
            let start = ContinuousClock.now
            for (index, chart) in charts.enumerated() {
                let input: WheelInput =
                    kind == "single"
                    ? .natal(chart, name: "Bench")
                    : .biWheel(
                        inner: chart,
                        innerName: "Bench",
                        outer: charts[(index + 1) % charts.count],
                        outerName: "Other"
                    )
                sizes.append(try ChartWheel.svg(input).utf8.count)
            }
            let seconds = (ContinuousClock.now - start).benchSeconds
            let mean = Double(sizes.reduce(0, +)) / Double(sizes.count)
            print(
                String(
                    format: "  %@: %8.0f wheels/s; bytes min %d, mean %.0f, max %d",
                    kind,
                    Double(charts.count) / seconds,
                    sizes.min()!,
                    mean,
                    sizes.max()!
                )
            )
        }
    }
}
