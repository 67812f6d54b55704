import AstroDomain
import ChartEngine
import ChartService
import Ephemeris
import Foundation
import WorkerRuntime

/// The chart-worker's wiring: consumes chart.calculate, computes natal charts with the Swiss
/// Ephemeris and stores profiles and charts; and chart.synastry, chart.transits, chart.return and
/// chart.render, whose results it stores in chart_results. Configuration: the workers'
/// environment variables (README), plus SE_EPHE_PATH (ephemeris files), EPHEMERIS_THREADS
/// (computation threads, default: one per core) and ALLOW_MOSHIER (accept libswe's
/// lower-precision fallback; default false).
///
/// Kept out of `main.swift` on purpose: closures written in top-level code are inferred to be
/// main-actor isolated, and one that the runtime or a logger calls on another thread traps
/// (SIGILL). Here every closure is nonisolated.
enum ChartWorker {
    /// Runs the worker until it is stopped; returns the process exit status (WorkerMain.run).
    static func run(environment: [String: String]) async -> Int32 {
        await WorkerMain.run(
            name: "chart-worker",
            defaultHTTPPort: 8081,
            queues: [.chartCalculate, .chartSynastry, .chartTransits, .chartReturn, .chartRender],
            environment: environment
        ) { context in
            try handlers(context: context, environment: environment)
        }
    }

    /// The job handlers, built from the environment.
    /// - Throws: `ConfigurationError` naming the variable at fault.
    static func handlers(context: WorkerContext, environment: [String: String]) throws -> [any JobHandler] {
        var threads = ProcessInfo.processInfo.activeProcessorCount
        if let text = environment["EPHEMERIS_THREADS"] {
            guard let value = Int(text), (1...64).contains(value) else {
                throw ConfigurationError(
                    variable: "EPHEMERIS_THREADS",
                    problem: "expected 1…64, got \(InputQuote.short(text))"
                )
            }
            threads = value
        }
        let allowMoshier = ["1", "true", "yes"].contains(environment["ALLOW_MOSHIER"]?.lowercased() ?? "")
        let ephemeris: Ephemeris
        do {
            ephemeris = try Ephemeris(
                configuration: EphemerisConfiguration(
                    path: environment["SE_EPHE_PATH"],
                    allowMoshierFallback: allowMoshier,
                    threads: threads
                )
            )
        } catch {
            throw ConfigurationError(variable: "SE_EPHE_PATH", problem: error.message)
        }
        let engine = ChartEngine(ephemeris: ephemeris)
        let results: [any JobHandler] = ChartResultHandler.all(
            engine: engine,
            pool: context.pool,
            quota: try ChartResultHandler.quota(from: environment)
        )
        return [ChartCalculateHandler(engine: engine)] + results
    }
}
