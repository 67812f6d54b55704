import Hummingbird
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Tells a long-running response that its client closed the connection.
///
/// The server allows half-closed connections, and a response that is not writing (an idle event
/// stream) learns of a vanished client only when a write fails: one write after the client's FIN
/// still succeeds, so only the second heartbeat after it (15–30 s) failed, and until then the
/// stream held its place and `gateway_event_streams_open` counted it. `ConnectionWatchHandler`
/// sees the connection's input close at once and calls what a handler registered here for
/// that connection.
///
/// Connections are named by random 64-bit ids carried in the `X-Gateway-Connection` request
/// header, which the handler sets on every request (replacing whatever a client sent): a guessed
/// id cannot reach another client's connection. State lives only while a connection is open.
final class ConnectionWatch: Sendable {
    static let header = HTTPFields.Element.Name("X-Gateway-Connection")!

    /// A registration to remove with `cancel` once its response ended.
    struct Registration: Sendable, Hashable {
        let connection: UInt64
        let number: UInt64
    }

    private struct Connection {
        var inputClosed = false
        var actions: [UInt64: @Sendable () -> Void] = [:]
    }

    private struct State {
        var connections: [UInt64: Connection] = [:]
        var nextNumber: UInt64 = 1
    }

    private let state = Mutex(State())

    init() {}

    /// A new connection's id.
    func opened() -> UInt64 {
        state.withLock { state in
            var id = UInt64.random(in: 1...UInt64.max)
            while state.connections[id] != nil { id = UInt64.random(in: 1...UInt64.max) }
            state.connections[id] = Connection()
            return id
        }
    }

    /// The client closed its side of connection `id` (or the connection is gone, `ended`): every
    /// registered action runs once, now; one registered later runs at once.
    func inputClosed(_ id: UInt64, ended: Bool = false) {
        let actions = state.withLock { state -> [@Sendable () -> Void] in
            guard var connection = state.connections[id] else { return [] }
            let actions = Array(connection.actions.values)
            connection.actions = [:]
            connection.inputClosed = true
            state.connections[id] = ended ? nil : connection
            return actions
        }
        for action in actions { action() }
    }

    /// Runs `action` when the client of the connection named by `header` closes it (at once if it
    /// already did, or if the connection has ended).
    /// - Returns: the registration, or nil when the action already ran or when there is no usable
    ///   header (no `ConnectionWatchHandler` in the pipeline: the response then learns of a
    ///   vanished client only when a write fails).
    func onInputClosed(header: String?, _ action: @escaping @Sendable () -> Void) -> Registration? {
        guard let header, header.utf8.count <= 20, let id = UInt64(header) else { return nil }
        let outcome = state.withLock { state -> (Registration?, runNow: Bool) in
            // Only the handler sets the header, with the id of a connection it registered: one
            // not (or no longer) here has ended already, before the response began.
            guard var connection = state.connections[id] else { return (nil, true) }
            if connection.inputClosed { return (nil, true) }
            let registration = Registration(connection: id, number: state.nextNumber)
            state.nextNumber += 1
            connection.actions[registration.number] = action
            state.connections[id] = connection
            return (registration, false)
        }
        if outcome.runNow { action() }
        return outcome.0
    }

    /// Removes a registration (its response ended).
    func cancel(_ registration: Registration?) {
        guard let registration else { return }
        state.withLock { state in
            _ = state.connections[registration.connection]?.actions.removeValue(forKey: registration.number)
        }
    }

    /// Open connections being watched (for tests).
    var count: Int { state.withLock { $0.connections.count } }
}

/// Names each connection in `ConnectionWatch` and reports when its client closes it. One
/// instance per connection (Hummingbird makes the handlers per connection).
final class ConnectionWatchHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    private let watch: ConnectionWatch
    private var id: UInt64?

    init(watch: ConnectionWatch) {
        self.watch = watch
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        let id = self.id ?? watch.opened()
        self.id = id
        head.headerFields[ConnectionWatch.header] = String(id)
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed, let id { watch.inputClosed(id) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let id { watch.inputClosed(id, ended: true) }
        id = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if let id { watch.inputClosed(id, ended: true) }
        id = nil
    }
}
