import Foundation

/// An outside API that costs money per call.
public enum PaidAPI: String, Sendable, Hashable, CaseIterable, Codable {
    /// OpenAI-compatible chat completions (reports and stories), priced per token.
    case llm
    /// OpenAI-compatible images (story illustrations), priced per picture.
    case images
}

/// What a paid call was made for: a report, a story, or a page's illustration.
public enum PaidPurpose: String, Sendable, Hashable, CaseIterable, Codable {
    case report
    case story
    case illustration

    /// The API a call of this purpose goes to.
    public var api: PaidAPI { self == .illustration ? .images : .llm }
}

/// One call the provider answered, and what it cost: the tokens of its `usage` (LLM) or one
/// picture (images), priced at the configured prices.
public struct PaidCallUsage: Sendable, Hashable {
    public var purpose: PaidPurpose
    /// The model that answered (as the API names it, or the configured one).
    public var model: String
    public var promptTokens: Int
    public var completionTokens: Int
    /// Pictures answered (0 for chat).
    public var images: Int
    public var costUSD: Decimal

    /// - Parameters: figures below zero are recorded as zero.
    public init(
        purpose: PaidPurpose,
        model: String,
        promptTokens: Int = 0,
        completionTokens: Int = 0,
        images: Int = 0,
        costUSD: Decimal
    ) {
        self.purpose = purpose
        self.model = model
        self.promptTokens = max(promptTokens, 0)
        self.completionTokens = max(completionTokens, 0)
        self.images = max(images, 0)
        self.costUSD = max(costUSD, 0)
    }
}

/// Whether a paid call may be made now.
public enum PaidCallAdmission: Sendable, Hashable {
    /// Go ahead.
    case admitted
    /// The API's global daily budget is spent (every replica, every user): the built-in writer
    /// or illustrator takes over.
    case budgetReached
    /// This user's paid calls of this purpose today reached their daily bound: the built-in
    /// writer or illustrator takes over for them.
    case userLimitReached

    /// The `reason` label and log value of a refusal (`budget`, `user-limit`); nil when admitted.
    public var refusalReason: String? {
        switch self {
        case .admitted: nil
        case .budgetReached: "budget"
        case .userLimitReached: "user-limit"
        }
    }
}

/// Meters the paid calls of one job: asked before each call whether it may be made, and told of
/// each call the provider answered, at once — whatever becomes of the job afterwards (a failure,
/// a retry, a refund, a dead letter or a crash still counts the call).
///
/// Writers and illustrators take one; the workers give them one bound to the job's user
/// (`WorkerRuntime.PaidCallLedger`).
public protocol PaidCallMeter: Sendable {
    /// Whether one more call for `purpose` may be made now. A meter that cannot tell (its
    /// database is unreachable) refuses: an outage never turns into unbounded spend.
    func admit(_ purpose: PaidPurpose) async -> PaidCallAdmission
    /// Records a call the provider answered (before its answer is checked or used).
    func record(_ usage: PaidCallUsage) async
}
