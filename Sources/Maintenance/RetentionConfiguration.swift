import AstroDomain

/// How long finished work is kept and how the maintenance task goes about deleting it, read
/// from the environment. Every value is bounded; a value outside its bounds, or one that does
/// not parse, stops the task before it touches anything (`RetentionConfigurationError`).
public struct RetentionConfiguration: Sendable, Equatable {
    /// A finished `jobs` row (succeeded, failed, dead or cancelled) is deleted once its `finished_at` is
    /// older than this (`JOB_RETENTION`, default 7 days, 1 hour … 365 days). The gateway's
    /// record of the job goes with it.
    public var jobRetention: Duration
    /// A sent `outbox` row is deleted once its `sent_at` is older than this (`OUTBOX_RETENTION`,
    /// default 1 day, 1 minute … 365 days).
    public var outboxRetention: Duration
    /// Rows deleted per statement (`RETENTION_BATCH_SIZE`, default 1000, 10 … 10000): each batch
    /// is its own short transaction.
    public var batchSize: Int
    /// The most time one run spends deleting (`RETENTION_MAX_DURATION`, default 30 minutes,
    /// 10 seconds … 6 hours); what is left waits for the next run (the run is `partial`).
    public var maxDuration: Duration
    /// A dead letter older than this is dropped from its `<queue>.dead` queue
    /// (`DEAD_LETTER_MAX_AGE`, default 7 days, 1 hour … 365 days; not above `JOB_RETENTION`,
    /// so a dead job's row outlives its dead letter).
    public var deadLetterMaxAge: Duration
    /// The most messages a `<queue>.dead` queue keeps; the oldest beyond it are dropped
    /// (`DEAD_LETTER_MAX_LENGTH`, default 10000, 1 … 1000000).
    public var deadLetterMaxLength: Int
    /// A child's profile, and a story, that nobody opened for this long is deleted with
    /// everything of it (`CHILD_DATA_RETENTION`, default 365 days, 30 … 3650 days; `off` keeps
    /// children's data until the parent deletes it). nil is `off`.
    public var childDataRetention: Duration?
    /// A stored chart result (`chart_results`) not used for this long is deleted: its next
    /// request computes it again (`CHART_RESULT_RETENTION`, default 180 days, 1 … 3650 days;
    /// `off` keeps them until their profile goes). nil is `off`.
    public var chartResultRetention: Duration? = .seconds(180 * 86_400)
    /// A stored chart result that nobody has read (`GET /v1/chart-results/{id}`, which sets
    /// `read_at`) this long after it was computed is deleted (`CHART_RESULT_UNREAD_RETENTION`,
    /// default 2 days, 1 hour … 3650 days; `off`: only `chartResultRetention` applies). nil is `off`.
    public var chartResultUnreadRetention: Duration? = .seconds(2 * 86_400)

    /// The documented defaults.
    public static let defaults = RetentionConfiguration(
        jobRetention: .seconds(7 * 86_400),
        outboxRetention: .seconds(86_400),
        batchSize: 1000,
        maxDuration: .seconds(1800),
        deadLetterMaxAge: .seconds(7 * 86_400),
        deadLetterMaxLength: 10_000,
        childDataRetention: .seconds(365 * 86_400)
    )

    /// Makes a configuration; `validated()` checks it.
    public init(
        jobRetention: Duration,
        outboxRetention: Duration,
        batchSize: Int,
        maxDuration: Duration,
        deadLetterMaxAge: Duration,
        deadLetterMaxLength: Int,
        childDataRetention: Duration? = .seconds(365 * 86_400)
    ) {
        self.jobRetention = jobRetention
        self.outboxRetention = outboxRetention
        self.batchSize = batchSize
        self.maxDuration = maxDuration
        self.deadLetterMaxAge = deadLetterMaxAge
        self.deadLetterMaxLength = deadLetterMaxLength
        self.childDataRetention = childDataRetention
    }

    static let jobRetentionBounds: ClosedRange<Int64> = 3600...(365 * 86_400)
    static let outboxRetentionBounds: ClosedRange<Int64> = 60...(365 * 86_400)
    static let batchSizeBounds: ClosedRange<Int> = 10...10_000
    static let maxDurationBounds: ClosedRange<Int64> = 10...(6 * 3600)
    static let deadLetterMaxAgeBounds: ClosedRange<Int64> = 3600...(365 * 86_400)
    static let deadLetterMaxLengthBounds: ClosedRange<Int> = 1...1_000_000
    // The lower bound is also enforced by the database (stories.expire_unopened, migration 0029).
    static let childDataRetentionBounds: ClosedRange<Int64> = (30 * 86_400)...(3650 * 86_400)
    static let chartResultRetentionBounds: ClosedRange<Int64> = 86_400...(3650 * 86_400)
    static let chartResultUnreadRetentionBounds: ClosedRange<Int64> = 3600...(3650 * 86_400)

