import Logging
import Testing

@testable import Postgres

/// Pool behaviour that needs no server: port 1 on loopback refuses connections at once.
@Suite(.timeLimit(.minutes(1)))
struct PoolTests {
    private let unreachable = PostgresConfiguration(host: "127.0.0.1", port: 1, user: "nobody", database: "none")
    private let logger = Logger(label: "postgres-pool-tests")

    @Test func connectionFailureIsReportedAndNothingLeaks() async throws {
        let pool = PostgresPool(configuration: unreachable, options: .init(maxConnections: 2), logger: logger)
        let error = await #expect(throws: PostgresError.self) { try await pool.withConnection { _ in 1 } }
        #expect(error?.kind == .connectionFailed)
        #expect(error?.isConnectionLoss == true)
        #expect(error?.isTransient == true)
        #expect(error?.message.contains("127.0.0.1:1") == true)
        #expect(await !pool.ping())
        let statistics = pool.statistics
        #expect(statistics.open == 0 && statistics.leased == 0 && statistics.waiting == 0)
        #expect(statistics.maxConnections == 2 && statistics.connectionsOpened == 0)
        await pool.close()
        let closed = await #expect(throws: PostgresError.self) { try await pool.withConnection { _ in 1 } }
        #expect(closed?.kind == .poolClosed)
        await pool.close()
    }

    @Test func directConnectFailureNamesTheServerNotThePassword() {
        var configuration = unreachable
        configuration.password = "hunter2-secret"
        let error = #expect(throws: PostgresError.self) {
            try PostgresConnection.connect(configuration, logger: logger)
        }
        #expect(error?.kind == .connectionFailed)
        #expect(error?.description.contains("hunter2") == false)
        #expect(error?.debugDescription.contains("hunter2") == false)
    }

    @Test func formatsDurations() {
        #expect(PostgresPool.format(.milliseconds(300)) == "300 ms")
        #expect(PostgresPool.format(.seconds(5)) == "5 s")
        #expect(PostgresPool.format(.milliseconds(1500)) == "1500 ms")
    }
}
