import RetryBackoff

/// Where and how to connect to a RabbitMQ broker.
///
/// Build it from a URL (`AMQPConfiguration(url:)`) or set the fields directly.
public struct AMQPConfiguration: Sendable, Hashable {
    /// The broker's host name or IP address.
    public var host: String = "127.0.0.1"
    /// The broker's port (5672 plain, 5671 TLS).
    public var port: Int = 5672
    /// The virtual host, decoded (`"/"` for the default one).
    public var virtualHost: String = "/"
    /// The user name for SASL PLAIN.
    public var user: String = "guest"
    /// The password for SASL PLAIN. Never logged or shown in errors.
    public var password: String = "guest"

    /// TLS settings for `amqps://` connections.
    public struct TLS: Sendable, Hashable {
        /// A PEM file of CA certificates to trust; `nil` uses the system's default trust store.
        public var caCertificatePath: String?
        /// A PEM client certificate, for brokers that require one.
        public var clientCertificatePath: String?
        /// The PEM private key of `clientCertificatePath`.
        public var clientKeyPath: String?
        /// Whether the broker's certificate chain must verify against the trusted CAs.
        public var verifyPeer: Bool = true
        /// Whether the broker's certificate must name `host`.
        public var verifyHostname: Bool = true

        /// Creates TLS settings.
        public init(
            caCertificatePath: String? = nil,
            clientCertificatePath: String? = nil,
            clientKeyPath: String? = nil,
            verifyPeer: Bool = true,
            verifyHostname: Bool = true
        ) {
            self.caCertificatePath = caCertificatePath
            self.clientCertificatePath = clientCertificatePath
            self.clientKeyPath = clientKeyPath
            self.verifyPeer = verifyPeer
            self.verifyHostname = verifyHostname
        }
    }

    /// TLS settings; non-nil means the connection uses TLS (`amqps://`).
    public var tls: TLS?
    /// The heartbeat interval requested from the broker; `.zero` disables heartbeats.
    public var heartbeat: Duration = .seconds(30)
    /// How long opening the socket and the AMQP handshake may take.
    public var connectTimeout: Duration = .seconds(10)
    /// Sent as the `connection_name` client property, shown in the management UI.
    public var connectionName: String = "astrosvitla"
    /// The largest message body accepted, in bytes; nil: no limit. A consumer does not buffer a
    /// larger body (it reads and drops it, and hands out the delivery with an empty body and
    /// `Delivery.isBodyWithheld`), and a publisher refuses to send one (`.messageTooLarge`).
    /// Set it to the broker's `max_message_size`.
    public var maxBodyBytes: Int?

    /// How reconnect attempts are spaced after a connection is lost.
    public struct Reconnect: Sendable, Hashable {
        /// The delay before the first attempt.
        public var initialDelay: Duration = .milliseconds(100)
        /// The longest delay between attempts.
        public var maxDelay: Duration = .seconds(10)
        /// How much the delay grows after each failed attempt.
        public var multiplier: Double = 2

        /// The schedule of these reconnects (the package's one `Backoff`): attempt `n` waits a
        /// random time in `[ceiling/2, ceiling]`, `ceiling = min(maxDelay, initialDelay ×
        /// multiplier^(n-1))`, so that many clients restarted together do not reconnect in
        /// lockstep; no bound on attempts, and never less than 1 ms.
        public var backoff: Backoff {
            Backoff(
                initialDelay: max(initialDelay, .milliseconds(1)),
                maxDelay: maxDelay,
                multiplier: multiplier,
                jitter: 0.5
            )
        }

        /// Creates a reconnect policy.
        public init(
            initialDelay: Duration = .milliseconds(100),
            maxDelay: Duration = .seconds(10),
            multiplier: Double = 2
        ) {
            self.initialDelay = initialDelay
            self.maxDelay = maxDelay
            self.multiplier = multiplier
        }
    }

    /// How reconnect attempts are spaced.
    public var reconnect: Reconnect = .init()

    /// Creates the default configuration: guest/guest on 127.0.0.1:5672, vhost "/".
    public init() {}

