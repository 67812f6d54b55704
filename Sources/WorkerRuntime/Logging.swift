import AMQP
import AstroDomain
import Foundation
import Logging
import Synchronization

/// Sets up the process's logging once: text (swift-log's stream handler) or JSON lines.
public enum LogSetup {
    private static let done = Mutex(false)

    /// Bootstraps swift-log for the process; later calls do nothing.
    public static func bootstrap(format: WorkerConfiguration.LogFormat, level: Logger.Level) {
        let first = done.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler
            switch format {
            case .text: handler = StreamLogHandler.standardError(label: label)
            case .json: handler = JSONLogHandler(label: label)
            }
            handler.logLevel = level
            return handler
        }
    }
}

/// Writes one JSON object per line to standard error: `ts`, `level`, `logger`, `msg`, metadata.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private static let output = Mutex(())

    public init(label: String) { self.label = label }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = self.metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        var object: [String: Any] = [
            "ts": ISO8601.string(from: Date()),
            "level": event.level.rawValue,
            "logger": label,
            "msg": event.message.description,
        ]
        for (key, value) in merged { object[key] = Self.plain(value) }
        if let error = event.error { object["error"] = String(describing: error) }
        guard
            var data = try? JSONSerialization.data(
                withJSONObject: object,
                options: [.sortedKeys, .withoutEscapingSlashes]
            )
        else { return }
        data.append(0x0A)
        Self.output.withLock { _ in FileHandle.standardError.write(data) }
    }

    private static func plain(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): return text
        case .stringConvertible(let convertible): return convertible.description
        case .array(let values): return values.map(plain)
        case .dictionary(let values): return values.mapValues(plain)
        }
    }
}

/// The runtime's log metadata keys, added to the package's one `LogKey` (defined in AMQP with the
/// broker wrapper's keys; the queue a job came from is its `LogKey.queue`, `amqp.queue`).
extension LogKey {
    package static let jobID = "job.id"
    package static let jobType = "job.type"
    /// The attempt of a job: 1 on the first delivery.
    package static let attempt = "job.attempt"
    package static let status = "job.status"
    package static let reason = "error.message"
    package static let reasonCode = "error.code"
    /// A message body's size in bytes.
    package static let messageBytes = "message.bytes"
    /// How many times the broker has handed a message out.
    package static let messageDeliveries = "message.deliveries"
    /// A dependency waited for at start-up (PostgreSQL, RabbitMQ).
    package static let dependency = "dependency"
    /// The attempt of a start-up step (not of a job).
    package static let startAttempt = "attempt"
    /// The wait before the next start-up attempt.
    package static let retryIn = "retry_in"
}
