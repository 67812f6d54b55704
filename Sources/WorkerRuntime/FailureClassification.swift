import AMQP
import AstroDomain
import Foundation
import Postgres

/// An error that knows whether the same job can succeed later.
///
/// Handlers throw `JobRejection` for input that can never succeed; errors of the services they
/// call (an LLM endpoint, the App Store, an image API) carry their own classification, which
/// they expose through this protocol so the runtime retries only what a retry can mend.
public protocol RetryClassifiedError: Error {
    /// A stable machine-readable code for the dead letter, the job's row and its failed event.
    var failureCode: String { get }
    /// Whether a later attempt may succeed (rate limit, outage, timeout); false dead-letters
    /// the job at once.
    var isTransient: Bool { get }
    /// What a log line at info and above may say about it beyond its code: words that quote no
    /// input (`FailureLogging`); nil (the default) logs the code alone.
    var publicReason: String? { get }
}

/// How the runtime treats a job's failure.
enum FailureClass: Sendable, Equatable {
    /// May succeed later: retried through a delay queue, up to `MAX_ATTEMPTS`.
    case transient(JobError)
    /// Cannot succeed on retry: dead-lettered at once with its code.
    case permanent(JobError)

    var jobError: JobError {
        switch self {
        case .transient(let error), .permanent(let error): error
        }
    }
}

/// Sorts an error thrown by a job into transient and permanent, with a code and a message.
enum FailureClassifier {
    /// Longest message kept for a job's error (a dead letter's header keeps less).
    static let maximumMessageLength = 2000

    static func classify(_ error: any Error) -> FailureClass {
        switch error {
        case let rejection as JobRejection:
            return .permanent(bounded(rejection.jobError))
        case let error as PostgresError:
            return classify(error)
        case let error as AMQPError:
            let code: ErrorCode = error.isRetriable ? .brokerUnavailable : .brokerError
            return error.isRetriable
                ? .transient(bounded(code, error.description)) : .permanent(bounded(code, error.description))
        case let error as any RetryClassifiedError:
            let failure = bounded(ErrorCode(rawValue: error.failureCode), String(describing: error))
            return error.isTransient ? .transient(failure) : .permanent(failure)
        case is CancellationError:
            return .transient(JobError(code: .cancelled, message: "the job was cancelled"))
        case let error as DecodingError:
            // Stored data (a row, a chart) that does not decode decodes no better on retry.
            return .permanent(bounded(.storedDataUnreadable, DecodingErrorDescription.describe(error)))
        case is EncodingError:
            return .permanent(bounded(.encodingError, String(describing: error)))
        default:
            // Unknown errors keep the old rule: retried, a bounded number of times.
            return .transient(bounded(.transientError, String(describing: error)))
        }
    }

    /// PostgreSQL errors by SQLSTATE class: connection loss, serialization failures, deadlocks,
    /// timeouts and resource shortages may pass; data exceptions (22), integrity violations other
    /// than unique and exclusion races (23), syntax and access-rule errors (42, including
    /// insufficient privilege), program limits (54) and trigger exceptions (P0) will not.
    static func classify(_ error: PostgresError) -> FailureClass {
        let message = error.description
        if error.isConnectionLoss { return .transient(bounded(.databaseUnavailable, message)) }
        switch error.kind {
        case .poolTimeout, .poolClosed:
            return .transient(bounded(.databaseUnavailable, message))
        case .encoding:
            return .permanent(bounded(.databaseEncodingError, message))
        case .decoding:
            return .permanent(bounded(.databaseDecodingError, message))
        default:
            break
        }
        guard let state = error.sqlState else { return .transient(bounded(.databaseError, message)) }
        if error.isSerializationFailure || error.isDeadlock { return .transient(bounded(.databaseConflict, message)) }
        if state == "57014" || state == "55P03" { return .transient(bounded(.databaseTimeout, message)) }
        let code = ErrorCode.databaseError(sqlState: state)
        return isPermanent(sqlState: state) ? .permanent(bounded(code, message)) : .transient(bounded(code, message))
    }

    /// Whether a statement failing with this SQLSTATE fails again when run again on the same input.
    static func isPermanent(sqlState state: String) -> Bool {
        switch state.prefix(2) {
        case "22", "42", "54", "21", "2B", "44", "P0": true
        // A unique or exclusion violation is often a race another attempt resolves (the row now
        // exists and the statement's other path runs); not-null, foreign-key and check
        // violations are properties of the input.
        case "23": state != "23505" && state != "23P01"
        default: false
        }
    }

    private static func bounded(_ error: JobError) -> JobError {
        bounded(error.errorCode, error.message)
    }

    private static func bounded(_ code: ErrorCode, _ message: String) -> JobError {
        guard message.count > maximumMessageLength else { return JobError(code: code, message: message) }
        return JobError(code: code, message: String(message.prefix(maximumMessageLength)) + "…")
    }
}