    /// Parses an AMQP URI.
    ///
    /// `amqp://user:pass@host:port/vhost` and `amqps://…` (TLS, default port 5671). User, password and
    /// vhost are percent-decoded; an empty path, `/` and `/%2F` all mean the vhost `/`, and `/prod` means
    /// `prod`. Query items: `heartbeat` (seconds), `connection_timeout` (milliseconds), `cacertfile`,
    /// `certfile`, `keyfile` (TLS only), `verify=verify_peer|verify_none`, `name` (the connection name).
    /// - Parameter url: The URI.
    /// - Throws: `AMQPError` of kind `.invalidConfiguration` naming the problem.
    public init(url: String) throws(AMQPError) {
        self.init()
        let schemeEnd = url.range(of: "://")
        guard let schemeEnd else {
            throw Self.invalid("the URL has no scheme: expected amqp:// or amqps://")
        }
        let scheme = url[url.startIndex..<schemeEnd.lowerBound].lowercased()
        switch scheme {
        case "amqp":
            port = 5672
        case "amqps":
            port = 5671
            tls = TLS()
        default:
            throw Self.invalid("unsupported URL scheme: expected amqp:// or amqps://")
        }
        var rest = url[schemeEnd.upperBound...]
        // A raw "/", "?" or "#" in the user name or password would end the authority early and
        // push part of the password into the path or query, where an error would quote it.
        if let lastAt = rest.lastIndex(of: "@"), rest[..<lastAt].contains(where: { "/?#".contains($0) }) {
            throw Self.invalid(
                "the user name or password contains a raw '/', '?' or '#' (or the rest of the URL an '@'): "
                    + "percent-encode them (%2F, %3F, %23, %40)"
            )
        }

        var query: Substring = ""
        if let q = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: q)...]
            rest = rest[..<q]
        }
        if let fragment = rest.firstIndex(of: "#") {
            rest = rest[..<fragment]
        }
        var authority = rest
        var path: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            authority = rest[..<slash]
            path = rest[slash...]
        }

        var hostPort = authority
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            hostPort = authority[authority.index(after: at)...]
            if let colon = userInfo.firstIndex(of: ":") {
                user = try Self.percentDecode(userInfo[..<colon], what: "user name")
                password = try Self.percentDecode(userInfo[userInfo.index(after: colon)...], what: "password")
            } else {
                user = try Self.percentDecode(userInfo, what: "user name")
                password = ""
            }
        }

        var hostPart = hostPort
        var portPart: Substring?
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else {
                throw Self.invalid("the IPv6 address in the URL lacks its closing ']'")
            }
            hostPart = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let after = hostPort[hostPort.index(after: close)...]
            if after.hasPrefix(":") {
                portPart = after.dropFirst()
            } else if !after.isEmpty {
                throw Self.invalid("unexpected text '\(after)' after the IPv6 address")
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            hostPart = hostPort[..<colon]
            portPart = hostPort[hostPort.index(after: colon)...]
        }
        if !hostPart.isEmpty {
            host = try Self.percentDecode(hostPart, what: "host")
        }
        if let portPart {
            guard let value = Int(portPart), (1...65535).contains(value) else {
                throw Self.invalid("invalid port '\(portPart)': expected a number from 1 to 65535")
            }
            port = value
        }

        if path.isEmpty || path == "/" {
            virtualHost = "/"
        } else {
            let encoded = path.dropFirst()
            if encoded.contains("/") {
                throw Self.invalid("the vhost in the URL path must be percent-encoded ('/' as %2F), got '\(encoded)'")
            }
            virtualHost = try Self.percentDecode(encoded, what: "vhost")
        }

        try applyQuery(query)
    }

    private mutating func applyQuery(_ query: Substring) throws(AMQPError) {
        guard !query.isEmpty else { return }
        for item in query.split(separator: "&", omittingEmptySubsequences: true) {
            let key: String
            let value: String
            if let eq = item.firstIndex(of: "=") {
                key = try Self.percentDecode(item[..<eq], what: "query item name")
                value = try Self.percentDecode(item[item.index(after: eq)...], what: "query item '\(key)'")
            } else {
                key = try Self.percentDecode(item, what: "query item name")
                value = ""
            }
            switch key {
            case "heartbeat":
                guard let seconds = Int(value), (0...65_535).contains(seconds) else {
                    throw Self.invalid("query item heartbeat must be a number of seconds from 0 to 65535")
                }
                heartbeat = .seconds(seconds)
            case "connection_timeout":
                guard let ms = Int(value), (1...3_600_000).contains(ms) else {
                    throw Self.invalid(
                        "query item connection_timeout must be a number of milliseconds from 1 to 3600000"
                    )
                }
                connectTimeout = .milliseconds(ms)
            case "cacertfile", "certfile", "keyfile", "verify":
                guard tls != nil else {
                    throw Self.invalid("query item \(key) needs an amqps:// URL")
                }
                switch key {
                case "cacertfile": tls?.caCertificatePath = value
                case "certfile": tls?.clientCertificatePath = value
                case "keyfile": tls?.clientKeyPath = value
                default:
                    switch value {
                    case "verify_peer":
                        tls?.verifyPeer = true
                        tls?.verifyHostname = true
                    case "verify_none":
                        tls?.verifyPeer = false
                        tls?.verifyHostname = false
                    default:
                        throw Self.invalid("query item verify must be verify_peer or verify_none")
                    }
                }
            case "name", "connection_name":
                connectionName = value
            default:
                let name = Self.isPlainWord(key) ? " '\(key)'" : ""
                throw Self.invalid(
                    "unknown query item\(name): supported are heartbeat, connection_timeout, cacertfile, "
                        + "certfile, keyfile, verify, name"
                )
            }
        }
    }

    /// The URL of this configuration with the password replaced by `***`, for logs.
    public var redactedURL: String {
        var url = tls == nil ? "amqp://" : "amqps://"
        url += Self.percentEncode(user)
        url += ":***@"
        url += host.contains(":") ? "[\(host)]" : host
        url += ":\(port)/"
        url += Self.percentEncode(virtualHost)
        var query: [String] = []
        let seconds = heartbeat.components.seconds
        if heartbeat != .seconds(30) {
            query.append("heartbeat=\(seconds)")
        }
        if connectionName != "astrosvitla" {
            query.append("name=\(Self.percentEncode(connectionName))")
        }
        if let tls {
            if let ca = tls.caCertificatePath { query.append("cacertfile=\(Self.percentEncode(ca))") }
            if let cert = tls.clientCertificatePath { query.append("certfile=\(Self.percentEncode(cert))") }
            if let key = tls.clientKeyPath { query.append("keyfile=\(Self.percentEncode(key))") }
            if !tls.verifyPeer { query.append("verify=verify_none") }
        }
        if !query.isEmpty {
            url += "?" + query.joined(separator: "&")
        }
        return url
    }

    /// Lowercase letters and `_`, at most 32: safe to quote in an error.
    static func isPlainWord(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 32
            && text.utf8.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || $0 == UInt8(ascii: "_") }
    }

    private static func invalid(_ message: String) -> AMQPError {
        AMQPError(kind: .invalidConfiguration, message: message)
    }

    static func percentDecode(_ text: Substring, what: String) throws(AMQPError) -> String {
        guard text.contains("%") else { return String(text) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(Self.hexValue), let low = iterator.next().flatMap(Self.hexValue)
            else {
                throw invalid("the \(what) in the URL has a malformed percent escape")
            }
            bytes.append(high << 4 | low)
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw invalid("the \(what) in the URL is not valid UTF-8 after percent-decoding")
        }
        // A C string ends at NUL: %00 would connect to (or log in with) something else than the
        // URL says.
        guard !bytes.contains(0) else { throw invalid("the \(what) in the URL contains %00") }
        return decoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    static func percentEncode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(hex[Int(byte >> 4)])
                out.unicodeScalars.append(hex[Int(byte & 0x0F)])
            }
        }
        return out
    }
}
