import CRabbitMQ
import Foundation
import RetryBackoff

/// Owns one librabbitmq connection (`amqp_connection_state_t`) with one channel.
///
/// - Important: Confined to the loop thread that opened it: librabbitmq connections are not
///   thread-safe, and heartbeats are only answered from inside library calls on that thread. Every
///   method must be called on that thread; `deinit` frees the connection.
final class ConnectionHandle {
    /// The channel every operation uses.
    let channel: amqp_channel_t = 1
    /// The socket, for `poll()`.
    let socketFD: Int32
    /// The negotiated heartbeat in seconds (0: none).
    let heartbeatSeconds: Int
    /// Pool for outgoing tables and properties; recycle after each use.
    let scratch = ScratchPool()

    /// Whether the connection may still be used (false after a socket error or connection.close).
    private(set) var isAlive = true
    /// Whether `channel` is open (false after the broker closed it, until `reopenChannel()`).
    private(set) var isChannelOpen = false

    private let state: amqp_connection_state_t
    private var destroyed = false

    /// Opens the socket (TCP or TLS), logs in and opens the channel.
    /// - Throws: `.connectionFailed`, `.tls`, `.authenticationFailed` or `.timeout`, naming the broker.
    init(configuration: AMQPConfiguration) throws(AMQPError) {
        guard let state = amqp_new_connection() else {
            throw AMQPError(kind: .connectionFailed, message: "librabbitmq could not allocate a connection")
        }
        self.state = state
        let target = "\(configuration.host):\(configuration.port)"
        do throws(AMQPError) {
            let socket = try Self.makeSocket(state: state, configuration: configuration)
            var timeout = timeval(duration: configuration.connectTimeout)
            let status = configuration.host.withCString { host in
                amqp_socket_open_noblock(socket, host, Int32(configuration.port), &timeout)
            }
            if status != AMQP_STATUS_OK.rawValue {
                throw Self.connectError(status: status, target: target)
            }
            _ = amqp_set_handshake_timeout(state, &timeout)
            var rpcTimeout = timeval(duration: max(configuration.connectTimeout, .seconds(30)))
            _ = amqp_set_rpc_timeout(state, &rpcTimeout)

            let heartbeat = Self.heartbeatSeconds(configuration.heartbeat)
            let reply = try Self.login(state: state, configuration: configuration, heartbeat: heartbeat)
            if reply.reply_type != AMQP_RESPONSE_NORMAL {
                throw Self.loginError(reply: reply, state: state, configuration: configuration, target: target)
            }
            socketFD = amqp_get_sockfd(state)
            heartbeatSeconds = Int(amqp_get_heartbeat(state))
            try openChannel()
        } catch {
            amqp_destroy_connection(state)
            destroyed = true
            throw error
        }
    }

    deinit {
        if !destroyed {
            amqp_destroy_connection(state)
        }
    }

    // MARK: - Opening

    private static func makeSocket(
        state: amqp_connection_state_t,
        configuration: AMQPConfiguration
    ) throws(AMQPError) -> OpaquePointer {
        guard let tls = configuration.tls else {
            guard let socket = amqp_tcp_socket_new(state) else {
                throw AMQPError(kind: .connectionFailed, message: "librabbitmq could not create a TCP socket")
            }
            return socket
        }
        guard let socket = amqp_ssl_socket_new(state) else {
            throw AMQPError(kind: .tls, message: "librabbitmq could not create a TLS socket (OpenSSL setup failed)")
        }
        if let ca = tls.caCertificatePath {
            let status = ca.withCString { amqp_ssl_socket_set_cacert(socket, $0) }
            if status != AMQP_STATUS_OK.rawValue {
                throw AMQPError(
                    kind: .tls,
                    message: "cannot load the CA certificate file '\(ca)': \(statusText(status)); check the path "
                        + "(cacertfile) and that it holds PEM certificates"
                )
            }
        }
        if let cert = tls.clientCertificatePath {
            guard let key = tls.clientKeyPath else {
                throw AMQPError(kind: .invalidConfiguration, message: "a TLS client certificate needs a key (keyfile)")
            }
            let status = cert.withCString { certC in
                key.withCString { keyC in amqp_ssl_socket_set_key(socket, certC, keyC) }
            }
            if status != AMQP_STATUS_OK.rawValue {
                throw AMQPError(
                    kind: .tls,
                    message: "cannot load the client certificate '\(cert)' or key '\(key)': \(statusText(status))"
                )
            }
        }
        amqp_ssl_socket_set_verify_peer(socket, tls.verifyPeer ? 1 : 0)
        amqp_ssl_socket_set_verify_hostname(socket, tls.verifyHostname ? 1 : 0)
        return socket
    }

