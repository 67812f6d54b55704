/// One message of a chat: who says it (`system`, `user`, `assistant`) and what.
public struct ChatMessage: Sendable, Hashable, Codable {
    public var role: String
    public var content: String

    public init(role: String, content: String) {
        self.role = role
        self.content = content
    }

    /// The instructions the model follows (persona, rules, output format).
    public static func system(_ content: String) -> ChatMessage { ChatMessage(role: "system", content: content) }

    /// What the user asks.
    public static func user(_ content: String) -> ChatMessage { ChatMessage(role: "user", content: content) }

    /// An earlier answer of the model (for a conversation sent again with its history).
    public static func assistant(_ content: String) -> ChatMessage { ChatMessage(role: "assistant", content: content) }
}

/// What to ask the model; the model itself comes from the client's configuration.
public struct ChatCompletionRequest: Sendable, Hashable {
    public var messages: [ChatMessage]
    /// The answer's length limit in tokens (`max_tokens`); the API's default when `nil`.
    public var maxTokens: Int?
    /// Sampling temperature (0–2; `temperature`); the API's default when `nil`.
    public var temperature: Double?

    public init(messages: [ChatMessage], maxTokens: Int? = nil, temperature: Double? = nil) {
        self.messages = messages
        self.maxTokens = maxTokens
        self.temperature = temperature
    }
}

/// The model's answer: the first choice's text, why it stopped, and what it cost.
public struct ChatCompletion: Sendable, Hashable {
    /// `choices[0].message.content` (empty when the API sent `null`, e.g. for a content filter).
    public var content: String
    /// `choices[0].finish_reason`: `stop` for a finished answer, `length` when `max_tokens` cut it
    /// off, `content_filter`, …; the caller decides what to accept.
    public var finishReason: String?
    /// The model that answered, as the API names it (often a dated version of the requested one).
    public var model: String?
    /// `usage.prompt_tokens`, when the API reported it.
    public var promptTokens: Int?
    /// `usage.completion_tokens`, when the API reported it.
    public var completionTokens: Int?
    /// `usage.total_tokens`, when the API reported it.
    public var totalTokens: Int?
    /// Requests sent for this answer (1 unless earlier attempts failed and were retried).
    public var attempts: Int

    public init(
        content: String,
        finishReason: String?,
        model: String?,
        promptTokens: Int?,
        completionTokens: Int?,
        totalTokens: Int?,
        attempts: Int
    ) {
        self.content = content
        self.finishReason = finishReason
        self.model = model
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.totalTokens = totalTokens
        self.attempts = attempts
    }
}
