import ArgumentParser
import AstroCLISupport
import AstroDomain
import ChartEngine
import Ephemeris
import Foundation

/// `astro-bench transits`: a year of transits for one natal chart, searched again and again on
/// one dedicated thread (the synchronous batch path), as searches per second.
struct BenchTransits: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transits",
        abstract: "Transit searches (one natal chart, one year, all exact hits) per second, one thread.",
        discussion: "Compare with scripts/bench-transits.sh, which also times the pyswisseph search."
    )

    @Option(help: "Searches to run (1…1000).") var count = 20

    func run() async throws {
        guard (1...1000).contains(count) else { throw ValidationError("--count must be 1…1000") }
        let engine = ChartEngine(ephemeris: try Ephemeris(configuration: EphemerisConfiguration(threads: 1)))
        let birth = BirthData(
            name: "Bench",
            birthDate: "1990-10-07",
            birthTime: "12:00",
            timezone: "UTC",
            latitude: 50.4501,
            longitude: 30.5234,
            locationName: "Kyiv"
        )
        let natal = try await engine.chart(for: birth)
        let from = Date(timeIntervalSince1970: 1_740_787_200)  // 2025-03-01
        let to = from.addingTimeInterval(365 * 86_400)
        let count = self.count
        // The search blocks: run it on a thread of its own, not on the concurrency pool.
        let outcome: Result<(Double, Int), TransitError> = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                do throws(TransitError) {
                    _ = try engine.transitsOnCurrentThread(for: natal, from: from, to: to)  // warm the files
                    let start = ContinuousClock.now
                    var hits = 0
                    for _ in 0..<count {
                        let report = try engine.transitsOnCurrentThread(for: natal, from: from, to: to)
                        hits = report.transits.reduce(0) { $0 + $1.hits.count }
                    }
                    let elapsed = ContinuousClock.now - start
                    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
                    continuation.resume(returning: .success((seconds, hits)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        let (seconds, hits) = try outcome.get()
        print(
            "swift transits: \(count) searches in \(String(format: "%.3f", seconds)) s = "
                + "\(String(format: "%.2f", Double(count) / seconds)) searches/s (\(hits) exact hits each)"
        )
    }
}
