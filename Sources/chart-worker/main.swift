import ChartEngine
import ChartService
import Ephemeris
import Foundation
import WorkerRuntime

// The chart-worker: consumes chart.calculate, computes natal charts with the Swiss Ephemeris and
// stores profiles and charts; and chart.synastry, chart.transits, chart.return and chart.render,
// whose results it stores in chart_results. Configuration: the workers' environment variables
// (README), plus SE_EPHE_PATH (ephemeris files), EPHEMERIS_THREADS (computation threads,
// default: one per core) and ALLOW_MOSHIER (accept libswe's lower-precision fallback; default
// false).
let environment = ProcessInfo.processInfo.environment
let status = await WorkerMain.run(
    name: "chart-worker",
    defaultHTTPPort: 8081,
    queues: [.chartCalculate, .chartSynastry, .chartTransits, .chartReturn, .chartRender]
) { context in
    let threads = try environment["EPHEMERIS_THREADS"].map { text -> Int in
        guard let value = Int(text), (1...64).contains(value) else {
            throw ConfigurationError(
                variable: "EPHEMERIS_THREADS",
                problem: "expected 1…64, got \(text.debugDescription)"
            )
        }
        return value
    }
    let allowMoshier = ["1", "true", "yes"].contains(environment["ALLOW_MOSHIER"]?.lowercased() ?? "")
    let ephemeris: Ephemeris
    do {
        ephemeris = try Ephemeris(
            configuration: EphemerisConfiguration(
                path: environment["SE_EPHE_PATH"],
                allowMoshierFallback: allowMoshier,
                threads: threads ?? ProcessInfo.processInfo.activeProcessorCount
            )
        )
    } catch let error as EphemerisError {
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
exit(status)