    private static func heartbeatSeconds(_ heartbeat: Duration) -> Int32 {
        let seconds = heartbeat.seconds
        if seconds <= 0 { return 0 }
        return Int32(min(max(seconds.rounded(.up), 1), 65535))
    }

    private static func login(
        state: amqp_connection_state_t,
        configuration: AMQPConfiguration,
        heartbeat: Int32
    ) throws(AMQPError) -> amqp_rpc_reply_t {
        let pool = ScratchPool()
        let clientProperties: AMQPTable = [
            "connection_name": .string(configuration.connectionName),
            "product": "astrosvitla AMQP (librabbitmq)",
            "capabilities": .table([
                "consumer_cancel_notify": true,
                "authentication_failure_close": true,
                "connection.blocked": true,
                "publisher_confirms": true,
                "basic.nack": true,
            ]),
        ]
        var properties = pool.table(clientProperties)
        return configuration.virtualHost.withCString { vhost in
            configuration.user.withCString { user in
                configuration.password.withCString { password in
                    crabbitmq_login_plain(
                        state,
                        vhost,
                        0,
                        Int32(AMQP_DEFAULT_FRAME_SIZE),
                        heartbeat,
                        &properties,
                        user,
                        password
                    )
                }
            }
        }
    }

    private static func connectError(status: Int32, target: String) -> AMQPError {
        let text = statusText(status)
        switch status {
        case AMQP_STATUS_SSL_ERROR.rawValue, AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED.rawValue,
            AMQP_STATUS_SSL_PEER_VERIFY_FAILED.rawValue, AMQP_STATUS_SSL_CONNECTION_FAILED.rawValue,
            AMQP_STATUS_SSL_SET_ENGINE_FAILED.rawValue:
            return AMQPError(
                kind: .tls,
                message: "TLS handshake with \(target) failed: \(text); check the CA file (cacertfile), the "
                    + "broker's certificate and that its name matches the host"
            )
        case AMQP_STATUS_TIMEOUT.rawValue:
            return AMQPError(kind: .connectionFailed, message: "connecting to \(target) timed out")
        case AMQP_STATUS_HOSTNAME_RESOLUTION_FAILED.rawValue:
            return AMQPError(kind: .connectionFailed, message: "cannot resolve the broker host of \(target)")
        default:
            return AMQPError(
                kind: .connectionFailed,
                message: "cannot connect to \(target): \(text); is RabbitMQ running and listening there?"
            )
        }
    }

    private static func loginError(
        reply: amqp_rpc_reply_t,
        state: amqp_connection_state_t,
        configuration: AMQPConfiguration,
        target: String
    ) -> AMQPError {
        switch reply.reply_type {
        case AMQP_RESPONSE_SERVER_EXCEPTION:
            if reply.reply.id == CRABBITMQ_CONNECTION_CLOSE_METHOD, let decoded = reply.reply.decoded {
                let close = decoded.assumingMemoryBound(to: amqp_connection_close_t.self).pointee
                var ok = amqp_connection_close_ok_t()
                _ = amqp_send_method(state, 0, CRABBITMQ_CONNECTION_CLOSE_OK_METHOD, &ok)
                let text = close.reply_text.string
                if close.reply_code == 403 {
                    return AMQPError(
                        kind: .authenticationFailed,
                        message: "\(target) refused the login of user '\(configuration.user)': \(text)",
                        replyCode: close.reply_code
                    )
                }
                return AMQPError(
                    kind: .connectionFailed,
                    message: "\(target) refused the connection to vhost '\(configuration.virtualHost)': \(text)",
                    replyCode: close.reply_code
                )
            }
            return AMQPError(kind: .protocolError, message: "unexpected reply from \(target) during login")
        case AMQP_RESPONSE_LIBRARY_EXCEPTION:
            let status = reply.library_error
            if status == AMQP_STATUS_CONNECTION_CLOSED.rawValue || status == AMQP_STATUS_SOCKET_ERROR.rawValue {
                return AMQPError(
                    kind: .connectionFailed,
                    message: "\(target) closed the connection during login (\(statusText(status))): check the "
                        + "user, password and vhost '\(configuration.virtualHost)'"
                )
            }
            if status == AMQP_STATUS_TIMEOUT.rawValue {
                return AMQPError(kind: .connectionFailed, message: "the login handshake with \(target) timed out")
            }
            return connectError(status: status, target: target)
        default:
            return AMQPError(kind: .protocolError, message: "no reply from \(target) during login")
        }
    }

