/// Where and how to connect to PostgreSQL.
public struct PostgresConfiguration: Sendable, Hashable {
    /// Host name, IP address, or a socket directory starting with `/`.
    public var host: String
    /// TCP port; 5432 by default.
    public var port: Int
    /// Role to log in as.
    public var user: String
    /// Password, if the server asks for one.
    public var password: String?
    /// Database name.
    public var database: String
    /// How long opening a connection may take (rounded up to whole seconds, at least 2 s for libpq).
    public var connectTimeout: Duration
    /// `application_name` shown in `pg_stat_activity`.
    public var applicationName: String
    /// libpq `sslmode` (`disable`, `allow`, `prefer`, `require`, `verify-ca`, `verify-full`); nil leaves libpq's default.
    public var sslMode: String?
    /// Server run-time parameters sent at connect (`-c key=value`), e.g. `["search_path": "t1"]`.
    public var options: [String: String]
    /// How long one statement may run on the server (`statement_timeout`); nil leaves the
    /// server's setting (usually none).
    public var statementTimeout: Duration?
    /// How long a statement may wait for a lock, row or advisory (`lock_timeout`); nil leaves
    /// the server's setting. A stuck lock holder then costs a waiting job seconds, not forever.
    public var lockTimeout: Duration?
    /// How long a session may sit idle inside an open transaction before the server ends it
    /// (`idle_in_transaction_session_timeout`), releasing its locks; nil leaves the server's.
    public var idleInTransactionTimeout: Duration?
    /// TCP keepalive probes on the connection's socket, so a peer that vanished without FIN or
    /// RST is noticed while the connection is idle; nil leaves the kernel's (2 hours).
    public var keepalive: TCPKeepalive?
    /// How long sent data may stay unacknowledged before the kernel drops the connection
    /// (`tcp_user_timeout`); nil leaves the kernel's (about 15 minutes of retransmissions).
    public var tcpUserTimeout: Duration?
    /// How long the client waits for the server's answer to one command before it gives the
    /// connection up as dead (a network cut, or a server that hung). nil: `statementTimeout`
    /// plus 15 s when a statement timeout is set, else wait forever. The server answers every
    /// statement within `statementTimeout` (with an error if need be), so this fires only when
    /// the server or the path to it is gone.
    public var responseTimeout: Duration?

    /// TCP keepalive settings (libpq `keepalives_idle`, `keepalives_interval`, `keepalives_count`).
    public struct TCPKeepalive: Sendable, Hashable {
        /// Idle time before the first probe.
        public var idle: Duration
        /// Time between unanswered probes.
        public var interval: Duration
        /// Unanswered probes before the connection is dropped.
        public var count: Int

        /// Creates keepalive settings.
        public init(idle: Duration, interval: Duration, count: Int) {
            self.idle = idle
            self.interval = interval
            self.count = count
        }

        /// 10 s idle, then a probe every 5 s, dropped after 3 unanswered: a dead peer is noticed
        /// within about 25 s.
        public static let standard = TCPKeepalive(idle: .seconds(10), interval: .seconds(5), count: 3)
    }

    /// The defaults: 30 s per statement, 10 s per lock wait, 60 s idle in a transaction,
    /// keepalives after 10 s idle, 20 s for unacknowledged data.
    public static let defaultStatementTimeout: Duration = .seconds(30)
    public static let defaultLockTimeout: Duration = .seconds(10)
    public static let defaultIdleInTransactionTimeout: Duration = .seconds(60)
    public static let defaultTCPUserTimeout: Duration = .seconds(20)

    /// The client's wait for an answer: `responseTimeout`, else `statementTimeout` + 15 s, else none.
    public var effectiveResponseTimeout: Duration? {
        if let responseTimeout { return responseTimeout }
        return statementTimeout.map { $0 + .seconds(15) }
    }

