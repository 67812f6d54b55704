import AstroDomain
import Foundation
import HTTPTransport
import Metrics
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends finished spans to an OTLP/HTTP endpoint as JSON, in batches, from a task of its own.
///
/// `submit` never waits: a span goes into a bounded `SpanBuffer` (dropped and counted when it is
/// full), and `run` sends what is buffered every `scheduleDelay`, or sooner once a batch is full.
/// A failed request is tried once more after a short pause for the statuses the OTLP
/// specification calls retryable (429, 502, 503, 504) and for connection failures; then its spans
/// are counted as failed and let go. `shutdown` ends `run` after a last flush.
public final class OTLPExporter: Sendable {
    public let configuration: OTLPConfiguration
    private let endpoint: URL
    private let buffer: SpanBuffer
    private let transport: Transport
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>
    private let counts = Mutex(Counts())
    private let exportedCounter = Counter(label: MetricName.traceSpansExported.rawValue)
    private let droppedCounter = Counter(label: MetricName.traceSpansDropped.rawValue)
    private let failedCounter = Counter(label: MetricName.traceSpansFailed.rawValue)

    /// What the exporter did since it was made.
    public struct Counts: Sendable, Hashable {
        /// Spans the endpoint accepted.
        public var exported = 0
        /// Spans whose export request failed.
        public var failed = 0
        /// Export requests sent (including retries).
        public var requests = 0
    }

    /// An exporter for `configuration`, or nil when it exports nothing (no endpoint).
    public init?(configuration: OTLPConfiguration) {
        guard let endpoint = configuration.tracesEndpoint else { return nil }
        self.configuration = configuration
        self.endpoint = endpoint
        buffer = SpanBuffer(capacity: configuration.maxQueueSize)
        // The collector's answer is a small status document; more is not read.
        transport = Transport(maxConnectionsPerHost: 2, maxResponseBytes: 64 << 10)
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    deinit { transport.invalidate() }

    /// Buffers a finished span for export; never blocks. A full buffer drops it (counted).
    public func submit(_ span: SpanRecord) {
        guard let held = buffer.append(span) else {
            droppedCounter.increment()
            return
        }
        if held >= configuration.maxExportBatchSize { wake.yield() }
    }

    /// Spans dropped because the buffer was full.
    public var dropped: Int { buffer.dropped }

    /// Spans waiting in the buffer.
    public var pending: Int { buffer.count }

    /// What the exporter sent, and what failed.
    public var statistics: Counts { counts.withLock { $0 } }

    /// Sends buffered spans until `shutdown`, then sends what is left (within `flushDeadline`).
    public func run(flushDeadline: Duration = .seconds(5)) async {
        let delay = configuration.scheduleDelay
        let wake = self.wake
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: delay)
                wake.yield()
            }
        }
        for await _ in wakes { await exportBuffered() }
        ticker.cancel()
        let deadline = ContinuousClock.now + flushDeadline
        while buffer.count > 0, ContinuousClock.now < deadline {
            await exportBuffered()
        }
    }

    /// Ends `run` after its last flush (graceful shutdown).
    public func shutdown() { wake.finish() }

    /// Asks `run` to send what is buffered now.
    public func flushSoon() { wake.yield() }

    /// Sends every full batch buffered, and then the rest.
    func exportBuffered() async {
        while true {
            let batch = buffer.take(limit: configuration.maxExportBatchSize)
            if batch.isEmpty { return }
            await export(batch)
        }
    }

    /// One batch: up to two attempts.
    func export(_ batch: [SpanRecord]) async {
        var request = URLRequest(url: endpoint)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        for (name, value) in configuration.headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = OTLPJSON.encode(
            batch,
            serviceName: configuration.serviceName,
            resource: configuration.resourceAttributes
        )
        for attempt in 1...2 {
            counts.withLock { $0.requests += 1 }
            let retryable: Bool
            switch await transport.send(request, timeout: configuration.timeout) {
            case .response(let status, _, _) where (200..<300).contains(status):
                counts.withLock { $0.exported += batch.count }
                exportedCounter.increment(by: batch.count)
                return
            case .response(let status, _, _):
                retryable = [429, 502, 503, 504].contains(status)
            case .timedOut, .failed:
                retryable = true
            case .cancelled:
                retryable = false
            }
            guard retryable, attempt == 1 else { break }
            try? await Task.sleep(for: .milliseconds(500))
        }
        counts.withLock { $0.failed += batch.count }
        failedCounter.increment(by: batch.count)
    }
}