    // MARK: - Channel

    /// Opens `channel` (after connecting, or after the broker closed it).
    func openChannel() throws(AMQPError) {
        _ = amqp_channel_open(state, channel)
        try check(amqp_get_rpc_reply(state), "channel.open")
        isChannelOpen = true
    }

    /// Turns on publisher confirms on `channel`: delivery tags of confirms count from 1 again.
    func confirmSelect() throws(AMQPError) {
        _ = amqp_confirm_select(state, channel)
        try check(amqp_get_rpc_reply(state), "confirm.select")
    }

    // MARK: - Declarations and queries (RPCs; frames for other work that arrive meanwhile are queued)

    /// Declares exchanges, then queues, then their bindings, then exchange-to-exchange bindings.
    func declare(_ topology: Topology) throws(AMQPError) {
        defer { scratch.recycle() }
        for exchange in topology.exchanges {
            if exchange.declareOnlyIfMissing, try exchangeExists(exchange.name) { continue }
            _ = amqp_exchange_declare(
                state,
                channel,
                scratch.bytes(exchange.name),
                scratch.bytes(exchange.kind.rawValue),
                0,
                exchange.durable ? 1 : 0,
                exchange.autoDelete ? 1 : 0,
                0,
                scratch.table(exchange.arguments)
            )
            try check(amqp_get_rpc_reply(state), "declaring exchange '\(exchange.name)'")
        }
        // Bindings of a queue that was already there are left as the administrator made them.
        var existing: Set<String> = []
        for queue in topology.queues {
            if queue.declareOnlyIfMissing, try queueExists(queue.name) {
                existing.insert(queue.name)
                continue
            }
            _ = amqp_queue_declare(
                state,
                channel,
                scratch.bytes(queue.name),
                0,
                queue.durable ? 1 : 0,
                queue.exclusive ? 1 : 0,
                queue.autoDelete ? 1 : 0,
                scratch.table(queue.arguments)
            )
            try check(amqp_get_rpc_reply(state), "declaring queue '\(queue.name)'")
        }
        for binding in topology.bindings where !existing.contains(binding.queue) {
            _ = amqp_queue_bind(
                state,
                channel,
                scratch.bytes(binding.queue),
                scratch.bytes(binding.exchange),
                scratch.bytes(binding.routingKey),
                scratch.table(binding.arguments)
            )
            try check(
                amqp_get_rpc_reply(state),
                "binding queue '\(binding.queue)' to exchange '\(binding.exchange)'"
            )
        }
        for binding in topology.exchangeBindings {
            _ = amqp_exchange_bind(
                state,
                channel,
                scratch.bytes(binding.destination),
                scratch.bytes(binding.source),
                scratch.bytes(binding.routingKey),
                scratch.table(binding.arguments)
            )
            try check(
                amqp_get_rpc_reply(state),
                "binding exchange '\(binding.destination)' to exchange '\(binding.source)'"
            )
        }
    }

    /// The channel used for passive probes, which the broker closes when the answer is "no":
    /// the main channel (publisher confirms, consumers) is never disturbed by a probe.
    private let probeChannel: amqp_channel_t = 2

    /// Whether an exchange exists: a passive exchange.declare on the probe channel (no
    /// permission is needed for it). A 404 closes only the probe channel.
    func exchangeExists(_ name: String) throws(AMQPError) -> Bool {
        try probe("exchange '\(name)'") { state, channel in
            _ = amqp_exchange_declare(
                state,
                channel,
                scratch.bytes(name),
                scratch.bytes("direct"),
                1,
                0,
                0,
                0,
                amqp_empty_table
            )
        }
    }

