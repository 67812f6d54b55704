import CLibPQ
import Foundation
import Logging

/// Owns one libpq `PGconn *`; every libpq call of the module goes through here.
///
/// - Important: Not thread-safe. One thread uses a handle at a time (the connection's thread).
final class PGConnHandle {
    private var conn: OpaquePointer?
    /// Statements prepared on this connection, by SQL text and parameter types: the server parses
    /// and plans each statement once per connection instead of on every execution.
    private var preparedStatements: [String: String] = [:]
    private var preparedCount = 0
    /// Beyond this many distinct statements (SQL assembled at run time), execute unprepared.
    static let preparedStatementLimit = 512
    /// Receives server notices; kept alive as long as `conn` can call back into it.
    private let noticeSink: NoticeSink
    /// How long one command may wait for the server's answer before the connection is given up
    /// as dead; nil waits forever.
    var responseTimeout: Duration?

    private init(conn: OpaquePointer, noticeSink: NoticeSink) {
        self.conn = conn
        self.noticeSink = noticeSink
    }

    deinit {
        finish()
    }

    /// The result of one command, copied into Swift values.
    struct Outcome {
        var columns: PostgresColumns
        var rows: [[PostgresCell?]]
        var commandStatus: String
        var rowsAffected: Int
    }

    /// Opens a connection with `PQconnectdbParams` (blocking).
    /// - Throws: `.invalidConfiguration` for a bad option name or NUL bytes, `.connectionFailed` with libpq's reason.
    static func connect(_ configuration: PostgresConfiguration, logger: Logger) throws(PostgresError) -> PGConnHandle {
        let parameters = try connectionParameters(configuration)
        let keywords = parameters.map { strdup($0.0) }
        let values = parameters.map { strdup($0.1) }
        defer {
            for keyword in keywords { free(keyword) }
            for value in values { free(value) }
        }
        let keywordPointers = keywords.map { UnsafePointer($0) } + [nil]
        let valuePointers = values.map { UnsafePointer($0) } + [nil]
        guard let conn = PQconnectdbParams(keywordPointers, valuePointers, 0) else {
            throw PostgresError(kind: .connectionFailed, message: "libpq could not allocate a connection")
        }
        guard PQstatus(conn) == CONNECTION_OK else {
            let reason = errorMessage(conn)
            PQfinish(conn)
            throw PostgresError(
                kind: .connectionFailed,
                message: "cannot connect to \(configuration.host):\(configuration.port): \(reason)"
            )
        }
        // Non-blocking: every wait for the server is a `poll` with a deadline (see `roundTrip`),
        // so a connection whose peer vanished frees its thread instead of blocking it forever.
        guard PQsetnonblocking(conn, 1) == 0 else {
            let reason = errorMessage(conn)
            PQfinish(conn)
            throw PostgresError(kind: .connectionFailed, message: "cannot make the connection non-blocking: \(reason)")
        }
        let sink = NoticeSink(logger: logger)
        PQsetNoticeReceiver(conn, noticeReceiver, Unmanaged.passUnretained(sink).toOpaque())
        let handle = PGConnHandle(conn: conn, noticeSink: sink)
        handle.responseTimeout = configuration.effectiveResponseTimeout
        return handle
    }

