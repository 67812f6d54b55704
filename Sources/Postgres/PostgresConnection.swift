import Foundation
import Logging

/// One PostgreSQL connection (libpq, blocking).
///
/// - Important: Not `Sendable` and not thread-safe. A connection lives on one thread: a pooled one on
///   its pool thread, handed only to closures running there. Its calls block that thread, so never
///   use one from the Swift concurrency pool; go through `PostgresPool`.
public final class PostgresConnection {
    private let handle: PGConnHandle
    private let logger: Logger
    private var savepointDepth = 0
    /// Set when the session state is unknown (e.g. a ROLLBACK failed), so the pool must not reuse it.
    private var poisoned = false

    private init(handle: PGConnHandle, logger: Logger) {
        self.handle = handle
        self.logger = logger
    }

    deinit {
        handle.finish()
    }

    /// Opens a connection, blocking the calling thread.
    ///
    /// Session settings are sent with the startup packet: `client_encoding=UTF8`, `DateStyle=ISO`,
    /// `TimeZone=UTC`, `extra_float_digits=3` and `configuration.options`.
    /// - Throws: `.connectionFailed` with libpq's reason, or `.invalidConfiguration`.
    public static func connect(
        _ configuration: PostgresConfiguration,
        logger: Logger
    ) throws(PostgresError)
        -> PostgresConnection
    {
        let handle = try PGConnHandle.connect(configuration, logger: logger)
        var logger = logger
        logger[metadataKey: "postgres.backend_pid"] = "\(handle.backendPID)"
        logger.debug("postgres connection opened", metadata: ["postgres.url": "\(configuration.redactedURL)"])
        return PostgresConnection(handle: handle, logger: logger)
    }

    /// Runs one statement with `$1…$n` parameters (prepared once per connection). Parameters
    /// travel in text format, except `Data`, which travels as binary `bytea`.
    /// - Parameter resultFormat: `.binary` for a statement that reads large `bytea` values (see
    ///   `PostgresResultFormat` for what decodes it); text by default.
    /// - Returns: The rows (empty for commands) and the number of rows affected.
    /// - Throws: `.server` with the SQLSTATE, `.connectionLost`, or `.encoding` for a parameter that cannot be sent.
    @discardableResult
    public func query(
        _ sql: SQL,
        _ parameters: [any PostgresBindable] = [],
        resultFormat: PostgresResultFormat = .text
    ) throws(PostgresError) -> PostgresResult {
        var encoded: [PostgresParameter] = []
        encoded.reserveCapacity(parameters.count)
        for (index, parameter) in parameters.enumerated() {
            do {
                encoded.append(try parameter.makePostgresParameter())
            } catch {
                var error = error
                error.message = "parameter $\(index + 1): " + error.message
                error.query = sql.text
                throw error
            }
        }
        let outcome = try handle.execute(sql.text, parameters: encoded, resultFormat: resultFormat)
        let rows = outcome.rows.map { PostgresRow(columns: outcome.columns, values: $0) }
        return PostgresResult(rows: rows, rowsAffected: outcome.rowsAffected, columnNames: outcome.columns.names)
    }

    /// Runs one statement with parameters and returns the number of rows it affected.
    /// - Throws: as `query(_:_:)`.
    @discardableResult
    public func execute(_ sql: SQL, _ parameters: [any PostgresBindable] = []) throws(PostgresError) -> Int {
        try query(sql, parameters).rowsAffected
    }

    /// Runs several statements with no parameters (`PQexec`). For migrations and fixed DDL only.
    /// - Throws: `.server` for the first failing statement, `.connectionLost`.
    public func executeScript(_ sql: SQL) throws(PostgresError) {
        _ = try handle.executeScript(sql.text)
    }

    /// Transaction isolation levels.
    public enum IsolationLevel: String, Sendable {
        case readCommitted = "READ COMMITTED"
        case repeatableRead = "REPEATABLE READ"
        case serializable = "SERIALIZABLE"
    }