    /// Whether a queue exists: a passive queue.declare on the probe channel (no permission is
    /// needed for it). A 404 closes only the probe channel.
    func queueExists(_ name: String) throws(AMQPError) -> Bool {
        try probe("queue '\(name)'") { state, channel in
            _ = amqp_queue_declare(state, channel, scratch.bytes(name), 1, 0, 0, 0, amqp_empty_table)
        }
    }

    /// Runs one passive declaration on the probe channel: true when it succeeds, false on the
    /// broker's 404 (which closes only the probe channel).
    private func probe(
        _ what: String,
        _ declare: (amqp_connection_state_t, amqp_channel_t) -> Void
    ) throws(AMQPError) -> Bool {
        _ = amqp_channel_open(state, probeChannel)
        let opened = amqp_get_rpc_reply(state)
        guard opened.reply_type == AMQP_RESPONSE_NORMAL else {
            throw probeFailure(opened, "opening a channel to look up \(what)")
        }
        declare(state, probeChannel)
        let reply = amqp_get_rpc_reply(state)
        if reply.reply_type == AMQP_RESPONSE_NORMAL {
            _ = amqp_channel_close(state, probeChannel, CRABBITMQ_REPLY_SUCCESS)
            let closed = amqp_get_rpc_reply(state)
            guard closed.reply_type == AMQP_RESPONSE_NORMAL else {
                throw probeFailure(closed, "closing the probe channel")
            }
            return true
        }
        if reply.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION, reply.reply.id == CRABBITMQ_CHANNEL_CLOSE_METHOD,
            let decoded = reply.reply.decoded,
            decoded.assumingMemoryBound(to: amqp_channel_close_t.self).pointee.reply_code == 404
        {
            var ok = amqp_channel_close_ok_t()
            guard
                amqp_send_method(state, probeChannel, CRABBITMQ_CHANNEL_CLOSE_OK_METHOD, &ok) == AMQP_STATUS_OK.rawValue
            else {
                isAlive = false
                throw AMQPError(kind: .connectionLost, message: "looking up \(what): the connection failed")
            }
            return false
        }
        throw probeFailure(reply, "looking up \(what)")
    }

    /// An unexpected answer on the probe channel: the connection's state is unknown, so it is given up.
    private func probeFailure(_ reply: amqp_rpc_reply_t, _ what: String) -> AMQPError {
        switch reply.reply_type {
        case AMQP_RESPONSE_LIBRARY_EXCEPTION:
            return lost(status: reply.library_error, what)
        case AMQP_RESPONSE_SERVER_EXCEPTION where reply.reply.id == CRABBITMQ_CONNECTION_CLOSE_METHOD:
            var error = connectionClosedByBroker(reply.reply)
            error.message = "\(what): \(error.message)"
            return error
        default:
            isAlive = false
            return AMQPError(kind: .protocolError, message: "\(what): unexpected answer from the broker")
        }
    }

    /// Passive queue.declare: the queue's depth and consumer count.
    func queueState(_ queue: String) throws(AMQPError) -> (messages: UInt32, consumers: UInt32) {
        defer { scratch.recycle() }
        let ok = amqp_queue_declare(state, channel, scratch.bytes(queue), 1, 0, 0, 0, amqp_empty_table)
        try check(amqp_get_rpc_reply(state), "inspecting queue '\(queue)'")
        guard let ok else { throw AMQPError(kind: .protocolError, message: "queue.declare-ok without fields") }
        return (ok.pointee.message_count, ok.pointee.consumer_count)
    }

    /// Purges a queue, returning how many messages it removed.
    func purge(_ queue: String) throws(AMQPError) -> UInt32 {
        defer { scratch.recycle() }
        let ok = amqp_queue_purge(state, channel, scratch.bytes(queue))
        try check(amqp_get_rpc_reply(state), "purging queue '\(queue)'")
        return ok?.pointee.message_count ?? 0
    }

    /// Deletes a queue (and the messages in it).
    func deleteQueue(_ queue: String) throws(AMQPError) {
        defer { scratch.recycle() }
        _ = amqp_queue_delete(state, channel, scratch.bytes(queue), 0, 0)
        try check(amqp_get_rpc_reply(state), "deleting queue '\(queue)'")
    }