    /// The `PQconnectdbParams` keyword/value pairs for a configuration.
    static func connectionParameters(_ configuration: PostgresConfiguration) throws(PostgresError) -> [(String, String)]
    {
        var sessionOptions: [(String, String)] = [
            ("client_encoding", "UTF8"), ("DateStyle", "ISO"), ("TimeZone", "UTC"), ("extra_float_digits", "3"),
        ]
        // Timeouts travel as whole milliseconds (PostgreSQL's unit for all three); explicit
        // `options` of the same name below take precedence.
        let timeouts: [(String, Duration?)] = [
            ("statement_timeout", configuration.statementTimeout), ("lock_timeout", configuration.lockTimeout),
            ("idle_in_transaction_session_timeout", configuration.idleInTransactionTimeout),
        ]
        for (name, timeout) in timeouts {
            guard let timeout else { continue }
            sessionOptions.append((name, String(Self.clampedMilliseconds(timeout))))
        }
        for key in configuration.options.keys.sorted() {
            let valid =
                !key.isEmpty
                && key.utf8.allSatisfy { byte in
                    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                        || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                        || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
                        || byte == UInt8(ascii: ".")
                }
            guard valid else {
                throw PostgresError(kind: .invalidConfiguration, message: "invalid server option name \"\(key)\"")
            }
            sessionOptions.removeAll { $0.0.lowercased() == key.lowercased() }
            sessionOptions.append((key, configuration.options[key]!))
        }
        // In libpq's `options`, a backslash escapes the next character (a space or a backslash).
        let optionsText = sessionOptions.map { key, value in
            var escaped = ""
            for character in value {
                if character == " " || character == "\\" || character.isWhitespace { escaped.append("\\") }
                escaped.append(character)
            }
            return "-c \(key)=\(escaped)"
        }.joined(separator: " ")

        var parameters: [(String, String)] = [
            ("host", configuration.host),
            ("port", String(configuration.port)),
            ("user", configuration.user),
            ("dbname", configuration.database),
            ("connect_timeout", String(max(2, configuration.connectTimeoutSeconds))),
            ("application_name", configuration.applicationName),
            ("options", optionsText),
        ]
        if let keepalive = configuration.keepalive {
            parameters += [
                ("keepalives", "1"), ("keepalives_idle", String(Self.clampedSeconds(keepalive.idle))),
                ("keepalives_interval", String(Self.clampedSeconds(keepalive.interval))),
                ("keepalives_count", String(min(max(keepalive.count, 1), 1000))),
            ]
        }
        if let userTimeout = configuration.tcpUserTimeout {
            parameters.append(("tcp_user_timeout", String(Self.clampedMilliseconds(userTimeout))))
        }
        if let password = configuration.password { parameters.append(("password", password)) }
        if let sslMode = configuration.sslMode { parameters.append(("sslmode", sslMode)) }
        for (key, value) in parameters where value.utf8.contains(0) {
            throw PostgresError(kind: .invalidConfiguration, message: "the \(key) setting contains a NUL byte")
        }
        return parameters
    }

