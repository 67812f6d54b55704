import Hummingbird
import NIOCore
import NIOHTTPTypes
import Prometheus
import Synchronization

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
                metrics.connectionsOpen.increment()
                return true
            }
        }
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
