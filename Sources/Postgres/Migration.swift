import Foundation
import Logging

/// One numbered schema change.
public struct Migration: Sendable, Hashable {
    /// Applied in ascending order; unique.
    public let version: Int
    /// A short name, e.g. `schema_v1`.
    public let name: String
    /// The SQL script (may hold several statements).
    public let sql: String

    /// Makes a migration.
    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// A stable hex digest of `sql` (64-bit FNV-1a of its UTF-8 bytes), recorded when applied.
    public var checksum: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in sql.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// Loads the `.sql` files of a directory, named `<version>_<name>.sql` (e.g. `0001_schema_v1.sql`),
    /// sorted by version. Other files are ignored.
    /// - Throws: `.migration` naming the file for a bad name, a duplicate version or an unreadable file.
    public static func load(directory: URL) throws(PostgresError) -> [Migration] {
        let files: [URL]
        do {
            files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        } catch {
            throw PostgresError(kind: .migration, message: "cannot list migrations in \(directory.path)")
        }
        var migrations: [Int: (migration: Migration, file: String)] = [:]
        for file in files where file.pathExtension == "sql" {
            let fileName = file.lastPathComponent
            guard let (version, name) = parseFileName(fileName) else {
                throw PostgresError(
                    kind: .migration,
                    message: "migration file \(fileName) is not named like 0001_name.sql (digits, underscore, name)"
                )
            }
            if let existing = migrations[version] {
                throw PostgresError(
                    kind: .migration,
                    message: "migration files \(existing.file) and \(fileName) have the same version \(version)"
                )
            }
            let sql: String
            do {
                sql = try String(contentsOf: file, encoding: .utf8)
            } catch {
                throw PostgresError(kind: .migration, message: "cannot read migration file \(fileName) as UTF-8")
            }
            migrations[version] = (Migration(version: version, name: name, sql: sql), fileName)
        }
        return migrations.values.map(\.migration).sorted { $0.version < $1.version }
    }

    /// `0001_schema_v1.sql` → (1, "schema_v1"); nil for any other shape.
    static func parseFileName(_ fileName: String) -> (Int, String)? {
        guard fileName.hasSuffix(".sql") else { return nil }
        let stem = fileName.dropLast(4)
        guard let underscore = stem.firstIndex(of: "_") else { return nil }
        let digits = stem[..<underscore]
        let name = stem[stem.index(after: underscore)...]
        guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            let version = Int(digits), !name.isEmpty,
            name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") })
        else { return nil }
        return (version, String(name))
    }
}

/// A migration recorded in `schema_migrations`.
public struct AppliedMigration: Sendable, Hashable {
    /// The migration's version.
    public var version: Int
    /// The migration's name.
    public var name: String
    /// The checksum recorded when it was applied.
    public var checksum: String
    /// When it was applied.
    public var appliedAt: Date
}

/// Applies pending migrations, one transaction each, serialized across processes by an advisory lock.
public struct Migrator: Sendable {
    /// The migrations this code knows, sorted by version.
    public let migrations: [Migration]
    /// The `pg_advisory_lock` key that serializes migrators on one database.
    public let advisoryLockKey: Int64
    private let logger: Logger

    /// Makes a migrator.
    public init(migrations: [Migration], logger: Logger, advisoryLockKey: Int64 = 0x4153_5452_4f5f_4d49) {
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.logger = logger
        self.advisoryLockKey = advisoryLockKey
    }

    /// Applies every pending migration in version order and records it in `schema_migrations`.
    ///
    /// Holds a session-level `pg_advisory_lock` meanwhile, so migrators in several processes serialize;
    /// each migration's script and its `schema_migrations` row commit in one transaction.
    /// - Returns: The migrations applied by this call (empty when the schema was up to date).
    /// - Throws: `.migration` for duplicate versions or an applied migration whose checksum changed
    ///   (nothing is applied then); the failing migration's `PostgresError`; pool errors.
    public func migrate(pool: PostgresPool) async throws -> [Migration] {
        var seen = Set<Int>()
        for migration in migrations where !seen.insert(migration.version).inserted {
            throw PostgresError(kind: .migration, message: "two migrations have version \(migration.version)")
        }
        let (migrations, key, logger) = (self.migrations, advisoryLockKey, self.logger)
        return try await pool.withConnection { connection in
            // A migration may rebuild an index for minutes, and waits for the advisory lock while
            // another process migrates: the session's statement and lock timeouts (and the
            // client's wait for an answer) are lifted for the migration and restored after.
            let responseTimeout = connection.responseTimeout
            connection.responseTimeout = nil
            try connection.executeScript("SET statement_timeout = 0; SET lock_timeout = 0")
            defer {
                connection.responseTimeout = responseTimeout
                if !connection.isBroken {
                    try? connection.executeScript("RESET statement_timeout; RESET lock_timeout")
                }
            }
            try connection.execute("SELECT pg_advisory_lock($1)", [key])
            defer {
                if !connection.isBroken {
                    do {
                        try connection.execute("SELECT pg_advisory_unlock($1)", [key])
                    } catch {
                        logger.info("postgres migration lock release failed", metadata: ["postgres.error": "\(error)"])
                    }
                }
            }
            // Only when missing: a role without CREATE on the schema (a worker's own role) can then
            // check an up-to-date schema without failing.
            let present = try connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
            if try present.first?.decode(Bool.self, "present") != true {
                try connection.executeScript(
                    """
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        version int PRIMARY KEY,
                        name text NOT NULL,
                        checksum text NOT NULL,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """
                )
            }
            var appliedChecksums: [Int: String] = [:]
            for row in try connection.query("SELECT version, checksum FROM schema_migrations") {
                appliedChecksums[try row.decode(Int.self, "version")] = try row.decode(String.self, "checksum")
            }
            for migration in migrations {
                if let recorded = appliedChecksums[migration.version], recorded != migration.checksum {
                    throw PostgresError(
                        kind: .migration,
                        message:
                            "migration \(migration.version) (\(migration.name)) changed after it was applied: "
                            + "checksum \(migration.checksum), recorded \(recorded)"
                    )
                }
            }
            var appliedNow: [Migration] = []
            for migration in migrations where appliedChecksums[migration.version] == nil {
                try connection.withTransaction { transaction in
                    try transaction.executeScript(SQL(unsafeSQL: migration.sql))
                    try transaction.execute(
                        "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                        [migration.version, migration.name, migration.checksum]
                    )
                }
                logger.info(
                    "postgres migration applied",
                    metadata: [
                        "postgres.migration.version": "\(migration.version)",
                        "postgres.migration.name": "\(migration.name)",
                    ]
                )
                appliedNow.append(migration)
            }
            return appliedNow
        }
    }

    /// The migrations recorded in `schema_migrations`, by version; empty if the table does not exist.
    /// - Throws: pool and query errors.
    public func applied(pool: PostgresPool) async throws -> [AppliedMigration] {
        try await pool.withConnection { connection in
            let exists = try connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
            guard try exists.first?.decode(Bool.self, "present") == true else { return [] }
            return try connection.query(
                "SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version"
            ).map { row in
                AppliedMigration(
                    version: try row.decode(Int.self, "version"),
                    name: try row.decode(String.self, "name"),
                    checksum: try row.decode(String.self, "checksum"),
                    appliedAt: try row.decode(Date.self, "applied_at")
                )
            }
        }
    }
}
