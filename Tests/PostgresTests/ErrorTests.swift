import Testing

@testable import Postgres

@Suite struct ErrorTests {
    private func server(_ sqlState: String, _ message: String = "boom") -> PostgresError {
        PostgresError(kind: .server, message: message, sqlState: sqlState)
    }

    @Test func classifiesSQLStates() {
        #expect(server("23505").isUniqueViolation)
        #expect(!server("23505").isTransient)
        #expect(server("40001").isSerializationFailure && server("40001").isTransient)
        #expect(server("40P01").isDeadlock && server("40P01").isTransient)
        #expect(server("53300").isTransient && !server("53300").isConnectionLoss)
        #expect(server("55P03").isTransient)
        for state in ["08006", "08003", "57P01", "57P02", "57P03"] {
            #expect(server(state).isConnectionLoss && server(state).isTransient, "\(state)")
        }
        #expect(!server("42P01").isTransient && !server("42P01").isConnectionLoss)
        #expect(!server("23503").isUniqueViolation)
    }

    @Test func classifiesKinds() {
        #expect(PostgresError(kind: .connectionLost, message: "x").isConnectionLoss)
        #expect(PostgresError(kind: .connectionFailed, message: "x").isTransient)
        #expect(PostgresError(kind: .poolTimeout, message: "x").isTransient)
        #expect(!PostgresError(kind: .poolTimeout, message: "x").isConnectionLoss)
        #expect(!PostgresError(kind: .poolClosed, message: "x").isTransient)
        #expect(!PostgresError(kind: .decoding, message: "x").isTransient)
    }

    @Test func descriptionHidesQueryAndDetail() {
        let error = PostgresError(
            kind: .server,
            message: #"duplicate key value violates unique constraint "users_email_key""#,
            sqlState: "23505",
            constraint: "users_email_key",
            detail: "Key (email)=(secret@example.com) already exists.",
            query: "INSERT INTO users (email) VALUES ($1)"
        )
        #expect(
            error.description
                == #"postgres server error 23505 (unique_violation): duplicate key value violates unique constraint "users_email_key""#
        )
        #expect(!error.description.contains("secret@example.com"))
        #expect(!error.description.contains("INSERT"))
        #expect(error.debugDescription.contains("secret@example.com"))
        #expect(error.debugDescription.contains("INSERT INTO users"))
        #expect(error.debugDescription.contains("ErrorTests.swift"))
    }

    @Test func redactsQuotedValuesOfDataExceptions() {
        let message = #"invalid input syntax for type integer: "4111 1111""#
        #expect(
            PostgresError.redactingValues(message, sqlState: "22P02") == #"invalid input syntax for type integer: "…""#
        )
        let unique = #"duplicate key value violates unique constraint "x""#
        #expect(PostgresError.redactingValues(unique, sqlState: "23505") == unique)
    }
}