    /// Runs `body` in a transaction: `BEGIN ISOLATION LEVEL …`, `body`, `COMMIT`.
    ///
    /// If `body` throws, the transaction is rolled back and the body's error rethrown. Called inside a
    /// transaction, it uses a savepoint instead (the isolation level is then the outer one's).
    /// - Returns: What `body` returned.
    /// - Throws: The body's error; a `PostgresError` if BEGIN or COMMIT fails (e.g. 40001 at commit), or if
    ///   COMMIT turned into a rollback because a statement in `body` failed and its error was swallowed.
    public func withTransaction<T>(
        isolation: IsolationLevel = .readCommitted,
        _ body: (PostgresConnection) throws -> T
    ) throws -> T {
        if handle.isInTransaction { return try withSavepoint(body) }
        try executeScript(SQL(unsafeSQL: "BEGIN ISOLATION LEVEL \(isolation.rawValue)"))
        let value: T
        do {
            value = try body(self)
        } catch {
            rollBack("ROLLBACK")
            throw error
        }
        let outcome = try handle.executeScript("COMMIT")
        if outcome.commandStatus == "ROLLBACK" {
            throw PostgresError(
                kind: .server,
                message: "the transaction was rolled back at COMMIT because a statement in it had failed",
                sqlState: "25P02"
            )
        }
        return value
    }

    private func withSavepoint<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        savepointDepth += 1
        defer { savepointDepth -= 1 }
        let name = "astro_savepoint_\(savepointDepth)"
        try executeScript(SQL(unsafeSQL: "SAVEPOINT \(name)"))
        let value: T
        do {
            value = try body(self)
        } catch {
            rollBack("ROLLBACK TO SAVEPOINT \(name); RELEASE SAVEPOINT \(name)")
            throw error
        }
        try executeScript(SQL(unsafeSQL: "RELEASE SAVEPOINT \(name)"))
        return value
    }

    /// Rolls back after a failed body; if that fails on a live connection, the session is not reused.
    private func rollBack(_ statement: String) {
        guard !handle.isBad else { return }
        do {
            _ = try handle.executeScript(statement)
        } catch {
            poisoned = true
            logger.info("postgres rollback failed", metadata: ["postgres.error": "\(error)"])
        }
    }

    /// True when the connection is closed or broken (`PQstatus` is `CONNECTION_BAD`) or its session
    /// state is unknown; a pool discards such a connection.
    public var isBroken: Bool { handle.isBad || poisoned }

    /// Closes the connection. Idempotent; `deinit` closes too.
    public func close() {
        if handle.isOpen {
            handle.finish()
            logger.debug("postgres connection closed")
        }
    }

    /// How long a command waits for the server's answer before the connection is given up as
    /// dead (closed, `.connectionLost`); nil waits forever. Starts as the configuration's
    /// `effectiveResponseTimeout`.
    /// - Important: a caller that changes it for long-running work (migrations) restores it
    ///   before the connection goes back to its pool.
    public var responseTimeout: Duration? {
        get { handle.responseTimeout }
        set { handle.responseTimeout = newValue }
    }

    /// A SCRAM-SHA-256 verifier of `password` for role `user`, computed on this side: give it
    /// to `ALTER ROLE … PASSWORD` so the password itself never travels to the server.
    /// - Throws: `.encoding` for a NUL byte; `.server` when libpq cannot compute it.
    public func scramVerifier(password: String, user: String) throws(PostgresError) -> String {
        try handle.scramVerifier(password: password, user: user)
    }

    /// The server process serving this connection.
    public var backendPID: Int32 { handle.backendPID }

    /// Whether an idle connection still works (see `PGConnHandle.checkIdleConnection`).
    func checkIdle() -> Bool { !poisoned && handle.checkIdleConnection() }

    /// Whether a transaction block is still open (a body leaked one); the pool then rolls it back.
    var isInTransaction: Bool { handle.isInTransaction }
}
