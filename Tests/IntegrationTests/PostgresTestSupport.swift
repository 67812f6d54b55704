import Foundation
import Logging
import Postgres
import Synchronization

/// Why an integration test could not even start.
struct PostgresTestSetupError: Error, CustomStringConvertible {
    let description: String
}

/// A fresh schema per test, with a configuration whose `search_path` points at it.
struct PostgresTestDatabase: Sendable {
    let schema: String
    let configuration: PostgresConfiguration
    /// A pool on the database's default search path, for setup, cleanup and "another session" work.
    let admin: PostgresPool

    static let logger = Logger(label: "postgres-integration-tests")

    /// The `DATABASE_URL` configuration.
    /// - Throws: `PostgresTestSetupError` (and records an issue) when `DATABASE_URL` is missing.
    static func baseConfiguration() throws -> PostgresConfiguration {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
            let message = "DATABASE_URL is not set: run the integration tests with `bash scripts/integration-tests.sh`"
            throw PostgresTestSetupError(description: message)
        }
        return try PostgresConfiguration(url: url)
    }

    /// Creates a uniquely named schema.
    static func make() async throws -> PostgresTestDatabase {
        let base = try baseConfiguration()
        let schema = "pgtest_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        let admin = PostgresPool(configuration: base, options: .init(maxConnections: 2), logger: logger)
        try await admin.withConnection { connection in
            // The name is made of [a-z0-9_] only, so it is safe as an identifier.
            try connection.executeScript(SQL(unsafeSQL: "CREATE SCHEMA \(schema)"))
        }
        var configuration = base
        configuration.options["search_path"] = schema
        configuration.applicationName = "postgres-tests"
        return PostgresTestDatabase(schema: schema, configuration: configuration, admin: admin)
    }

    /// A pool on the test schema.
    func makePool(_ options: PostgresPool.Options = .init(maxConnections: 2)) -> PostgresPool {
        makePool(options, configuration: configuration)
    }

    func makePool(_ options: PostgresPool.Options, configuration: PostgresConfiguration) -> PostgresPool {
        PostgresPool(configuration: configuration, options: options, logger: Self.logger)
    }

    /// Drops the schema and closes the admin pool.
    func drop() async {
        let schema = self.schema
        // Twice: the first attempt may meet a connection the restart test broke.
        for _ in 0..<2 {
            let dropped: Void? = try? await admin.withConnection { connection in
                try connection.executeScript(SQL(unsafeSQL: "DROP SCHEMA IF EXISTS \(schema) CASCADE"))
            }
            if dropped != nil { break }
        }
        await admin.close()
    }
}

/// A thread-safe counter for coordinating pool threads with the test.
final class PostgresTestCounter: Sendable {
    private let count = Atomic<Int>(0)

    func increment() { count.add(1, ordering: .sequentiallyConsistent) }
    var value: Int { count.load(ordering: .sequentiallyConsistent) }

    /// Waits until the counter reaches `target` (polling), up to `timeout`.
    func wait(for target: Int, timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        while value < target {
            guard ContinuousClock.now < deadline else {
                throw PostgresTestSetupError(description: "counter stayed at \(value), expected \(target)")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// Runs `operation` and captures its outcome.
func postgresOutcome<T: Sendable>(_ operation: () async throws -> T) async -> Result<T, any Error> {
    do {
        return .success(try await operation())
    } catch {
        return .failure(error)
    }
}
