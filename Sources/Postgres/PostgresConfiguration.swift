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
                throw invalid("the value of \(key) is not valid percent-encoding")
            }
            switch key {
            case "sslmode":
                guard Self.sslModes.contains(value) else {
                    throw invalid(
                        "sslmode must be one of \(Self.sslModes.sorted().joined(separator: ", ")), not \"\(value)\""
                    )
                }
                sslMode = value
            case "application_name":
                applicationName = value
            case "connect_timeout":
                guard let seconds = Int(value), seconds > 0 else {
                    throw invalid("connect_timeout must be a positive number of seconds")
                }
                connectTimeout = .seconds(seconds)
            default:
                throw invalid(
                    "unsupported query parameter \"\(key)\" (supported: sslmode, application_name, connect_timeout)"
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
