import AstroDomain
import Foundation
import Reports

/// What a story is written for (the `story.generate` job's fields that shape the text).
public struct StoryRequestDetails: Sendable, Hashable {
    public var childName: String
    public var ageGroup: StoryAgeGroup
    public var theme: String
    public var mainCharacter: String
    public var language: ReportLanguage
    /// Pages wanted; nil takes the age group's default.
    public var pageCount: Int?

    public init(
        childName: String,
        ageGroup: StoryAgeGroup,
        theme: String,
        mainCharacter: String,
        language: ReportLanguage,
        pageCount: Int? = nil
    ) {
        self.childName = childName
        self.ageGroup = ageGroup
        self.theme = theme
        self.mainCharacter = mainCharacter
        self.language = language
        self.pageCount = pageCount
    }
}

/// A written story, ready to store with every page's illustration `notStarted`.
public struct WrittenStory: Sendable, Hashable {
    public var title: String
    /// Page texts, page 1 first.
    public var pages: [String]
    /// `built-in` or `llm:<model>`.
    public var writer: String
    /// The knowledge-base (or prompt) version that wrote it.
    public var version: String

    public init(title: String, pages: [String], writer: String, version: String) {
        self.title = title
        self.pages = pages
        self.writer = writer
        self.version = version
    }
}

/// Why a story was not written: a stable `code` and what to change; `isPermanent` decides
/// between a retry of the job and a refund.
public struct StoryWriterError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `unknown-theme`, `invalid-page-count`, `invalid-name`, `unsuitable-content`; from the LLM
    /// writer also `llm-unauthorized`, `llm-bad-request`, `llm-rejected-answer`, or the LLM
    /// client's code for transient failures (`rate-limited`, `server-error`, `timeout`, …).
    public var code: String
    public var message: String
    /// False only for LLM failures a later retry may fix; a bad request stays bad.
    public var isPermanent: Bool
    public init(code: ErrorCode, message: String, isPermanent: Bool = true) {
        self.code = code.rawValue
        self.message = message
        self.isPermanent = isPermanent
    }
    public var description: String { "\(code): \(message)" }

    /// The code of an LLM call the meter refused (the daily budget or the user's bound): the
    /// built-in writer takes over.
    public static let paidCallRefused = ErrorCode.paidCallRefused.rawValue
}

/// The embedded story writer: composes a story from the knowledge base's beats — an opening, a
/// run of episodes, a resolution and an ending with the moral — for the age group, naming the
/// child and the main character. Deterministic for the same request and knowledge-base version.
public struct BuiltInStoryWriter: Sendable {
    /// Pages a story may have.
    public static let pageRange = 3...9

    private let bases: [ReportLanguage: StoryKnowledgeBase]

    /// Loads both languages' knowledge bases.
    /// - Throws: `StoryKnowledgeBaseError` when a shipped file is missing or incomplete.
    public init() throws(StoryKnowledgeBaseError) {
        var bases: [ReportLanguage: StoryKnowledgeBase] = [:]
        for language in ReportLanguage.allCases { bases[language] = try StoryKnowledgeBase.load(language) }
        self.bases = bases
    }

    /// The knowledge base of a language (loaded at init).
    public func knowledgeBase(_ language: ReportLanguage) -> StoryKnowledgeBase { bases[language]! }

    /// Writes the story `details` asks for.
    ///
    /// - Throws: `StoryWriterError` for an unknown theme, a page count outside 3…9, a child's
    ///   or character's name that is empty, longer than 50 characters or has a blocked word.
    public func write(_ details: StoryRequestDetails) throws(StoryWriterError) -> WrittenStory {
        let base = bases[details.language]!
        let checked = try details.checked(against: base)
        let theme = checked.theme
        let pageCount = checked.pageCount
        let child = checked.childName
        let hero = checked.mainCharacter

        var random = Self.seed(details)
        func pick(_ options: [String]) -> String { options[Int(random.next() % UInt64(options.count))] }
        let setting = pick(theme.settings)
        let beats = theme.beats(details.ageGroup)
        func fill(_ text: String) -> String {
            text.replacingOccurrences(of: "{hero}", with: hero)
                .replacingOccurrences(of: "{name}", with: child)
                .replacingOccurrences(of: "{setting}", with: setting)
        }
        // Episodes in the file's order from a chosen start, so the same request reads the same.
        let start = Int(random.next() % UInt64(beats.middles.count))
        let middles = (0..<(pageCount - 3)).map { beats.middles[(start + $0) % beats.middles.count] }
        let pages = ([pick(beats.openings)] + middles + [pick(beats.resolutions), pick(beats.endings)]).map(fill)
        let title = fill(pick(theme.titles))
        return WrittenStory(title: title, pages: pages, writer: "built-in", version: base.version)
    }