    /// Deletes an exchange.
    func deleteExchange(_ exchange: String) throws(AMQPError) {
        defer { scratch.recycle() }
        _ = amqp_exchange_delete(state, channel, scratch.bytes(exchange), 0)
        try check(amqp_get_rpc_reply(state), "deleting exchange '\(exchange)'")
    }

    /// Removes an exchange-to-exchange binding (exchange.unbind; RabbitMQ answers ok when there
    /// is no such binding).
    func unbindExchange(_ binding: ExchangeBindingSpec) throws(AMQPError) {
        defer { scratch.recycle() }
        _ = amqp_exchange_unbind(
            state,
            channel,
            scratch.bytes(binding.destination),
            scratch.bytes(binding.source),
            scratch.bytes(binding.routingKey),
            scratch.table(binding.arguments)
        )
        try check(
            amqp_get_rpc_reply(state),
            "unbinding exchange '\(binding.destination)' from exchange '\(binding.source)'"
        )
    }

    /// basic.qos with a per-consumer prefetch count.
    func qos(prefetch: UInt16) throws(AMQPError) {
        _ = amqp_basic_qos(state, channel, 0, prefetch, 0)
        try check(amqp_get_rpc_reply(state), "setting prefetch")
    }

    /// basic.consume with manual acks; returns the broker-assigned consumer tag.
    func consume(queue: String) throws(AMQPError) -> String {
        defer { scratch.recycle() }
        let ok = amqp_basic_consume(state, channel, scratch.bytes(queue), amqp_empty_bytes, 0, 0, 0, amqp_empty_table)
        try check(amqp_get_rpc_reply(state), "consuming from queue '\(queue)'")
        guard let ok else { throw AMQPError(kind: .protocolError, message: "basic.consume-ok without fields") }
        return ok.pointee.consumer_tag.string
    }

    /// basic.cancel of one consumer.
    func cancel(consumerTag: String) throws(AMQPError) {
        defer { scratch.recycle() }
        _ = amqp_basic_cancel(state, channel, scratch.bytes(consumerTag))
        try check(amqp_get_rpc_reply(state), "cancelling consumer '\(consumerTag)'")
    }

    // MARK: - Publishing and acknowledging (no round trip)

    /// Sends basic.publish with header and body frames. Returns a librabbitmq status.
    func publish(_ message: OutgoingMessage) -> Int32 {
        guard isAlive else { return AMQP_STATUS_CONNECTION_CLOSED.rawValue }
        defer { scratch.recycle() }
        var properties = scratch.basicProperties(message.properties)
        let exchange = scratch.bytes(message.exchange)
        let routingKey = scratch.bytes(message.routingKey)
        return message.body.withUnsafeBytes { body in
            amqp_basic_publish(
                state,
                channel,
                exchange,
                routingKey,
                message.mandatory ? 1 : 0,
                0,
                &properties,
                amqp_bytes_t(len: body.count, bytes: UnsafeMutableRawPointer(mutating: body.baseAddress))
            )
        }
    }

    /// Sends basic.ack. Returns a librabbitmq status.
    func ack(_ tag: UInt64, multiple: Bool) -> Int32 {
        guard isAlive else { return AMQP_STATUS_CONNECTION_CLOSED.rawValue }
        return amqp_basic_ack(state, channel, tag, multiple ? 1 : 0)
    }

    /// Sends basic.nack. Returns a librabbitmq status.
    func nack(_ tag: UInt64, multiple: Bool, requeue: Bool) -> Int32 {
        guard isAlive else { return AMQP_STATUS_CONNECTION_CLOSED.rawValue }
        return amqp_basic_nack(state, channel, tag, multiple ? 1 : 0, requeue ? 1 : 0)
    }

    /// Sends basic.reject. Returns a librabbitmq status.
    func reject(_ tag: UInt64, requeue: Bool) -> Int32 {
        guard isAlive else { return AMQP_STATUS_CONNECTION_CLOSED.rawValue }
        return amqp_basic_reject(state, channel, tag, requeue ? 1 : 0)
    }

    // MARK: - Reading frames

