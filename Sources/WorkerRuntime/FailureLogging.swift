import AMQP
import AstroDomain
import Logging
import Postgres

/// The one rule for what a log line says about a failed job or a failed step of one (issue 29,
/// F15; README, "No personal data in the logs").
///
/// A failure has a code, a public reason and a message. The message is the detail for the person
/// who sent the job: it may quote what they sent (`profile.birthTime: 2021-03-28 03:30 does not
/// exist in Europe/Kyiv`, a profile's name, the prompt an LLM refused). It goes where that person,
/// or an operator acting for them, reads it — the person's own `<type>.failed` event, the job's
/// row, the dead letter's `x-astro-reason` header (beside the body, which holds the same
/// values) — and into `debug` logs, never into a log line at `info` or above. Those carry the code
/// (`error.code`) and the public reason (`error.message`) when the failure has one: words that
/// quote no input, such as the field at fault or a database or broker error, whose modules keep
/// values out of their descriptions.
public enum FailureLogging {
    /// The log key of a failure's message, in debug lines only.
    public static let detailKey = "error.detail"

    /// Metadata for a log line at any level about a failure: its code and, when it has one, its
    /// public reason.
    /// - Parameters:
    ///   - code: the failure's stable code.
    ///   - publicReason: words about it that quote no input, or nil.
    public static func metadata(code: String, publicReason: String?) -> Logger.Metadata {
        var metadata: Logger.Metadata = [LogKey.reasonCode: "\(code)"]
        if let publicReason { metadata[LogKey.reason] = "\(publicReason)" }
        return metadata
    }

    /// Logs a failure: `message` with its code and public reason at `level`, then its detail (which
    /// may quote input) at `debug`.
    /// - Parameters:
    ///   - message: the log message (constant text).
    ///   - level: the level of the line without the detail.
    ///   - code: the failure's stable code.
    ///   - publicReason: words about it that quote no input, or nil.
    ///   - detail: the failure's message, for the debug line.
    ///   - extra: further metadata for both lines (page numbers, delays).
    ///   - logger: where to log.
    public static func log(
        _ message: Logger.Message,
        level: Logger.Level,
        code: String,
        publicReason: String?,
        detail: String,
        extra: Logger.Metadata = [:],
        logger: Logger
    ) {
        let metadata = metadata(code: code, publicReason: publicReason).merging(extra) { _, new in new }
        logger.log(level: level, message, metadata: metadata)
        logger.debug("failure detail", metadata: metadata.merging([detailKey: "\(detail)"]) { _, new in new })
    }

    /// The public reason of an error a job threw: a rejection's own, a database or broker error's
    /// description (their modules keep values out of it), a classified error's own; nil for any
    /// other error, whose description may quote anything.
    public static func publicReason(of error: any Error) -> String? {
        switch error {
        case let rejection as JobRejection: return rejection.publicReason
        case let error as PostgresError: return error.description
        case let error as AMQPError: return error.description
        case let error as any RetryClassifiedError: return error.publicReason
        case is CancellationError: return "the job was cancelled"
        default: return nil
        }
    }
}

extension RetryClassifiedError {
    /// By default an error's description is detail (it may quote the request or the remote
    /// service's answer): the logs get its code only.
    public var publicReason: String? { nil }
}

extension JobRejection {
    /// A refusal of chart input: the message names the value, the public reason only the field.
    public init(_ input: ChartInputError) {
        self.init(code: input.code.rawValue, message: input.message, publicReason: "\(input.field) refused")
    }
}