    /// A generator fixed by the request (FNV-1a over its fields, then SplitMix64).
    static func seed(_ details: StoryRequestDetails) -> StorySeed {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let key =
            "\(details.childName)|\(details.mainCharacter)|\(details.theme)|\(details.ageGroup.rawValue)|\(details.language.rawValue)|\(details.pageCount ?? 0)"
        for byte in key.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return StorySeed(state: hash)
    }
}

/// A request that passed the checks every writer makes, with its defaults filled in.
struct CheckedStoryRequest {
    var theme: StoryTheme
    var rules: StoryAgeRules
    var pageCount: Int
    /// The names, trimmed.
    var childName: String
    var mainCharacter: String
}

extension StoryRequestDetails {
    /// Checks the request against the knowledge base of its language, before any writing (and,
    /// for the LLM writer, before anything is paid for).
    ///
    /// - Throws: `StoryWriterError` (permanent) for an unknown theme, a page count outside 3…9,
    ///   a child's or character's name that is empty, longer than 50 characters or has a blocked word.
    func checked(against base: StoryKnowledgeBase) throws(StoryWriterError) -> CheckedStoryRequest {
        guard let theme = base.themes[self.theme] else {
            throw StoryWriterError(
                code: .unknownTheme,
                message: "no theme \(InputQuote.short(self.theme)); themes: "
                    + base.themes.keys.sorted().joined(separator: ", ")
            )
        }
        let rules = base.ageRules[ageGroup]!
        let pageCount = self.pageCount ?? rules.defaultPages
        let pageRange = BuiltInStoryWriter.pageRange
        guard pageRange.contains(pageCount) else {
            throw StoryWriterError(
                code: .invalidPageCount,
                message: "pageCount must be \(pageRange.lowerBound)…\(pageRange.upperBound), got \(pageCount)"
            )
        }
        let child = childName.trimmingCharacters(in: .whitespacesAndNewlines)
        let hero = mainCharacter.trimmingCharacters(in: .whitespacesAndNewlines)
        for (field, value) in [("childName", child), ("mainCharacter", hero)] {
            // Scalars, as the database's char_length counts them; no control characters.
            switch TextRules.problem(in: value, maximum: 50) {
            case nil: break
            case .controlCharacter(let position, let scalar)?:
                let problem = TextRules.Problem.controlCharacter(position: position, scalar: scalar)
                throw StoryWriterError(code: .invalidCharacters, message: "\(field) \(problem.phrase)")
            case .tooShort?, .tooLong?:
                throw StoryWriterError(code: .invalidName, message: "\(field) must be 1–50 characters")
            }
            if let word = StoryContentCheck.blockedWord(in: value, blocklist: base.blocklist) {
                throw StoryWriterError(
                    code: .unsuitableContent,
                    message: "\(field) contains \(word.debugDescription)"
                )
            }
        }
        return CheckedStoryRequest(
            theme: theme,
            rules: rules,
            pageCount: pageCount,
            childName: child,
            mainCharacter: hero
        )
    }
}

/// SplitMix64: a small deterministic generator for the writer's choices.
struct StorySeed {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Checks a story for its age group before it is stored, whoever wrote it.
public enum StoryContentCheck {
    /// Names can make a page a few words longer or shorter than its template.
    public static let nameSlack = 8

    /// What is wrong with `pages` for `ageGroup` (empty when nothing): page lengths outside the
    /// age group's range (with `nameSlack`), sentences too long, blocked words.
    public static func problems(
        title: String,
        pages: [String],
        ageGroup: StoryAgeGroup,
        base: StoryKnowledgeBase
    ) -> [String] {
        let rules = base.ageRules[ageGroup]!
        var problems: [String] = []
        if let word = blockedWord(in: title, blocklist: base.blocklist) {
            problems.append("the title contains \(word.debugDescription)")
        }
        for (index, page) in pages.enumerated() {
            let words = BuiltInReportWriter.countWords(page)
            let range = max(1, rules.minWordsPerPage - nameSlack)...(rules.maxWordsPerPage + nameSlack)
            if !range.contains(words) {
                problems.append("page \(index + 1) has \(words) words (\(range.lowerBound)…\(range.upperBound))")
            }
            let longest =
                page.split(whereSeparator: { ".!?…".contains($0) }).map { BuiltInReportWriter.countWords(String($0)) }
                .max() ?? 0
            if longest > rules.maxWordsPerSentence + nameSlack {
                problems.append("page \(index + 1) has a sentence of \(longest) words")
            }
            if let word = blockedWord(in: page, blocklist: base.blocklist) {
                problems.append("page \(index + 1) contains \(word.debugDescription)")
            }
        }
        return problems
    }

    /// The first blocked whole word in `text` (case-insensitive), or nil.
    public static func blockedWord(in text: String, blocklist: Set<String>) -> String? {
        text.lowercased().split(whereSeparator: { !$0.isLetter && $0 != "'" && $0 != "ʼ" }).lazy.map(String.init)
            .first { blocklist.contains($0) }
    }
}