    /// Whether librabbitmq holds frames or bytes not yet returned (then do not wait in `poll`).
    /// Whether writing `bytes` now cannot block the thread: the send queue is empty, or the
    /// bytes fit in the room left (half of SO_SNDBUF, which the kernel reports doubled, less what
    /// is queued). librabbitmq writes a publish with no deadline, and a broker that stops reading
    /// (a resource alarm, a stalled peer) would otherwise hold the loop thread inside it.
    func canWriteWithoutBlocking(_ bytes: Int) -> Bool {
        let queued = crabbitmq_send_queued(socketFD)
        // Nothing queued, or a socket that cannot say (then as before: write).
        guard queued > 0 else { return true }
        var size: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(socketFD, SOL_SOCKET, SO_SNDBUF, &size, &length) == 0 else { return false }
        return bytes <= Int(size) / 2 - Int(queued)
    }

    /// Whether the broker has sent something not read yet (buffered by librabbitmq, or waiting
    /// in the socket).
    var hasInputWaiting: Bool {
        if hasBufferedInput { return true }
        var descriptor = pollfd(fd: socketFD, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) > 0
    }

    var hasBufferedInput: Bool {
        isAlive && (amqp_frames_enqueued(state) != 0 || amqp_data_in_buffer(state) != 0)
    }

    /// Whether librabbitmq holds decoded frames queued during an RPC.
    var hasQueuedFrames: Bool {
        isAlive && amqp_frames_enqueued(state) != 0
    }

    /// Reads the next frame without waiting for the socket (`timeout` nil) or waiting at most `timeout`.
    /// Sends a heartbeat if one is due. Returns `AMQP_STATUS_TIMEOUT` when nothing is there.
    func nextFrame(_ frame: inout amqp_frame_t, timeout: Duration? = nil) -> Int32 {
        guard isAlive else { return AMQP_STATUS_CONNECTION_CLOSED.rawValue }
        var tv = timeout.map { timeval(duration: $0) } ?? timeval(tv_sec: 0, tv_usec: 0)
        return amqp_simple_wait_frame_noblock(state, &frame, &tv)
    }

    /// Reads the header and body frames that follow a basic.deliver or basic.return.
    /// - Parameter maxBodyBytes: a body announced larger than this is read frame by frame and
    ///   dropped, never held whole: the returned body is then empty and `size` tells its size.
    func readContent(maxBodyBytes: Int? = nil) throws(AMQPError) -> (MessageProperties, Data, size: UInt64) {
        let (properties, body, size, _) = try readContentKeepingExcerpts(maxBodyBytes: maxBodyBytes)
        return (properties, body, size)
    }

    /// `readContent`, and for a body over the limit its first and last bytes
    /// (`Delivery.withheldExcerptBytes` each).
    func readContentKeepingExcerpts(
        maxBodyBytes: Int? = nil
    ) throws(AMQPError) -> (MessageProperties, Data, size: UInt64, excerpts: [Data]) {
        var frame = amqp_frame_t()
        try readContentFrame(&frame)
        guard frame.frame_type == CRABBITMQ_FRAME_HEADER else {
            throw AMQPError(
                kind: .protocolError,
                message: "expected a content header frame, got type \(frame.frame_type)"
            )
        }
        guard let decoded = frame.payload.properties.decoded else {
            throw AMQPError(kind: .protocolError, message: "content header without properties")
        }
        let properties = FieldTableDecoder.properties(decoded.assumingMemoryBound(to: amqp_basic_properties_t.self))
        let announced = frame.payload.properties.body_size
        guard announced > 0 else { return (properties, Data(), 0, []) }
        // The announced size comes from the wire: it is checked before anything is reserved.
        let limit = UInt64(min(maxBodyBytes ?? Int.max, Int(UInt32.max)))
        guard announced <= limit, let size = Int(exactly: announced) else {
            let excerpts = try discardBody(announced)
            return (properties, Data(), announced, excerpts)
        }
        var body = Data(capacity: size)
        while body.count < size {
            try readContentFrame(&frame)
            guard frame.frame_type == CRABBITMQ_FRAME_BODY else {
                throw AMQPError(
                    kind: .protocolError,
                    message: "expected a content body frame, got type \(frame.frame_type)"
                )
            }
            let fragment = frame.payload.body_fragment
            guard fragment.len <= size - body.count else {
                throw AMQPError(kind: .protocolError, message: "the broker sent more body bytes than it announced")
            }
            if let bytes = fragment.bytes, fragment.len > 0 {
                body.append(bytes.assumingMemoryBound(to: UInt8.self), count: fragment.len)
            }
        }
        return (properties, body, announced, [])
    }