    static let sslModes: Set<String> = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]

    /// Makes a configuration; the other settings take their defaults.
    public init(host: String, port: Int = 5432, user: String, password: String? = nil, database: String) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
        self.connectTimeout = .seconds(5)
        self.applicationName = "astrosvitla"
        self.sslMode = nil
        self.options = [:]
        self.statementTimeout = Self.defaultStatementTimeout
        self.lockTimeout = Self.defaultLockTimeout
        self.idleInTransactionTimeout = Self.defaultIdleInTransactionTimeout
        self.keepalive = .standard
        self.tcpUserTimeout = Self.defaultTCPUserTimeout
        self.responseTimeout = nil
    }

    /// Parses a `postgres://` or `postgresql://` URL: `postgres://user:password@host:port/database?sslmode=…`.
    ///
    /// User, password and database are percent-decoded. Recognised query items: `sslmode`,
    /// `application_name` and `connect_timeout` (seconds). The database defaults to the user name.
    /// - Throws: `PostgresError` of kind `.invalidConfiguration` naming what is wrong (never the password).
    public init(url: String) throws(PostgresError) {
        func invalid(_ reason: String) -> PostgresError {
            PostgresError(kind: .invalidConfiguration, message: "invalid database URL: \(reason)")
        }
        var rest: Substring
        let lowered = url.lowercased()
        if lowered.hasPrefix("postgres://") {
            rest = url.dropFirst("postgres://".count)
        } else if lowered.hasPrefix("postgresql://") {
            rest = url.dropFirst("postgresql://".count)
        } else {
            throw invalid("the scheme must be postgres:// or postgresql://")
        }
        // A raw "/", "?" or "#" in the user name or password would end the authority early and
        // push part of the password into the path or query, where an error could quote it.
        // Errors below therefore never quote text from the URL, and this case gets its own.
        if let lastAt = rest.lastIndex(of: "@"), rest[..<lastAt].contains(where: { "/?#".contains($0) }) {
            throw invalid(
                "the user name or password contains a raw '/', '?' or '#' (or the rest of the URL an '@'): "
                    + "percent-encode them (%2F, %3F, %23, %40)"
            )
        }
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        var path: Substring = ""
        // The authority ends at the first "/" after the user info (a password may not contain a raw "/").
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        path = rest[authorityEnd...]
        let authority = rest[..<authorityEnd]

        guard let at = authority.lastIndex(of: "@") else { throw invalid("missing user name (user@host)") }
        let userInfo = authority[..<at]
        let hostPort = authority[authority.index(after: at)...]

        let rawUser: Substring
        var password: String?
        if let colon = userInfo.firstIndex(of: ":") {
            rawUser = userInfo[..<colon]
            guard let decoded = Self.percentDecode(userInfo[userInfo.index(after: colon)...]) else {
                throw invalid("the password is not valid percent-encoding")
            }
            password = decoded
        } else {
            rawUser = userInfo
        }
        guard let user = Self.percentDecode(rawUser) else {
            throw invalid("the user name is not valid percent-encoding")
        }
        guard !user.isEmpty else { throw invalid("missing user name") }

        var host: Substring
        var portText: Substring?
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { throw invalid("unterminated IPv6 address") }
            host = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let after = hostPort[hostPort.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("unexpected text after the IPv6 address") }
                portText = after.dropFirst()
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = hostPort[..<colon]
            portText = hostPort[hostPort.index(after: colon)...]
        } else {
            host = hostPort
        }
        guard !host.isEmpty else { throw invalid("missing host") }
        var port = 5432
        if let portText {
            guard portText.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(portText),
                (1...65_535).contains(value)
            else {
                throw invalid("the port must be a number from 1 to 65535")
            }
            port = value
        }

        var database = user
        if path.count > 1 {
            guard let decoded = Self.percentDecode(path.dropFirst()) else {
                throw invalid("the database name is not valid percent-encoding")
            }
            database = decoded
        }
        guard let decodedHost = Self.percentDecode(host) else {
            throw invalid("the host is not valid percent-encoding")
        }

        self.init(host: decodedHost, port: port, user: user, password: password, database: database)

        for item in query.split(separator: "&") where !item.isEmpty {
            let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(pair[0])
            guard let value = pair.count > 1 ? Self.percentDecode(pair[1]) : "" else {
                throw invalid("a query parameter's value is not valid percent-encoding")
            }
            switch key {
            case "sslmode":
                guard Self.sslModes.contains(value) else {
                    throw invalid("sslmode must be one of \(Self.sslModes.sorted().joined(separator: ", "))")
                }
                sslMode = value
            case "application_name":
                applicationName = value
            case "connect_timeout":
                guard let seconds = Int(value), (1...3600).contains(seconds) else {
                    throw invalid("connect_timeout must be a number of seconds from 1 to 3600")
                }
                connectTimeout = .seconds(seconds)
            default:
                // The name is quoted only when it is a plain word: anything else may be part of a
                // password that slipped into the query.
                let name = Self.isPlainWord(key) ? " \"\(key)\"" : ""
                throw invalid(
                    "unsupported query parameter\(name) (supported: sslmode, application_name, connect_timeout)"
                )
            }
        }
    }

    /// The configuration as a URL with the password replaced by `***`, for logs.
    public var redactedURL: String {
        var text = "postgres://" + Self.percentEncode(user)
        if password != nil { text += ":***" }
        let hostText = host.contains(":") ? "[\(host)]" : Self.percentEncode(host)
        text += "@\(hostText):\(port)/\(Self.percentEncode(database))"
        var items: [String] = []
        if let sslMode { items.append("sslmode=\(Self.percentEncode(sslMode))") }
        if applicationName != "astrosvitla" {
            items.append("application_name=\(Self.percentEncode(applicationName))")
        }
        if connectTimeout != .seconds(5) { items.append("connect_timeout=\(connectTimeoutSeconds)") }
        if !items.isEmpty { text += "?" + items.joined(separator: "&") }
        return text
    }

    /// `connectTimeout` rounded up to whole seconds, at least 1.
    var connectTimeoutSeconds: Int {
        let (seconds, attoseconds) = connectTimeout.components
        return max(1, Int(seconds) + (attoseconds > 0 ? 1 : 0))
    }

    /// Letters, digits and `_`, at most 32 of them: safe to quote in an error.
    static func isPlainWord(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 32
            && text.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || byte == UInt8(ascii: "_")
            }
    }

    /// Decodes `%XX` escapes; nil when an escape is malformed or the bytes are not UTF-8.
    static func percentDecode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Percent-encodes everything but RFC 3986 unreserved characters.
    static func percentEncode(_ text: String) -> String {
        var result = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                result += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return result
    }
}