    /// A duration as whole milliseconds for a server setting: at least 1 (0 would mean "off"),
    /// at most PostgreSQL's limit for these settings (2^31 − 1).
    static func clampedMilliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        let milliseconds = overflow ? Int64.max : product.addingReportingOverflow(attoseconds / 1_000_000_000_000_000).0
        return min(max(milliseconds, 1), Int64(Int32.max))
    }

    /// A duration as whole seconds (rounded up) for a socket option, from 1 to a day.
    static func clampedSeconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return min(max(seconds + (attoseconds > 0 ? 1 : 0), 1), 86_400)
    }

    /// Closes the connection; idempotent.
    func finish() {
        if let conn {
            PQfinish(conn)
            self.conn = nil
        }
    }

    var isOpen: Bool { conn != nil }

    /// True when closed or `PQstatus` is `CONNECTION_BAD`.
    var isBad: Bool {
        guard let conn else { return true }
        return PQstatus(conn) == CONNECTION_BAD
    }

    /// True while a transaction block is open (idle in transaction, possibly failed).
    var isInTransaction: Bool {
        guard let conn else { return false }
        let status = PQtransactionStatus(conn)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    /// The backend's process id, for logs.
    var backendPID: Int32 {
        guard let conn else { return 0 }
        return PQbackendPID(conn)
    }

    /// Runs one parameterized statement, prepared once per connection. Text parameters travel
    /// as C strings, binary ones (`bytea`) as their bytes with a length; results come back in
    /// `resultFormat`.
    func execute(
        _ sql: String,
        parameters: [PostgresParameter],
        resultFormat: PostgresResultFormat = .text
    ) throws(PostgresError) -> Outcome {
        guard !Self.containsNUL(sql) else {
            throw PostgresError(kind: .encoding, message: "the SQL text contains a NUL byte", query: sql)
        }
        guard parameters.count <= 65_535 else {
            throw PostgresError(
                kind: .encoding,
                message: "\(parameters.count) parameters exceed PostgreSQL's limit of 65535",
                query: sql
            )
        }
        var copies: [UnsafeMutablePointer<CChar>] = []
        defer { for copy in copies { free(copy) } }
        var valuePointers = [UnsafePointer<CChar>?](repeating: nil, count: parameters.count)
        var lengths = [Int32](repeating: 0, count: parameters.count)
        var formats = [Int32](repeating: 0, count: parameters.count)
        var binaries: [(index: Int, bytes: Data)] = []
        for (index, parameter) in parameters.enumerated() {
            switch parameter.value {
            case nil:
                continue
            case .text(let text)?:
                guard let copy = Self.cString(text) else {
                    throw PostgresError(
                        kind: .encoding,
                        message: "parameter $\(index + 1) contains a NUL byte, which PostgreSQL text cannot hold",
                        query: sql
                    )
                }
                copies.append(copy)
                valuePointers[index] = UnsafePointer(copy)
            case .binary(let bytes)?:
                guard bytes.count <= Self.maxValueBytes else {
                    throw PostgresError(
                        kind: .encoding,
                        message: "parameter $\(index + 1) is \(bytes.count) bytes, over PostgreSQL's 1 GB value limit",
                        query: sql
                    )
                }
                formats[index] = 1
                lengths[index] = Int32(bytes.count)
                if bytes.isEmpty || binaries.count >= Self.maxBorrowedParameters {
                    // A NULL pointer would be SQL NULL: an empty value points at a byte of its own.
                    let copy = Self.copy(bytes)
                    copies.append(copy)
                    valuePointers[index] = UnsafePointer(copy)
                } else {
                    binaries.append((index, bytes))
                }
            }
        }
        let types: [Oid] = parameters.map { Oid($0.typeOID) }
        let results: Int32 = resultFormat == .binary ? 1 : 0
        let key = types.isEmpty ? sql : sql + "\u{0}" + types.map(String.init).joined(separator: ",")
        var name = preparedStatements[key]
        if name == nil, preparedStatements.count < Self.preparedStatementLimit {
            let candidate = "astro_\(preparedCount)"
            preparedCount += 1
            // A failed prepare (syntax error, aborted transaction) reports through `outcome`.
            _ = try outcome(
                roundTrip(sql) { PQsendPrepare($0, candidate, sql, Int32(parameters.count), types) },
                sql: sql
            )
            preparedStatements[key] = candidate
            name = candidate
        }
        // libpq copies the values into its output buffer while sending: the bytes of binary
        // values are lent for that call, not copied here.
        let sent = try Self.lending(binaries[...], into: valuePointers) { pointers throws(PostgresError) in
            try roundTrip(sql) { conn in
                if let name {
                    PQsendQueryPrepared(conn, name, Int32(parameters.count), pointers, lengths, formats, results)
                } else {
                    PQsendQueryParams(conn, sql, Int32(parameters.count), types, pointers, lengths, formats, results)
                }
            }
        }
        do {
            return try outcome(sent, sql: sql)
        } catch {
            // A schema change can invalidate a cached plan ("cached plan must not change result
            // type"); forgetting the statement makes the next execution prepare it afresh.
            if error.sqlState == "0A000" { preparedStatements[key] = nil }
            throw error
        }
    }

    /// PostgreSQL's limit for one value (1 GB).
    static let maxValueBytes = (1 << 30) - 1
    /// Binary values lent to libpq by nesting `withUnsafeBytes` (one stack frame each); those
    /// beyond are copied, so a statement with thousands of them cannot exhaust the stack.
    static let maxBorrowedParameters = 32

    /// Calls `body` with `pointers`, where each of `binaries`' indexes points at its bytes,
    /// valid only during the call.
    private static func lending<R>(
        _ binaries: ArraySlice<(index: Int, bytes: Data)>,
        into pointers: [UnsafePointer<CChar>?],
        _ body: ([UnsafePointer<CChar>?]) throws(PostgresError) -> R
    ) throws(PostgresError) -> R {
        guard let (index, bytes) = binaries.first else { return try body(pointers) }
        var lent = pointers
        let result: Result<R, PostgresError> = bytes.withUnsafeBytes { raw in
            lent[index] = raw.baseAddress.map { UnsafePointer($0.assumingMemoryBound(to: CChar.self)) }
            return Result { () throws(PostgresError) -> R in
                try lending(binaries.dropFirst(), into: lent, body)
            }
        }
        return try result.get()
    }

    /// A malloc'ed copy of `bytes` (at least one byte long, so never NULL); free it.
    private static func copy(_ bytes: Data) -> UnsafeMutablePointer<CChar> {
        guard let raw = malloc(max(bytes.count, 1)) else { fatalError("out of memory") }
        bytes.withUnsafeBytes { source in
            if let base = source.baseAddress { raw.copyMemory(from: base, byteCount: source.count) }
        }
        return raw.bindMemory(to: CChar.self, capacity: max(bytes.count, 1))
    }

    /// Whether the text holds a NUL byte, which would cut it short as a C string.
    static func containsNUL(_ text: String) -> Bool {
        var text = text
        // memchr over the contiguous UTF-8 rather than a byte-by-byte walk: parameters run to
        // several kilobytes (a chart) and every one is checked.
        return text.withUTF8 { bytes in
            guard let base = bytes.baseAddress else { return false }
            return memchr(base, 0, bytes.count) != nil
        }
    }

    /// A malloc'ed NUL-terminated copy of the text for libpq (free it), or nil when the text
    /// holds a NUL byte.
    static func cString(_ text: String) -> UnsafeMutablePointer<CChar>? {
        var text = text
        return text.withUTF8 { bytes -> UnsafeMutablePointer<CChar>? in
            if let base = bytes.baseAddress, memchr(base, 0, bytes.count) != nil { return nil }
            // malloc, not `allocate`: the caller frees it with free().
            guard let raw = malloc(bytes.count + 1) else { fatalError("out of memory") }
            let copy = raw.bindMemory(to: CChar.self, capacity: bytes.count + 1)
            if let base = bytes.baseAddress {
                UnsafeMutableRawPointer(copy).copyMemory(from: base, byteCount: bytes.count)
            }
            copy[bytes.count] = 0
            return copy
        }
    }

    /// Runs one or more statements without parameters (simple query protocol).
    func executeScript(_ sql: String) throws(PostgresError) -> Outcome {
        guard !Self.containsNUL(sql) else {
            throw PostgresError(kind: .encoding, message: "the SQL text contains a NUL byte", query: sql)
        }
        return try outcome(roundTrip(sql) { PQsendQuery($0, sql) }, sql: sql)
    }

    /// Sends one command and waits for its results without ever blocking in libpq: the send is
    /// flushed and the answer read with `poll` against `responseTimeout`. Past the deadline the
    /// connection is closed (its thread is free again) and the error says so.
    /// - Returns: the first failed result if any, else the last result (the caller clears it),
    ///   or nil when libpq returned none (the connection is broken).
    /// - Throws: `.connectionLost` when sending or reading fails or the deadline passes.
    private func roundTrip(_ sql: String, send: (OpaquePointer) -> Int32) throws(PostgresError) -> OpaquePointer? {
        let conn = try openConn(sql)
        let deadline = responseTimeout.map { ContinuousClock.now + $0 }
        guard send(conn) == 1 else {
            throw PostgresError(kind: isBad ? .connectionLost : .server, message: Self.errorMessage(conn), query: sql)
        }
        // Flush what libpq could not write at once (large parameters), reading meanwhile so the
        // server never blocks on a full socket.
        while true {
            let flushed = PQflush(conn)
            if flushed == 0 { break }
            if flushed < 0 { throw lostWhileWaiting(sql) }
            let ready = try wait(for: Int16(POLLIN | POLLOUT), until: deadline, sql: sql)
            if ready & Int16(POLLIN) != 0, PQconsumeInput(conn) == 0 { throw lostWhileWaiting(sql) }
        }
        var failed: OpaquePointer?
        var last: OpaquePointer?
        // Results collected before a failure (a multi-statement script) are freed with it.
        func clearCollected() {
            if let failed { PQclear(failed) }
            if let last { PQclear(last) }
            failed = nil
            last = nil
        }
        while true {
            while PQisBusy(conn) == 1 {
                do {
                    _ = try wait(for: Int16(POLLIN), until: deadline, sql: sql)
                } catch {
                    clearCollected()
                    throw error
                }
                if PQconsumeInput(conn) == 0 {
                    clearCollected()
                    throw lostWhileWaiting(sql)
                }
            }
            guard let result = PQgetResult(conn) else { break }
            let status = PQresultStatus(result)
            if status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH {
                // In COPY mode libpq hands out a COPY result on every call and never NULL: this
                // connection cannot speak COPY, so the result goes to `outcome`, which closes it.
                clearCollected()
                return result
            }
            if failed == nil, status == PGRES_FATAL_ERROR || status == PGRES_BAD_RESPONSE {
                failed = result
            } else {
                if let last { PQclear(last) }
                last = result
            }
        }
        if let failed {
            if let last { PQclear(last) }
            return failed
        }
        return last
    }

    /// Waits until the socket is ready for `events` or the deadline passes.
    /// - Returns: the events that are ready.
    /// - Throws: `.connectionLost` (and closes the connection) past the deadline or on a socket error.
    private func wait(
        for events: Int16,
        until deadline: ContinuousClock.Instant?,
        sql: String
    ) throws(PostgresError) -> Int16 {
        guard let conn else { throw PostgresError(kind: .connectionLost, message: "the connection is closed") }
        let socket = PQsocket(conn)
        guard socket >= 0 else { throw lostWhileWaiting(sql) }
        while true {
            var timeout: Int32 = -1
            if let deadline {
                let remaining = deadline - ContinuousClock.now
                guard remaining > .zero else {
                    let waited = responseTimeout.map { " within \($0.components.seconds) s" } ?? ""
                    noticeSink.logger.warning(
                        "postgres: no answer from the server\(waited); connection closed",
                        metadata: ["postgres.backend_pid": "\(backendPID)"]
                    )
                    finish()
                    throw PostgresError(
                        kind: .connectionLost,
                        message: "no answer from the server\(waited); the connection was closed "
                            + "(the network path or the server is gone)",
                        query: sql
                    )
                }
                // Whole milliseconds, rounded up, so a wait never ends just short of the deadline.
                let (seconds, attoseconds) = remaining.components
                timeout = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            }
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            let ready = poll(&descriptor, 1, timeout)
            if ready > 0 {
                if descriptor.revents & Int16(POLLNVAL) != 0 { throw lostWhileWaiting(sql) }
                // POLLERR/POLLHUP: let libpq read the error or EOF and report it.
                return descriptor.revents | (descriptor.revents & Int16(POLLERR | POLLHUP) != 0 ? events : 0)
            }
            if ready < 0 {
                let code = errno
                if code == EINTR { continue }
                finish()
                throw PostgresError(
                    kind: .connectionLost,
                    message: "waiting for the server failed: \(String(cString: strerror(code))); connection closed",
                    query: sql
                )
            }
        }
    }

    /// The connection broke while sending or waiting: closes it and describes libpq's reason.
    private func lostWhileWaiting(_ sql: String) -> PostgresError {
        let reason = Self.errorMessage(conn)
        finish()
        return PostgresError(kind: .connectionLost, message: reason, query: sql)
    }

    /// A SCRAM-SHA-256 verifier of a password, computed here by libpq: `ALTER ROLE … PASSWORD`
    /// with the verifier stores the same login, without the password ever reaching the server
    /// (or its statement log) in clear text.
    /// - Throws: `.encoding` for a NUL byte, `.server` when libpq cannot compute it.
    func scramVerifier(password: String, user: String) throws(PostgresError) -> String {
        guard let conn else { throw PostgresError(kind: .connectionLost, message: "the connection is closed") }
        guard !Self.containsNUL(password), !Self.containsNUL(user) else {
            throw PostgresError(kind: .encoding, message: "the password or role name contains a NUL byte")
        }
        guard let result = PQencryptPasswordConn(conn, password, user, "scram-sha-256") else {
            throw PostgresError(
                kind: .server,
                message: "cannot compute the password verifier: \(Self.errorMessage(conn))"
            )
        }
        defer { PQfreemem(result) }
        return String(cString: result)
    }

    /// Checks an idle connection without a round trip when possible: if the socket has something to
    /// read (a termination notice or EOF), reads it and then confirms with a real query.
    /// - Returns: false when the connection is dead.
    func checkIdleConnection() -> Bool {
        guard let conn, PQstatus(conn) == CONNECTION_OK else { return false }
        let socket = PQsocket(conn)
        guard socket >= 0 else { return false }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, 0)
        if ready == 0 { return true }
        if ready < 0 { return false }
        if PQconsumeInput(conn) == 0 || PQstatus(conn) == CONNECTION_BAD { return false }
        // Something arrived while idle (a notification, or a FATAL before the server hangs up): confirm.
        guard let result = try? roundTrip("SELECT 1", send: { PQsendQuery($0, "SELECT 1") }) else { return false }
        defer { PQclear(result) }
        return PQresultStatus(result) == PGRES_TUPLES_OK && self.conn.map { PQstatus($0) == CONNECTION_OK } == true
    }

    private func openConn(_ sql: String) throws(PostgresError) -> OpaquePointer {
        guard let conn else {
            throw PostgresError(kind: .connectionLost, message: "the connection is closed", query: sql)
        }
        return conn
    }

    /// Copies a `PGresult` into Swift values, or turns it into an error; always clears it.
    private func outcome(_ result: OpaquePointer?, sql: String) throws(PostgresError) -> Outcome {
        guard let result else {
            let lost = isBad
            throw PostgresError(
                kind: lost ? .connectionLost : .server,
                message: Self.errorMessage(conn),
                query: sql
            )
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        switch status {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            break
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR, PGRES_BAD_RESPONSE:
            throw serverError(result, sql: sql)
        default:
            // COPY and pipeline states are not supported; the connection is left in an unusable state.
            finish()
            throw PostgresError(
                kind: .connectionLost,
                message: "unsupported result status \(String(cString: PQresStatus(status))); connection closed",
                query: sql
            )
        }
        let columnCount = Int(PQnfields(result))
        var names: [String] = []
        var types: [UInt32] = []
        for column in 0..<columnCount {
            names.append(String(cString: PQfname(result, Int32(column))))
            types.append(UInt32(PQftype(result, Int32(column))))
        }
        let rowCount = Int(PQntuples(result))
        let binary = (0..<columnCount).map { PQfformat(result, Int32($0)) == 1 }
        var rows: [[PostgresCell?]] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            var values: [PostgresCell?] = []
            values.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                if PQgetisnull(result, Int32(row), Int32(column)) == 1 {
                    values.append(nil)
                } else if binary[column] {
                    let length = Int(PQgetlength(result, Int32(row), Int32(column)))
                    values.append(.binary(Data(bytes: PQgetvalue(result, Int32(row), Int32(column)), count: length)))
                } else {
                    values.append(.text(String(cString: PQgetvalue(result, Int32(row), Int32(column)))))
                }
            }
            rows.append(values)
        }
        let commandStatus = String(cString: PQcmdStatus(result))
        let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
        return Outcome(
            columns: PostgresColumns(names: names, typeOIDs: types),
            rows: rows,
            commandStatus: commandStatus,
            rowsAffected: affected
        )
    }

    private func serverError(_ result: OpaquePointer, sql: String) -> PostgresError {
        func field(_ code: Character) -> String? {
            guard let pointer = PQresultErrorField(result, Int32(code.asciiValue!)) else { return nil }
            return String(cString: pointer)
        }
        let sqlState = field("C")
        let lost = isBad
        let primary = field("M") ?? Self.errorMessage(conn)
        let message = PostgresError.redactingValues(primary, sqlState: sqlState)
        var error = PostgresError(
            kind: lost ? .connectionLost : .server,
            message: message,
            sqlState: sqlState,
            constraint: field("n"),
            detail: field("D"),
            query: sql,
            hint: field("H")
        )
        if message != primary { error.unredactedMessage = primary }
        return error
    }

    private static func errorMessage(_ conn: OpaquePointer?) -> String {
        guard let conn, let pointer = PQerrorMessage(conn) else { return "unknown libpq error" }
        let lines = String(cString: pointer).split(whereSeparator: \.isNewline)
            .map { $0.split(whereSeparator: \.isWhitespace).joined(separator: " ") }
            .filter { !$0.isEmpty }
        return lines.isEmpty ? "unknown libpq error" : lines.joined(separator: "; ")
    }
}

/// Carries the logger for libpq's notice callback.
private final class NoticeSink {
    let logger: Logger
    init(logger: Logger) { self.logger = logger }
}

/// Routes server notices (e.g. "relation already exists, skipping") to the logger instead of stderr.
private let noticeReceiver: PQnoticeReceiver = { context, result in
    guard let context, let result else { return }
    let sink = Unmanaged<NoticeSink>.fromOpaque(context).takeUnretainedValue()
    let severity = PQresultErrorField(result, Int32(Character("V").asciiValue!)).map { String(cString: $0) } ?? "NOTICE"
    let sqlState = PQresultErrorField(result, Int32(Character("C").asciiValue!)).map { String(cString: $0) } ?? ""
    let message = PQresultErrorField(result, Int32(Character("M").asciiValue!)).map { String(cString: $0) } ?? ""
    sink.logger.debug(
        "postgres notice",
        metadata: [
            "postgres.severity": "\(severity)", "postgres.sqlstate": "\(sqlState)", "postgres.message": "\(message)",
        ]
    )
}
