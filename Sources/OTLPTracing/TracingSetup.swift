import HTTPTransport
import Logging
import Synchronization
import Tracing

/// Starts tracing for a process: reads the OpenTelemetry environment, bootstraps
/// swift-distributed-tracing's `InstrumentationSystem` with an `OTLPTracer`, and starts the
/// exporter when an endpoint is set.
public enum TracingSetup {
    private static let bootstrapped = Mutex(false)

    /// Bootstraps the process's tracer and logs ignored settings. Only the first call in a process
    /// bootstraps; later ones return a handle that exports nothing.
    /// - Parameter serviceName: `service.name` unless the environment names one.
    /// - Returns: the handle that flushes the exporter at shutdown.
    public static func bootstrap(
        serviceName: String,
        environment: [String: String],
        logger: Logger
    ) -> TracingHandle {
        let configuration = OTLPConfiguration.fromEnvironment(environment, defaultServiceName: serviceName)
        for warning in configuration.warnings { logger.warning("tracing: \(warning)") }
        // swift-distributed-tracing traps on a second bootstrap; a process that runs its main twice
        // (a test) keeps the first tracer and exports nothing new.
        let first = bootstrapped.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else {
            logger.notice("tracing was already set up in this process; keeping the first tracer")
            return TracingHandle(exporter: nil, task: nil)
        }
        let exporter = OTLPExporter(configuration: configuration)
        InstrumentationSystem.bootstrap(OTLPTracer(exporter: exporter))
        let task = exporter.map { exporter in Task { await exporter.run() } }
        if let endpoint = configuration.tracesEndpoint {
            logger.info(
                "exporting traces over OTLP/HTTP (JSON)",
                metadata: [
                    "otel.endpoint": "\(endpoint.redactedForMessages)", "otel.service": "\(configuration.serviceName)",
                ]
            )
        }
        return TracingHandle(exporter: exporter, task: task)
    }
}

/// The running exporter of a process, if any.
public struct TracingHandle: Sendable {
    public let exporter: OTLPExporter?
    let task: Task<Void, Never>?

    /// Sends what is buffered (bounded by the exporter's flush deadline) and stops the exporter.
    public func shutdown() async {
        exporter?.shutdown()
        await task?.value
    }
}
