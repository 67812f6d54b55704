/// The one error type of the AMQP module.
///
/// `description` never contains a password; the broker's reply text is included because it names the
/// queue or exchange and the reason (for example `PRECONDITION_FAILED - inequivalent arg 'durable'`).
public struct AMQPError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong, coarsely: decides whether a caller retries, dead-letters or gives up.
    public enum Kind: Sendable, Hashable {
        /// The configuration or URL is unusable (bad scheme, port, query item, vhost encoding).
        case invalidConfiguration
        /// No connection could be established (DNS, TCP, handshake timeout, vhost refused).
        case connectionFailed
        /// The broker refused the credentials.
        case authenticationFailed
        /// An established connection died (socket error, heartbeat timeout).
        case connectionLost
        /// The broker closed the channel (reply code in `replyCode`).
        case channelClosed
        /// The broker closed the connection (for example 320 CONNECTION_FORCED on shutdown).
        case connectionClosed
        /// TLS setup or verification failed (CA, certificate, hostname).
        case tls
        /// The operation did not complete in time.
        case timeout
        /// The broker answered a publish with basic.nack.
        case publishNacked
        /// A mandatory message could not be routed to any queue (basic.return).
        case unroutable
        /// The delivery came on an earlier connection, or was already acknowledged.
        case staleDelivery
        /// The publisher or consumer was closed.
        case closed
        /// The broker or library sent something unexpected.
        case protocolError
        /// The queue or exchange does not exist (reply code 404).
        case notFound
        /// A declaration conflicts with the existing entity, or a precondition failed (reply code 406).
        case preconditionFailed
        /// A message body is larger than `AMQPConfiguration.maxBodyBytes`: it was not sent.
        case messageTooLarge
    }

    /// What went wrong, coarsely.
    public var kind: Kind
    /// The AMQP reply code of the channel.close or connection.close behind this error (404, 406, 320…).
    public var replyCode: UInt16?
    /// What happened and what to do; never contains a password.
    public var message: String
    /// The source file that raised the error.
    public var file: String
    /// The source line that raised the error.
    public var line: UInt

    /// Creates an error.
    /// - Parameters:
    ///   - kind: The error class.
    ///   - message: What happened and what to do. Must not contain secrets.
    ///   - replyCode: The broker's reply code, if the error comes from a channel or connection close.
    public init(
        kind: Kind,
        message: String,
        replyCode: UInt16? = nil,
        file: String = #fileID,
        line: UInt = #line
    ) {
        self.kind = kind
        self.message = message
        self.replyCode = replyCode
        self.file = file
        self.line = line
    }

    /// Whether retrying the same operation later may succeed (connection trouble, timeouts, nacks).
    public var isRetriable: Bool {
        switch kind {
        case .connectionFailed, .connectionLost, .connectionClosed, .channelClosed, .timeout, .publishNacked,
            .protocolError:
            return true
        case .invalidConfiguration, .authenticationFailed, .tls, .unroutable, .staleDelivery, .closed, .notFound,
            .preconditionFailed, .messageTooLarge:
            return false
        }
    }

    public var description: String {
        if let replyCode {
            return "AMQPError.\(kind) (\(replyCode)): \(message)"
        }
        return "AMQPError.\(kind): \(message)"
    }

    public var debugDescription: String {
        "\(description) [\(file):\(line)]"
    }
}

/// The outcome of a batch publish in which some messages failed.
///
/// Every index not listed in `failures` was confirmed by the broker.
public struct AMQPBatchError: Error, Sendable, CustomStringConvertible {
    /// The failed messages' indices in the published array, with the reason for each.
    public var failures: [Int: AMQPError]

    /// Creates a batch error.
    /// - Parameter failures: The failed indices and their errors.
    public init(failures: [Int: AMQPError]) {
        self.failures = failures
    }

    public var description: String {
        let sorted = failures.sorted { $0.key < $1.key }
        let shown = sorted.prefix(5).map { "#\($0.key): \($0.value)" }.joined(separator: "; ")
        let more = sorted.count > 5 ? "; and \(sorted.count - 5) more" : ""
        return "AMQPBatchError: \(failures.count) message(s) failed: \(shown)\(more)"
    }
}
