/// The one error type of the `Postgres` module.
///
/// `description` is safe for logs: it carries the kind, the SQLSTATE and the server's primary
/// message, never SQL text, parameter values or passwords. `debugDescription` adds the detail,
/// hint, the SQL text and where the error was raised.
public struct PostgresError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong, coarsely.
    public enum Kind: Sendable, Hashable {
        /// A URL or configuration value is malformed.
        case invalidConfiguration
        /// Opening a connection failed (server down, authentication, TLS).
        case connectionFailed
        /// An open connection broke while in use.
        case connectionLost
        /// The server rejected a statement; `sqlState` says why.
        case server
        /// No pooled connection became free within the acquire timeout.
        case poolTimeout
        /// The pool is closed.
        case poolClosed
        /// A value from the server could not be decoded into the requested Swift type.
        case decoding
        /// A Swift value could not be encoded as a query parameter.
        case encoding
        /// Migration files or the applied migrations are inconsistent.
        case migration
    }

    /// What went wrong.
    public var kind: Kind
    /// The SQLSTATE reported by the server (`PG_DIAG_SQLSTATE`), e.g. `"23505"`.
    public var sqlState: String?
    /// The primary message. It never contains SQL text, parameter values or passwords.
    public var message: String
    /// The constraint the server named (`PG_DIAG_CONSTRAINT_NAME`).
    public var constraint: String?
    /// The server's detail (`PG_DIAG_MESSAGE_DETAIL`). May contain values, so it appears only in `debugDescription`.
    public var detail: String?
    /// The SQL text of the failed statement; only in `debugDescription`.
    public var query: String?
    /// The server's hint (`PG_DIAG_MESSAGE_HINT`); only in `debugDescription`.
    public var hint: String?
    /// The server's full primary message when `message` had values redacted; only in `debugDescription`.
    public var unredactedMessage: String?
    /// The source file that raised the error.
    public var file: String
    /// The source line that raised the error.
    public var line: Int

    /// Makes an error.
    public init(
        kind: Kind,
        message: String,
        sqlState: String? = nil,
        constraint: String? = nil,
        detail: String? = nil,
        query: String? = nil,
        hint: String? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
        self.constraint = constraint
        self.detail = detail
        self.query = query
        self.hint = hint
        self.file = file
        self.line = line
    }

    /// True for SQLSTATE 23505 (`unique_violation`).
    public var isUniqueViolation: Bool { sqlState == "23505" }
    /// True for SQLSTATE 40001 (`serialization_failure`); retry the whole transaction.
    public var isSerializationFailure: Bool { sqlState == "40001" }
    /// True for SQLSTATE 40P01 (`deadlock_detected`); retry the whole transaction.
    public var isDeadlock: Bool { sqlState == "40P01" }

    /// True when the connection failed or broke: kinds `connectionFailed`/`connectionLost`, SQLSTATE class 08,
    /// or an administrator/crash/startup shutdown (57P01, 57P02, 57P03).
    public var isConnectionLoss: Bool {
        if kind == .connectionLost || kind == .connectionFailed { return true }
        guard let sqlState else { return false }
        return sqlState.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(sqlState)
    }

    /// True when retrying later may succeed: connection loss, serialization failure, deadlock,
    /// too many connections (53300), lock not available (55P03) or a pool timeout.
    public var isTransient: Bool {
        if isConnectionLoss || isSerializationFailure || isDeadlock || kind == .poolTimeout { return true }
        return sqlState == "53300" || sqlState == "55P03"
    }

    public var description: String {
        var text = "postgres \(kind.label)"
        if let sqlState {
            text += " \(sqlState)"
            if let name = Self.conditionNames[sqlState] { text += " (\(name))" }
        }
        return text + ": " + message
    }

    public var debugDescription: String {
        var text = description
        if let constraint { text += " [constraint: \(constraint)]" }
        if let unredactedMessage { text += " [server message: \(unredactedMessage)]" }
        if let detail { text += " [detail: \(detail)]" }
        if let hint { text += " [hint: \(hint)]" }
        if let query { text += " [query: \(query)]" }
        return text + " [at \(file):\(line)]"
    }

    /// Names of the conditions callers most often meet, for readable descriptions.
    static let conditionNames: [String: String] = [
        "08000": "connection_exception", "08003": "connection_does_not_exist", "08006": "connection_failure",
        "08001": "sqlclient_unable_to_establish_sqlconnection", "22P02": "invalid_text_representation",
        "22001": "string_data_right_truncation", "22003": "numeric_value_out_of_range",
        "23502": "not_null_violation", "23503": "foreign_key_violation", "23505": "unique_violation",
        "23514": "check_violation", "25P02": "in_failed_sql_transaction", "40001": "serialization_failure",
        "40P01": "deadlock_detected", "42601": "syntax_error", "42P01": "undefined_table",
        "42703": "undefined_column", "42883": "undefined_function", "53300": "too_many_connections",
        "55P03": "lock_not_available", "57014": "query_canceled", "57P01": "admin_shutdown",
        "57P02": "crash_shutdown", "57P03": "cannot_connect_now", "3D000": "invalid_catalog_name",
        "28P01": "invalid_password",
    ]
}

extension PostgresError.Kind {
    var label: String {
        switch self {
        case .invalidConfiguration: "invalid configuration"
        case .connectionFailed: "connection failed"
        case .connectionLost: "connection lost"
        case .server: "server error"
        case .poolTimeout: "pool timeout"
        case .poolClosed: "pool closed"
        case .decoding: "decoding error"
        case .encoding: "encoding error"
        case .migration: "migration error"
        }
    }
}

extension PostgresError {
    /// Server messages in SQLSTATE class 22 (data exception) quote the offending input, e.g.
    /// `invalid input syntax for type integer: "abc"`; this drops the quoted part.
    static func redactingValues(_ message: String, sqlState: String?) -> String {
        guard let sqlState, sqlState.hasPrefix("22"), let range = message.range(of: ": \"") else { return message }
        return message[..<range.lowerBound] + ": \"…\""
    }
}