    /// Reads and drops the body frames of a message announced as `size` bytes, one frame at a
    /// time, so an oversized message costs no more memory than a frame and its two excerpts.
    /// - Returns: the body's first and last `Delivery.withheldExcerptBytes` bytes.
    private func discardBody(_ size: UInt64) throws(AMQPError) -> [Data] {
        let keep = Delivery.withheldExcerptBytes
        var frame = amqp_frame_t()
        var received: UInt64 = 0
        var head = Data()
        var tail = Data()
        while received < size {
            try readContentFrame(&frame)
            guard frame.frame_type == CRABBITMQ_FRAME_BODY else {
                throw AMQPError(
                    kind: .protocolError,
                    message: "expected a content body frame, got type \(frame.frame_type)"
                )
            }
            let fragment = frame.payload.body_fragment
            if let bytes = fragment.bytes, fragment.len > 0 {
                let chunk = UnsafeRawBufferPointer(start: bytes, count: fragment.len)
                if head.count < keep { head.append(contentsOf: chunk.prefix(keep - head.count)) }
                tail.append(contentsOf: chunk.suffix(keep))
                if tail.count > keep { tail.removeFirst(tail.count - keep) }
            }
            received += UInt64(fragment.len)
            releaseBuffers()
        }
        return [head, tail]
    }

    private func readContentFrame(_ frame: inout amqp_frame_t) throws(AMQPError) {
        let status = nextFrame(&frame, timeout: .seconds(30))
        guard status == AMQP_STATUS_OK.rawValue else {
            throw lost(status: status, "reading message content")
        }
        if frame.frame_type == CRABBITMQ_FRAME_METHOD {
            if frame.payload.method.id == CRABBITMQ_CHANNEL_CLOSE_METHOD {
                throw channelClosedByBroker(frame.payload.method)
            }
            if frame.payload.method.id == CRABBITMQ_CONNECTION_CLOSE_METHOD {
                throw connectionClosedByBroker(frame.payload.method)
            }
        }
    }

    /// Releases librabbitmq's per-channel buffers if no frames are queued; call after processing frames.
    /// Reads up to `limit` frames that librabbitmq can return without waiting and hands each to
    /// `handle`, releasing buffers after each; stops early when `handle` ends the connection.
    /// - Returns: how many frames were read, or the error when the connection was lost reading.
    func drainFrames(limit: Int, _ handle: (amqp_frame_t) -> Void) -> Result<Int, AMQPError> {
        var frame = amqp_frame_t()
        var processed = 0
        while isAlive, processed < limit {
            let status = nextFrame(&frame)
            if status == AMQP_STATUS_TIMEOUT.rawValue { break }
            if status != AMQP_STATUS_OK.rawValue { return .failure(lost(status: status, "reading from the broker")) }
            processed += 1
            handle(frame)
            releaseBuffers()
        }
        return .success(processed)
    }

    /// Whether the broker has been silent for two heartbeat intervals (plus half a second of grace)
    /// since `lastInbound`: librabbitmq cannot tell when it is only polled without waiting.
    func heartbeatOverdue(lastInbound: UInt64, now: UInt64) -> Bool {
        heartbeatSeconds > 0 && now - min(lastInbound, now) > UInt64(heartbeatSeconds) * 2_000_000_000 + 500_000_000
    }

    func releaseBuffers() {
        guard isAlive else { return }
        amqp_maybe_release_buffers(state)
    }

    // MARK: - Errors and closes

    /// Marks the connection dead and describes the library error `status`.
    func lost(status: Int32, _ what: String) -> AMQPError {
        isAlive = false
        isChannelOpen = false
        if status == AMQP_STATUS_HEARTBEAT_TIMEOUT.rawValue {
            return AMQPError(kind: .connectionLost, message: "\(what): heartbeat timeout, the broker stopped answering")
        }
        if status == AMQP_STATUS_TIMEOUT.rawValue {
            return AMQPError(kind: .timeout, message: "\(what): timed out waiting for the broker")
        }
        return AMQPError(kind: .connectionLost, message: "\(what): \(statusText(status))")
    }

    /// Marks the connection dead after the broker went silent for too long (no heartbeat).
    func heartbeatTimedOut() -> AMQPError {
        isAlive = false
        isChannelOpen = false
        return AMQPError(
            kind: .connectionLost,
            message: "heartbeat timeout: nothing received from the broker for two heartbeat intervals"
        )
    }

