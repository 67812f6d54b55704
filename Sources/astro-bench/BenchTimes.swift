import AstroDomain
import Foundation
import Synchronization

/// Publish and finish times of every job of one measurement.
final class BenchTimes: Sendable {
    private struct State {
        var published: [JobID: ContinuousClock.Instant] = [:]
        var latencies: [Double] = []
        var firstPublish: ContinuousClock.Instant?
        var lastFinish: ContinuousClock.Instant?
        var failed = 0
        var seen: Set<JobID> = []
    }
    private let state: Mutex<State>

    init(count: Int) {
        var initial = State()
        initial.published.reserveCapacity(count)
        initial.latencies.reserveCapacity(count)
        state = Mutex(initial)
    }

    func published(_ ids: [JobID], at instant: ContinuousClock.Instant) {
        state.withLock { state in
            if state.firstPublish == nil { state.firstPublish = instant }
            for id in ids { state.published[id] = instant }
        }
    }

    /// Records a finished job once.
    /// - Returns: whether it was recorded: false for a job this measurement did not publish (of
    ///   another kind in a mix, or left over from an earlier run) or already finished.
    @discardableResult
    func finish(_ id: JobID, at instant: ContinuousClock.Instant, failed: Bool) -> Bool {
        state.withLock { state in
            guard let start = state.published[id], state.seen.insert(id).inserted else { return false }
            state.latencies.append((instant - start).benchSeconds)
            state.lastFinish = instant
            if failed { state.failed += 1 }
            return true
        }
    }

    var finishedCount: Int { state.withLock { $0.seen.count } }
    var firstPublish: ContinuousClock.Instant? { state.withLock { $0.firstPublish } }

    struct Report {
        var finished: Int
        var failed: Int
        var throughput: Double
        var p50: Double
        var p95: Double
        var p99: Double
    }

    func report() -> Report {
        state.withLock { state in
            let sorted = state.latencies.sorted()
            func percentile(_ p: Double) -> Double {
                guard !sorted.isEmpty else { return 0 }
                return sorted[min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
            }
            var throughput = 0.0
            if let first = state.firstPublish, let last = state.lastFinish {
                throughput = Double(sorted.count) / max((last - first).benchSeconds, 1e-9)
            }
            return Report(
                finished: sorted.count,
                failed: state.failed,
                throughput: throughput,
                p50: percentile(0.50),
                p95: percentile(0.95),
                p99: percentile(0.99)
            )
        }
    }
}

/// The peak resident memory of a set of processes, sampled from /proc.
final class PeakMemory: Sendable {
    private let pids: [Int32]
    private let peak = Mutex(0)

    init(pids: [Int32]) { self.pids = pids }

    /// The largest VmRSS (kB) any of the processes had at a sample.
    var peakKilobytes: Int { peak.withLock { $0 } }

    func sample() {
        for pid in pids {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { continue }
            for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
                let kilobytes =
                    Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
                peak.withLock { $0 = max($0, kilobytes) }
            }
        }
    }
}

/// The progress bar on standard error while jobs are measured.
enum BenchProgress {
    static func draw(done: Int, total: Int, since start: ContinuousClock.Instant?) {
        let width = 30
        let filled = total == 0 ? width : min(width, done * width / total)
        var rate = 0.0
        if let start {
            let elapsed = (ContinuousClock.now - start).benchSeconds
            if elapsed > 0 { rate = Double(done) / elapsed }
        }
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let line = String(format: "\r  [%@] %d/%d  %.0f jobs/s ", bar, done, total, rate)
        FileHandle.standardError.write(Data(line.utf8))
    }
}
