import HTTPTransport
import Logging
import Tracing

/// Starts tracing for a process: reads the OpenTelemetry environment, bootstraps
/// swift-distributed-tracing's `InstrumentationSystem` with an `OTLPTracer`, and starts the
/// exporter when an endpoint is set.
public enum TracingSetup {
    /// Bootstraps the process's tracer (once per process) and logs ignored settings.
    /// - Parameter serviceName: `service.name` unless the environment names one.
    /// - Returns: the handle that flushes the exporter at shutdown.
    public static func bootstrap(
        serviceName: String,
        environment: [String: String],
        logger: Logger
    ) -> TracingHandle {
        let configuration = OTLPConfiguration.fromEnvironment(environment, defaultServiceName: serviceName)
        for warning in configuration.warnings { logger.warning("tracing: \(warning)") }
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