    /// Answers the broker's channel.close with close-ok and describes it.
    func channelClosedByBroker(_ method: amqp_method_t) -> AMQPError {
        isChannelOpen = false
        var ok = amqp_channel_close_ok_t()
        let status = amqp_send_method(state, channel, CRABBITMQ_CHANNEL_CLOSE_OK_METHOD, &ok)
        if status != AMQP_STATUS_OK.rawValue {
            isAlive = false
        }
        guard let decoded = method.decoded else {
            return AMQPError(kind: .channelClosed, message: "the broker closed the channel")
        }
        let close = decoded.assumingMemoryBound(to: amqp_channel_close_t.self).pointee
        let text = close.reply_text.string
        let kind: AMQPError.Kind
        switch close.reply_code {
        case 404: kind = .notFound
        case 406: kind = .preconditionFailed
        default: kind = .channelClosed
        }
        return AMQPError(kind: kind, message: text, replyCode: close.reply_code)
    }

    /// Answers the broker's connection.close with close-ok, marks the connection dead and describes it.
    func connectionClosedByBroker(_ method: amqp_method_t) -> AMQPError {
        var ok = amqp_connection_close_ok_t()
        _ = amqp_send_method(state, 0, CRABBITMQ_CONNECTION_CLOSE_OK_METHOD, &ok)
        isAlive = false
        isChannelOpen = false
        guard let decoded = method.decoded else {
            return AMQPError(kind: .connectionClosed, message: "the broker closed the connection")
        }
        let close = decoded.assumingMemoryBound(to: amqp_connection_close_t.self).pointee
        return AMQPError(
            kind: .connectionClosed,
            message: "the broker closed the connection: \(close.reply_text.string)",
            replyCode: close.reply_code
        )
    }

    /// Checks an RPC reply; on a channel or connection close, answers it and throws its error.
    private func check(_ reply: amqp_rpc_reply_t, _ what: @autoclosure () -> String) throws(AMQPError) {
        switch reply.reply_type {
        case AMQP_RESPONSE_NORMAL:
            return
        case AMQP_RESPONSE_LIBRARY_EXCEPTION:
            throw lost(status: reply.library_error, what())
        case AMQP_RESPONSE_SERVER_EXCEPTION:
            if reply.reply.id == CRABBITMQ_CHANNEL_CLOSE_METHOD {
                var error = channelClosedByBroker(reply.reply)
                error.message = "\(what()): \(error.message)"
                throw error
            }
            if reply.reply.id == CRABBITMQ_CONNECTION_CLOSE_METHOD {
                var error = connectionClosedByBroker(reply.reply)
                error.message = "\(what()): \(error.message)"
                throw error
            }
            throw AMQPError(kind: .protocolError, message: "\(what()): unexpected method \(reply.reply.id)")
        default:
            isAlive = false
            throw AMQPError(kind: .protocolError, message: "\(what()): no reply from the broker")
        }
    }

    /// Closes the channel and the connection politely (unacked deliveries return to their queues),
    /// then frees the connection. Safe to call on a dead connection.
    func close() {
        guard !destroyed else { return }
        if isAlive {
            if isChannelOpen {
                let reply = amqp_channel_close(state, channel, CRABBITMQ_REPLY_SUCCESS)
                isChannelOpen = false
                if reply.reply_type != AMQP_RESPONSE_NORMAL { isAlive = false }
            }
            if isAlive {
                _ = amqp_connection_close(state, CRABBITMQ_REPLY_SUCCESS)
            }
        }
        isAlive = false
        amqp_destroy_connection(state)
        destroyed = true
    }

    /// Gives the connection up without a close handshake (after the socket failed): no further library
    /// calls are made except freeing it, which `deinit` does once the loop drops its last reference (so a
    /// caller further up the stack may still hold the handle safely).
    func abort() {
        isAlive = false
        isChannelOpen = false
    }
}

extension timeval {
    init(duration: Duration) {
        let c = duration.components
        let seconds = max(c.seconds, 0)
        let micros = max(c.attoseconds / 1_000_000_000_000, 0)
        self.init(tv_sec: Int(seconds), tv_usec: Int(micros))
    }
}
