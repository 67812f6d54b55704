import AMQP
import AstroDomain
import Foundation
import Logging
import OTLPTracing

/// The `main` of every worker executable: read the environment, set up logging, build the
/// worker, run it, and turn failures into one clear line and an exit status.
public enum WorkerMain {
    /// Exit statuses: 0 after a graceful shutdown, 2 for a configuration error, 1 otherwise.
    /// `probes` are the worker's own periodic metrics probes besides the runtime's (a
    /// `ConfigurationError` it throws is a configuration error).
    public static func run(
        name: String,
        defaultHTTPPort: Int,
        defaultPrefetch: Int = 16,
        queues: [JobType],
        environment: [String: String] = ProcessInfo.processInfo.environment,
        databaseSetup: DatabaseSetup? = nil,
        probes: @autoclosure () throws -> [MetricsProbe] = [],
        handlers: (WorkerContext) throws -> [any JobHandler]
    ) async -> Int32 {
        let configuration: WorkerConfiguration
        do {
            configuration = try WorkerConfiguration.fromEnvironment(
                environment,
                defaultHTTPPort: defaultHTTPPort,
                defaultPrefetch: defaultPrefetch
            )
        } catch {
            FileHandle.standardError.write(Data("\(name): \(error)\n".utf8))
            return 2
        }
        LogSetup.bootstrap(format: configuration.logFormat, level: configuration.logLevel)
        let logger = Logger(label: name)
        // Before tracing: the exporter's counters bind to the metrics system when it is made.
        let metrics = WorkerMetrics()
        MetricsSetup.bootstrap(registry: metrics.registry, logger: logger)
        // Spans of every job, exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set; flushed
        // after the worker stops, whichever way it stops.
        let tracing = TracingSetup.bootstrap(serviceName: name, environment: environment, logger: logger)
        if !configuration.developmentDefaults.isEmpty {
            // Fine on a laptop; in a deployment it means a missing secret or config map entry.
            logger.warning(
                "using the built-in development connection settings; set these variables in a deployment",
                metadata: [
                    "config.unset": "\(configuration.developmentDefaults.joined(separator: ","))",
                    "amqp.url": "\(configuration.amqp.redactedURL)",
                    "postgres.url": "\(configuration.database.redactedURL)",
                ]
            )
        }
        let status: Int32
        do {
            let worker = try Worker(
                name: name,
                configuration: configuration,
                queues: queues,
                databaseSetup: databaseSetup,
                logger: logger,
                metrics: metrics,
                makeHandlers: handlers
            )
            for probe in try probes() { worker.addProbe(probe) }
            try await worker.run()
            status = 0
        } catch let error as ConfigurationError {
            logger.critical("cannot start: \(error)")
            status = 2
        } catch {
            logger.critical("worker failed", metadata: [LogKey.reason: "\(error)"])
            status = 1
        }
        await tracing.shutdown()
        return status
    }
}
