import AstroDomain
import Foundation
import Logging
import Synchronization
import Testing
import WorkerRuntime
import WorkerRuntimeTestKit

/// Issue 29, F15: a job's failure message may quote what the person sent (a birth time, a name,
/// the prompt an LLM refused); at info and above the runtime logs its code and public reason
/// only, and the message at debug.
@Suite struct FailureLoggingTests {
    /// Every line logged, with its level and metadata flattened into the text.
    final class Capture: Sendable {
        let lines = Mutex<[(Logger.Level, String)]>([])

        var logger: Logger {
            Logger(label: "failure-logging-tests") { _ in Handler(capture: self) }
        }

        func text(atLeast level: Logger.Level) -> String {
            lines.withLock { $0.filter { $0.0 >= level }.map(\.1).joined(separator: "\n") }
        }

        struct Handler: LogHandler {
            let capture: Capture
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .trace

            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }

            func log(event: LogEvent) {
                let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
                let text = "\(event.message) " + merged.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
                capture.lines.withLock { $0.append((event.level, text)) }
            }
        }
    }

    static let type: JobType = "test.failure-logging"
    static let personal = "2021-03-28 03:30 in Europe/Kyiv for Olena"

    /// A handler that fails the way `fields["fail"]` says, its message quoting a personal value.
    static func handler() -> InMemoryJobHandler {
        InMemoryJobHandler(
            jobType: type,
            prepare: { (job: JobEnvelope) async throws -> Bool in
                let body = try JSONValue.parse(job.body)
                switch body["fail"]?.stringValue {
                case "input":
                    throw JobRejection(
                        ChartInputError(
                            .nonexistentLocalTime,
                            field: ChartField.birthTime,
                            message: "\(ChartField.birthTime): \(personal) does not exist"
                        )
                    )
                case "reject":
                    throw JobRejection(code: "duplicate-profile-name", message: "a profile named \(personal)")
                case "service":
                    throw ServiceFailure(transient: false)
                default:
                    throw ServiceFailure(transient: true)
                }
            },
            commit: { _, _, _ in JobOutcome(status: .succeeded) }
        )
    }

    /// A remote service's error whose description quotes the request, as an LLM API's 400 does.
    struct ServiceFailure: RetryClassifiedError, CustomStringConvertible {
        var transient: Bool
        var failureCode: String { transient ? "llm-server-error" : "llm-bad-request" }
        var isTransient: Bool { transient }
        var description: String { "the API refused the request: \(personal)" }
    }

    @Test(arguments: ["input", "reject", "service", "transient"])
    func aFailureIsLoggedByItsCodeAndItsDetailOnlyAtDebug(failure: String) async throws {
        let capture = Capture()
        let runtime = InMemoryRuntime(
            handlers: [Self.handler()],
            retry: RetryPolicy(maxAttempts: 2, initialDelay: .milliseconds(100), maxDelay: .milliseconds(100)),
            logger: capture.logger
        )
        await runtime.process(TestDeliveries.job(Self.type, fields: ["fail": .string(failure)]))
        // The last attempt too: the dead letter's line.
        await runtime.process(TestDeliveries.job(Self.type, fields: ["fail": .string(failure)], attempt: 2))
        let info = capture.text(atLeast: .info)
        #expect(!info.isEmpty, "nothing was logged at info or above")
        #expect(!info.contains(Self.personal), "\(info)")
        #expect(!info.contains("Olena"), "\(info)")
        let code =
            ["input": "nonexistent-local-time", "reject": "duplicate-profile-name", "service": "llm-bad-request"][
                failure
            ] ?? "llm-server-error"
        #expect(info.contains("error.code=\(code)"), "\(info)")
        if failure == "input" { #expect(info.contains("error.message=profile.birthTime refused"), "\(info)") }
        // The detail is not lost: debug has it, for a developer who asks.
        #expect(capture.text(atLeast: .trace).contains(Self.personal))
    }

    @Test func publicReasonsQuoteNoInput() {
        #expect(FailureLogging.publicReason(of: ServiceFailure(transient: false)) == nil)
        #expect(FailureLogging.publicReason(of: JobRejection(code: "x", message: Self.personal)) == nil)
        let input = JobRejection(
            ChartInputError(.unknownTimezone, field: ChartField.timezone, message: "Europe/Atlantis is unknown")
        )
        #expect(input.publicReason == "profile.timezone refused")
        #expect(input.message == "Europe/Atlantis is unknown")
        #expect(FailureLogging.publicReason(of: CancellationError()) != nil)
    }
}