    /// Reads `JOB_RETENTION`, `OUTBOX_RETENTION`, `RETENTION_BATCH_SIZE`,
    /// `RETENTION_MAX_DURATION`, `DEAD_LETTER_MAX_AGE`, `DEAD_LETTER_MAX_LENGTH` and
    /// `CHILD_DATA_RETENTION`, `CHART_RESULT_RETENTION` and `CHART_RESULT_UNREAD_RETENTION` (each
    /// a duration or `off`); an unset or
    /// empty variable takes its default. Durations are a whole number with a unit: `s`, `m`,
    /// `h` or `d` (`7d`, `36h`, `90m`).
    ///
    /// - Throws: `RetentionConfigurationError` naming the variable, what it got and what it
    ///   accepts, for the first value that does not parse or is out of bounds, or when
    ///   `DEAD_LETTER_MAX_AGE` exceeds `JOB_RETENTION`.
    public static func fromEnvironment(
        _ environment: [String: String]
    ) throws(RetentionConfigurationError)
        -> RetentionConfiguration
    {
        func value(_ name: String) -> String? {
            guard let text = environment[name], !text.isEmpty else { return nil }
            return text
        }
        var configuration = defaults
        if let text = value("JOB_RETENTION") {
            configuration.jobRetention = try duration("JOB_RETENTION", text, within: jobRetentionBounds)
        }
        if let text = value("OUTBOX_RETENTION") {
            configuration.outboxRetention = try duration("OUTBOX_RETENTION", text, within: outboxRetentionBounds)
        }
        if let text = value("RETENTION_BATCH_SIZE") {
            configuration.batchSize = try integer("RETENTION_BATCH_SIZE", text, within: batchSizeBounds)
        }
        if let text = value("RETENTION_MAX_DURATION") {
            configuration.maxDuration = try duration("RETENTION_MAX_DURATION", text, within: maxDurationBounds)
        }
        if let text = value("DEAD_LETTER_MAX_AGE") {
            configuration.deadLetterMaxAge = try duration("DEAD_LETTER_MAX_AGE", text, within: deadLetterMaxAgeBounds)
        }
        if let text = value("DEAD_LETTER_MAX_LENGTH") {
            configuration.deadLetterMaxLength = try integer(
                "DEAD_LETTER_MAX_LENGTH",
                text,
                within: deadLetterMaxLengthBounds
            )
        }
        if let text = value("CHILD_DATA_RETENTION") {
            configuration.childDataRetention =
                text == "off"
                ? nil : try duration("CHILD_DATA_RETENTION", text, within: childDataRetentionBounds)
        }
        if let text = value("CHART_RESULT_RETENTION") {
            configuration.chartResultRetention =
                text == "off"
                ? nil : try duration("CHART_RESULT_RETENTION", text, within: chartResultRetentionBounds)
        }
        if let text = value("CHART_RESULT_UNREAD_RETENTION") {
            configuration.chartResultUnreadRetention =
                text == "off"
                ? nil
                : try duration("CHART_RESULT_UNREAD_RETENTION", text, within: chartResultUnreadRetentionBounds)
        }
        try configuration.validated()
        return configuration
    }

