import Dispatch
import Hummingbird
import Logging
import NIOCore
import NIOHTTPTypes
import Prometheus
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The most connections a gateway holds open at once (`GATEWAY_MAX_CONNECTIONS`, issue 29).
///
/// Every open connection costs a channel, its pipeline and buffers, whether it sends anything or
/// not (an idle one is closed after `REQUEST_TIMEOUT_MS`): without a bound, a flood of
/// connections grew the process's memory without limit. A connection accepted beyond the limit
/// is closed at once, before its first byte is read — a definite answer the client sees as a
/// reset or end of stream, cheaper than anything that reads its request — and counted in
/// `gateway_connections_refused_total`; `gateway_connections_open` shows how close to the limit
/// a replica runs.
final class ConnectionLimit: Sendable {
    /// The most connections open at once.
    let limit: Int
    private let open = Atomic<Int>(0)
    /// The most connections open at once since the last `takePeak()`.
    private let peak = Atomic<Int>(0)
    private let metrics: GatewayMetrics

    /// - Parameters:
    ///   - limit: the most connections open at once (at least 1).
    ///   - metrics: where open and refused connections are counted.
    init(limit: Int, metrics: GatewayMetrics) {
        self.limit = max(1, limit)
        self.metrics = metrics
        metrics.connectionsOpen.set(Int64(0))
    }

    /// Connections open now.
    var current: Int { open.load(ordering: .relaxed) }

    /// Takes a place for a new connection.
    /// - Returns: false when all places are taken (the caller closes the connection).
    func acquire() -> Bool {
        while true {
            let now = open.load(ordering: .relaxed)
            guard now < limit else {
                metrics.connectionRefused()
                return false
            }
            if open.compareExchange(expected: now, desired: now + 1, ordering: .relaxed).exchanged {
                _ = peak.max(now + 1, ordering: .relaxed)
                metrics.connectionsOpen.increment()
                return true
            }
        }
    }

    /// The most connections open at once since the last call, which starts a new period at the
    /// number open now.
    func takePeak() -> Int {
        peak.exchange(current, ordering: .relaxed)
    }

    /// Gives back the place of a connection that closed.
    func release() {
        open.subtract(1, ordering: .relaxed)
        metrics.connectionsOpen.decrement()
    }
}

/// The first of the gateway's handlers on every connection: takes a place in the
/// `ConnectionLimit` when the connection becomes active and closes it at once when there is
/// none; gives the place back when the connection closes.
final class ConnectionLimitHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    private let limit: ConnectionLimit
    private var holding = false

    init(limit: ConnectionLimit) {
        self.limit = limit
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // The pipeline is built after the accept, when the channel is already active (no
        // channelActive follows then); otherwise channelActive takes the place.
        if context.channel.isActive { take(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if !holding { take(context) }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A refused connection is closing: nothing it sent is passed on.
        guard holding else { return }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        giveBack()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        giveBack()
    }

    private func take(_ context: ChannelHandlerContext) {
        guard !holding else { return }
        if limit.acquire() {
            holding = true
        } else {
            context.close(promise: nil)
        }
    }

    private func giveBack() {
        guard holding else { return }
        holding = false
        limit.release()
    }
}

extension GatewayMetrics {
    /// `gateway_connections_open`: connections this replica holds now.
    var connectionsOpen: Gauge {
        registry.makeGauge(
            descriptor: MetricNameDescriptor(
                namespace: "gateway",
                metricName: "connections",
                unitName: "open",
                helpText: "Connections this gateway holds open (GATEWAY_MAX_CONNECTIONS bounds them)"
            )
        )
    }

    /// Counts one connection closed unread because `GATEWAY_MAX_CONNECTIONS` were open.
    func connectionRefused() {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "gateway",
                metricName: "connections_refused",
                unitName: "total",
                helpText: "Connections closed at once because GATEWAY_MAX_CONNECTIONS were open"
            )
        ).increment()
    }
}

/// Gives the memory of a connection flood back to the system once the flood is over.
///
/// Measured (issue 29, scripts/bench-connection-flood.sh): after 10,000 connections the gateway's
/// resident memory stayed at 115–125 MB, and `malloc_trim(0)` brought it back to 55 MB — the
/// growth was free heap that glibc keeps for reuse, not memory the gateway still held (a leak
/// would not shrink). glibc returns only the top of the heap by itself, so every 30 s, when the
/// open connections fell by at least 256 since the last look, this asks it to return the rest.
/// The call takes a few milliseconds and runs on a Dispatch thread, never on Swift's pool.
struct MemoryTrimmer: Service {
    let connections: ConnectionLimit
    let logger: Logger
    /// How much the open connections must have fallen from their peak for a trim to be worth it.
    static let threshold = 256
    static let interval: Duration = .seconds(30)

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.interval)
                let peak = connections.takePeak()
                guard peak - connections.current >= Self.threshold else { continue }
                await Self.trim()
                logger.debug("memory trimmed after a connection peak", metadata: ["http.connections_peak": "\(peak)"])
            }
        }
    }

    /// glibc's `malloc_trim`, looked up at run time: Swift's Glibc module does not import
    /// `malloc.h`. Nil on another C library (the trimmer then does nothing).
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        #if canImport(Glibc)
        guard let symbol = dlsym(nil, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        #else
        return nil
        #endif
    }()

    /// Returns free heap memory to the system (glibc's `malloc_trim`), off the cooperative pool.
    static func trim() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global(qos: .utility).async {
                _ = mallocTrim?(0)
                continuation.resume()
            }
        }
    }
}
