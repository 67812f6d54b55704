import ArgumentParser
import AstroCLISupport
import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import Synchronization

struct BenchChart: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chart",
        abstract: "Complete natal charts per second in this process, next to pyswisseph in Python.",
        discussion: """
            A complete chart: local time to UTC through the time-zone database, the ten \
            planets with speed, Placidus houses, signs and houses, the major aspects, and \
            the NatalChart JSON encoding. Every chart is for a different birth date, so \
            libswe's cache of the last position never answers. Measured on one thread, \
            then on one thread per core; then the same complete chart in Python with \
            benchmarks/pyswisseph_chart_bench.py (pip install pyswisseph==2.10.3.2) for \
            comparison.
            """
    )

    @Option(parsing: .unconditional, help: "Charts per measurement.") var count = 20000
    @Option(parsing: .unconditional, help: "Threads for the parallel measurement (default: one per core).") var threads:
        Int?
    @Option(help: "The Python baseline script.") var python = "benchmarks/pyswisseph_chart_bench.py"
    @Flag(help: "Skip the Python comparison.") var noPython = false
    @Flag(help: "Also time the parts of a chart: ephemeris calls, the rest of the chart, JSON.") var breakdown = false

    func validate() throws {
        guard count > 0 else { throw ValidationError("--count must be positive") }
        if let threads, !(1...64).contains(threads) { throw ValidationError("--threads must be 1…64") }
    }

    func run() async throws {
        let cores = threads ?? ProcessInfo.processInfo.activeProcessorCount
        let ephemeris: Ephemeris
        do {
            ephemeris = try Ephemeris(configuration: EphemerisConfiguration(threads: 1))
        } catch {
            throw CommandFailure("ephemeris: \(error.message)")
        }
        let engine = ChartEngine(ephemeris: ephemeris)
        let inputs = Self.inputs(count: count)
        print("bench chart: \(count) complete charts (planets with speed, Placidus houses, aspects, JSON)")
        // A warm-up, so first-use costs (time-zone data, ephemeris files) are not measured.
        _ = try await Self.compute(engine: engine, inputs: Array(inputs.prefix(200)), threads: 1)
        let single = try await Self.compute(engine: engine, inputs: inputs, threads: 1)
        print(String(format: "  swift, 1 thread:  %8.0f charts/s", single))
        let parallel = try await Self.compute(engine: engine, inputs: inputs, threads: cores)
        print(String(format: "  swift, %d threads: %8.0f charts/s", cores, parallel))
        if breakdown { try Self.breakdown(engine: engine, ephemeris: ephemeris, inputs: inputs) }
        guard !noPython else { return }
        do {
            let output = try await runProcess("python3", [python, "--count", "\(count)"])
            guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let rate = object["charts_per_sec"] as? Double
            else { throw CommandFailure("unexpected output from \(python): \(output)") }
            print(String(format: "  python (pyswisseph), 1 thread: %8.0f charts/s", rate))
            print(String(format: "  swift single-threaded is %.1f× python", single / max(rate, 1)))
        } catch {
            print("  python comparison skipped: \(error) (pip install pyswisseph==2.10.3.2)")
        }
    }

    /// Where a chart's time goes, on the calling thread (a diagnostic, not a figure to compare).
    static func breakdown(engine: ChartEngine, ephemeris: Ephemeris, inputs: [BirthData]) throws {
        let charts = try inputs.map { try engine.chartOnCurrentThread(for: $0) }
        var start = ContinuousClock.now
        for chart in charts {
            _ = try ephemeris.positionsOnCurrentThread(
                julianDayUT: chart.julianDayUT,
                latitude: chart.latitude,
                longitude: chart.longitude
            )
        }
        let positions = (ContinuousClock.now - start).benchSeconds / Double(charts.count)
        start = ContinuousClock.now
        for input in inputs { _ = try engine.chartOnCurrentThread(for: input) }
        let chart = (ContinuousClock.now - start).benchSeconds / Double(charts.count)
        start = ContinuousClock.now
        for chart in charts { _ = try chart.jsonBytes() }
        let json = (ContinuousClock.now - start).benchSeconds / Double(charts.count)
        // Foundation's JSONEncoder, which the hand-written writer replaced, for comparison.
        let encoder = JSONCoding.encoder
        start = ContinuousClock.now
        for chart in charts { _ = try encoder.encode(chart) }
        let jsonEncoder = (ContinuousClock.now - start).benchSeconds / Double(charts.count)
        print(
            String(
                format:
                    "  per chart: ephemeris %.1f µs, chart in all %.1f µs (of which not ephemeris %.1f µs), JSON %.1f µs"
                    + " (JSONEncoder: %.1f µs)",
                positions * 1e6,
                chart * 1e6,
                (chart - positions) * 1e6,
                json * 1e6,
                jsonEncoder * 1e6
            )
        )
    }

    /// Distinct, valid birth data: a day apart, at one of several places.
    static func inputs(count: Int) -> [BirthData] {
        let places: [(String, Double, Double)] = [
            ("Europe/Kyiv", 50.4501, 30.5234), ("America/New_York", 40.7128, -74.006),
            ("Asia/Kathmandu", 27.7172, 85.324), ("Australia/Sydney", -33.8688, 151.2093),
            ("America/Sao_Paulo", -23.5505, -46.6333), ("Africa/Nairobi", -1.2921, 36.8219),
        ]
        let start = BirthDate(year: 1950, month: 1, day: 1).daysSince1970
        return (0..<count).map { index in
            let place = places[index % places.count]
            let date = BirthDate(daysSince1970: start + index % 36500)
            return BirthData(
                name: "Bench",
                birthDate: date.description,
                birthTime: String(format: "%02d:%02d", 6 + index % 12, index % 2 == 0 ? 15 : 45),
                timezone: place.0,
                latitude: place.1,
                longitude: place.2,
                locationName: ""
            )
        }
    }

    /// Charts per second over `inputs`, split across `threads` threads of our own (the work is
    /// synchronous, so it stays off the concurrency pool; the caller awaits the last thread).
    static func compute(engine: ChartEngine, inputs: [BirthData], threads: Int) async throws -> Double {
        let failures = Mutex<[String]>([])
        let remaining = Atomic<Int>(threads)
        let start = ContinuousClock.now
        await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
            for worker in 0..<threads {
                let thread = Thread {
                    var index = worker
                    while index < inputs.count {
                        do {
                            let chart = try engine.chartOnCurrentThread(for: inputs[index])
                            _ = try chart.jsonBytes()
                        } catch {
                            failures.withLock { $0.append("\(inputs[index].birthDate): \(error)") }
                        }
                        index += threads
                    }
                    if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { finished.resume() }
                }
                thread.start()
            }
        }
        let seconds = (ContinuousClock.now - start).benchSeconds
        if let failure = failures.withLock({ $0.first }) { throw CommandFailure("a chart failed: \(failure)") }
        return Double(inputs.count) / seconds
    }
}