    /// Checks every bound and that a dead job's row outlives its dead letter.
    ///
    /// - Throws: `RetentionConfigurationError` for the first value out of bounds.
    public func validated() throws(RetentionConfigurationError) {
        func check(_ name: String, _ value: Duration, _ bounds: ClosedRange<Int64>) throws(RetentionConfigurationError)
        {
            let seconds = value.components.seconds
            guard bounds.contains(seconds), value.components.attoseconds == 0 else {
                throw RetentionConfigurationError(
                    variable: name,
                    message:
                        "\(seconds)s is outside \(Self.describe(bounds.lowerBound))…\(Self.describe(bounds.upperBound))"
                )
            }
        }
        try check("JOB_RETENTION", jobRetention, Self.jobRetentionBounds)
        try check("OUTBOX_RETENTION", outboxRetention, Self.outboxRetentionBounds)
        try check("RETENTION_MAX_DURATION", maxDuration, Self.maxDurationBounds)
        try check("DEAD_LETTER_MAX_AGE", deadLetterMaxAge, Self.deadLetterMaxAgeBounds)
        if let childDataRetention {
            try check("CHILD_DATA_RETENTION", childDataRetention, Self.childDataRetentionBounds)
        }
        if let chartResultRetention {
            try check("CHART_RESULT_RETENTION", chartResultRetention, Self.chartResultRetentionBounds)
        }
        if let chartResultUnreadRetention {
            try check(
                "CHART_RESULT_UNREAD_RETENTION",
                chartResultUnreadRetention,
                Self.chartResultUnreadRetentionBounds
            )
        }
        guard Self.batchSizeBounds.contains(batchSize) else {
            throw RetentionConfigurationError(
                variable: "RETENTION_BATCH_SIZE",
                message: "\(batchSize) is outside \(Self.batchSizeBounds.lowerBound)…\(Self.batchSizeBounds.upperBound)"
            )
        }
        guard Self.deadLetterMaxLengthBounds.contains(deadLetterMaxLength) else {
            throw RetentionConfigurationError(
                variable: "DEAD_LETTER_MAX_LENGTH",
                message: "\(deadLetterMaxLength) is outside 1…\(Self.deadLetterMaxLengthBounds.upperBound)"
            )
        }
        // A dead letter replayed after its job's row was deleted would run as a new job: the
        // row must stay at least as long as the dead letter can.
        guard deadLetterMaxAge <= jobRetention else {
            throw RetentionConfigurationError(
                variable: "DEAD_LETTER_MAX_AGE",
                message: "\(Self.describe(deadLetterMaxAge.components.seconds)) exceeds JOB_RETENTION "
                    + "(\(Self.describe(jobRetention.components.seconds))): a dead job's row must outlive its dead letter"
            )
        }
    }

    /// `30s`, `90m`, `36h`, `7d` → a duration; anything else (no unit, a sign, a fraction,
    /// more than 9 digits) is refused.
    static func duration(
        _ name: String,
        _ text: String,
        within bounds: ClosedRange<Int64>
    ) throws(RetentionConfigurationError) -> Duration {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        guard let unit = text.last, let factor = units[unit] else {
            throw RetentionConfigurationError(
                variable: name,
                message:
                    "\"\(text.prefix(40))\" is not a duration: expected a whole number and a unit s, m, h or d (e.g. 7d)"
            )
        }
        let digits = text.dropLast()
        guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            let number = Int64(digits)
        else {
            throw RetentionConfigurationError(
                variable: name,
                message:
                    "\"\(text.prefix(40))\" is not a duration: expected a whole number and a unit s, m, h or d (e.g. 7d)"
            )
        }
        let seconds = number * factor
        guard bounds.contains(seconds) else {
            throw RetentionConfigurationError(
                variable: name,
                message: "\(text) is outside \(describe(bounds.lowerBound))…\(describe(bounds.upperBound))"
            )
        }
        return .seconds(seconds)
    }

    static func integer(
        _ name: String,
        _ text: String,
        within bounds: ClosedRange<Int>
    ) throws(RetentionConfigurationError) -> Int {
        guard text.count <= 9, text.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int(text) else {
            throw RetentionConfigurationError(
                variable: name,
                message: "\"\(text.prefix(40))\" is not a whole number"
            )
        }
        guard bounds.contains(number) else {
            throw RetentionConfigurationError(
                variable: name,
                message: "\(number) is outside \(bounds.lowerBound)…\(bounds.upperBound)"
            )
        }
        return number
    }

    /// Seconds in the largest unit that divides them (`604800` → `7d`).
    static func describe(_ seconds: Int64) -> String {
        if seconds % 86_400 == 0 { return "\(seconds / 86_400)d" }
        if seconds % 3600 == 0 { return "\(seconds / 3600)h" }
        if seconds % 60 == 0 { return "\(seconds / 60)m" }
        return "\(seconds)s"
    }
}

/// A maintenance setting that does not parse or is out of bounds: the task stops before it
/// deletes anything. Its code is stable (`invalid-configuration`); `variable` names the setting.
public struct RetentionConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The stable code of every configuration error.
    public static let code = ErrorCode.invalidConfiguration.rawValue
    /// The environment variable at fault.
    public var variable: String
    /// What was wrong and what is accepted.
    public var message: String

    public var description: String { "\(variable): \(message)" }
}
