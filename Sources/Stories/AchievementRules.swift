import AstroDomain
import Foundation
import UUIDText

/// One reading of a story by a child (a `stories.readings` row).
public struct ReadingRecord: Sendable, Hashable {
    public var storyID: UUID
    /// The story's theme key (`stories.stories.theme`), e.g. `courage`.
    public var theme: String
    public var readAt: Date

    public init(storyID: UUID, theme: String, readAt: Date) {
        self.storyID = storyID
        self.theme = theme
        self.readAt = readAt
    }
}

/// A collection every story of which the child has read.
public struct CompletedCollection: Sendable, Hashable {
    public var id: UUID
    /// The collection's display name, put into the achievement's text.
    public var name: String

    public init(id: UUID, name: String) {
        self.id = id
        self.name = name
    }
}

/// One achievement's state for a child: earned, or the progress towards it.
public struct AchievementStatus: Sendable, Hashable {
    /// The key as stored (`stories.achievements.rule_key`), e.g. `theme-mastery:courage`.
    public var ruleKey: String
    /// The stored type: readingStreak, storiesCompleted, themeMastery, collectionCompleted or specialMilestone.
    public var type: String
    public var name: String
    public var description: String
    /// An SF Symbol name, as the iOS app draws it.
    public var icon: String
    /// 0…1; 1 when earned.
    public var progress: Double
    public var earned: Bool
    /// The story whose reading earned it (the read that crossed the threshold), nil when unearned.
    ///
    /// Also nil for a completed collection: `CompletedCollection` does not say which read completed it.
    public var storyID: UUID?

    public init(
        ruleKey: String,
        type: String,
        name: String,
        description: String,
        icon: String,
        progress: Double,
        earned: Bool,
        storyID: UUID?
    ) {
        self.ruleKey = ruleKey
        self.type = type
        self.name = name
        self.description = description
        self.icon = icon
        self.progress = progress
        self.earned = earned
        self.storyID = storyID
    }
}

/// The achievement rules of Magical Stories, kept as data (`StoryKnowledgeBase/achievements.json`),
/// and their evaluation over a child's reading history.
///
/// Evaluation is pure: the same reads, zone, collections and language always give the same statuses,
/// so a redelivered `story.read` job computes exactly what the first delivery did.
public struct AchievementRuleBook: Sendable {
    /// The `version` of the rules file.
    public let version: String
    let rules: [Rule]
    /// Theme key → display name per language; a theme missing here is shown by its key.
    let themeNames: [String: [ReportLanguage: String]]

    /// What a rule counts.
    enum Metric: String, Sendable, CaseIterable {
        /// Distinct stories read (re-reading a story counts once).
        case distinctStoriesRead
        /// The longest run of consecutive calendar days, in the child's zone, with at least one read.
        case streakDays
        /// Reads of one theme (re-reads count); one status per theme read.
        case themeReads
        /// One earned status per completed collection.
        case collectionCompleted

        /// The placeholders the rule's texts may use.
        var placeholders: Set<String> {
            switch self {
            case .distinctStoriesRead, .streakDays: []
            case .themeReads: ["theme"]
            case .collectionCompleted: ["collection"]
            }
        }
    }

    struct Rule: Sendable {
        var key: String
        var type: String
        var metric: Metric
        var threshold: Int
        var icon: String
        var name: [ReportLanguage: String]
        var description: [ReportLanguage: String]
    }

    /// The values `stories.achievements.type` accepts (its CHECK constraint).
    static let types: Set<String> = [
        "readingStreak", "storiesCompleted", "themeMastery", "collectionCompleted", "specialMilestone",
    ]

    private struct File: Decodable {
        struct Rule: Decodable {
            var key: String
            var type: String
            var metric: String
            var threshold: Int
            var icon: String
            var name: [String: String]
            var description: [String: String]
        }

        var version: String
        var themes: [String: [String: String]]
        var rules: [Rule]
    }

    /// Loads the shipped rules.
    ///
    /// - Throws: `StoryKnowledgeBaseError` when the file is missing or invalid (see `load(from:)`).
    public static func load() throws(StoryKnowledgeBaseError) -> AchievementRuleBook {
        try load(from: shippedFile())
    }

    /// Where the shipped `achievements.json` is in the Stories bundle.
    static func shippedFile() throws(StoryKnowledgeBaseError) -> URL {
        guard
            let url = Bundle.module.url(forResource: "StoryKnowledgeBase", withExtension: nil)?
                .appendingPathComponent("achievements.json")
        else {
            throw StoryKnowledgeBaseError("the StoryKnowledgeBase resource folder is missing from the Stories bundle")
        }
        return url
    }

    /// Loads rules from `file` (tests point this at edited copies).
    ///
    /// - Parameter file: A JSON file shaped like the shipped `achievements.json`.
    /// - Throws: `StoryKnowledgeBaseError` naming the file and what to fix: unreadable or malformed JSON,
    ///   an empty version, a duplicate or malformed key, an unknown type or metric, a threshold below 1
    ///   (or not 1 for a collection rule), an empty icon, a name or description missing for a language,
    ///   a placeholder the metric cannot fill, or a theme name missing for a language.
    public static func load(from file: URL) throws(StoryKnowledgeBaseError) -> AchievementRuleBook {
        let decoded = try StoryKnowledgeBaseError.decode(File.self, from: file, as: "an achievement rules file")
        let path = file.path
        guard !decoded.version.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw StoryKnowledgeBaseError("\(path): version is empty")
        }
        guard !decoded.rules.isEmpty else {
            throw StoryKnowledgeBaseError("\(path): rules is empty")
        }

        var themeNames: [String: [ReportLanguage: String]] = [:]
        for (theme, names) in decoded.themes {
            themeNames[theme] = try texts(names, of: "theme \(theme)", field: "name", in: path)
        }

        var keys: Set<String> = []
        var rules: [Rule] = []
        for rule in decoded.rules {
            // The stored key of a per-theme or per-collection rule is `<key>:<subject>`, so a colon in
            // the key itself would make stored keys ambiguous.
            guard !rule.key.isEmpty, !rule.key.contains(":") else {
                throw StoryKnowledgeBaseError("\(path): rule key \"\(rule.key)\" must be non-empty and without ':'")
            }
            guard keys.insert(rule.key).inserted else {
                throw StoryKnowledgeBaseError("\(path): rule key \(rule.key) appears twice; keys must be unique")
            }
            guard types.contains(rule.type) else {
                throw StoryKnowledgeBaseError(
                    "\(path): rule \(rule.key) has unknown type \(rule.type); use one of \(types.sorted())"
                )
            }
            guard let metric = Metric(rawValue: rule.metric) else {
                throw StoryKnowledgeBaseError(
                    "\(path): rule \(rule.key) has unknown metric \(rule.metric); "
                        + "use one of \(Metric.allCases.map(\.rawValue))"
                )
            }
            guard rule.threshold >= 1 else {
                throw StoryKnowledgeBaseError(
                    "\(path): rule \(rule.key) has threshold \(rule.threshold); it must be ≥ 1"
                )
            }
            guard metric != .collectionCompleted || rule.threshold == 1 else {
                throw StoryKnowledgeBaseError(
                    "\(path): rule \(rule.key) is earned once per completed collection, so its threshold must be 1"
                )
            }
            guard !rule.icon.isEmpty else {
                throw StoryKnowledgeBaseError("\(path): rule \(rule.key) has no icon (an SF Symbol name)")
            }
            let name = try texts(rule.name, of: "rule \(rule.key)", field: "name", in: path)
            let description = try texts(rule.description, of: "rule \(rule.key)", field: "description", in: path)
            for text in Array(name.values) + Array(description.values) {
                for placeholder in placeholders(in: text) where !metric.placeholders.contains(placeholder) {
                    throw StoryKnowledgeBaseError(
                        "\(path): rule \(rule.key) uses {\(placeholder)}, which metric \(metric.rawValue) cannot fill"
                    )
                }
            }
            rules.append(
                Rule(
                    key: rule.key,
                    type: rule.type,
                    metric: metric,
                    threshold: rule.threshold,
                    icon: rule.icon,
                    name: name,
                    description: description
                )
            )
        }
        return AchievementRuleBook(version: decoded.version, rules: rules, themeNames: themeNames)
    }

    /// The non-empty text of every language, or an error naming the first one missing.
    private static func texts(
        _ byLanguage: [String: String],
        of owner: String,
        field: String,
        in path: String
    ) throws(StoryKnowledgeBaseError) -> [ReportLanguage: String] {
        var result: [ReportLanguage: String] = [:]
        for language in ReportLanguage.allCases {
            guard let text = byLanguage[language.rawValue], !text.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw StoryKnowledgeBaseError("\(path): \(owner) has no \(language.rawValue) \(field)")
            }
            result[language] = text
        }
        return result
    }

    /// The names between braces in `text` (`{theme}` → `theme`).
    private static func placeholders(in text: String) -> [String] {
        var found: [String] = []
        var rest = text[...]
        while let open = rest.firstIndex(of: "{") {
            let afterOpen = rest.index(after: open)
            guard let close = rest[afterOpen...].firstIndex(of: "}") else { break }
            found.append(String(rest[afterOpen..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return found
    }

    /// Every achievement's state for a child after `reads`.
    ///
    /// Count and streak rules always give a status (unearned ones with their progress); a theme rule gives
    /// one per theme read at least once (`<key>:<theme>`); a collection rule one earned status per
    /// completed collection (`<key>:<collection uuid lowercased>`).
    ///
    /// - Parameters:
    ///   - reads: All the child's reads, in any order, the newest included.
    ///   - timeZone: The child's zone: streak days are its calendar days.
    ///   - completedCollections: The collections the child has read completely.
    ///   - language: The language of names and descriptions.
    /// - Returns: Statuses in rule order (as in the file), then by theme or collection key.
    /// - Important: An earned status's `storyID` is the story of the read at which the threshold was first
    ///   crossed, reads taken by `readAt` with ties in array order; so it stays the same as reads are added.
    public func evaluate(
        reads: [ReadingRecord],
        timeZone: TimeZone,
        completedCollections: [CompletedCollection],
        language: ReportLanguage
    ) -> [AchievementStatus] {
        let history = ReadingHistory(reads: reads, timeZone: timeZone, thresholds: thresholds)
        var statuses: [AchievementStatus] = []
        for rule in rules {
            switch rule.metric {
            case .distinctStoriesRead:
                statuses.append(
                    status(
                        rule,
                        key: rule.key,
                        value: history.distinctStories,
                        crossing: history.distinctCrossings[rule.threshold],
                        language: language
                    )
                )
            case .streakDays:
                statuses.append(
                    status(
                        rule,
                        key: rule.key,
                        value: history.longestStreak,
                        crossing: history.streakCrossings[rule.threshold],
                        language: language
                    )
                )
            case .themeReads:
                for (theme, tally) in history.themes.sorted(by: { $0.key < $1.key }) {
                    let themeName = themeNames[theme]?[language] ?? theme
                    statuses.append(
                        status(
                            rule,
                            key: "\(rule.key):\(theme)",
                            value: tally.reads,
                            crossing: tally.crossings[rule.threshold],
                            language: language,
                            placeholder: ("{theme}", themeName)
                        )
                    )
                }
            case .collectionCompleted:
                // The same collection passed twice is still one achievement (the key is unique in the DB).
                var byKey: [String: CompletedCollection] = [:]
                for collection in completedCollections where byKey[collection.id.lowercasedText] == nil {
                    byKey[collection.id.lowercasedText] = collection
                }
                for (subject, collection) in byKey.sorted(by: { $0.key < $1.key }) {
                    statuses.append(
                        status(
                            rule,
                            key: "\(rule.key):\(subject)",
                            value: rule.threshold,
                            crossing: nil,
                            language: language,
                            placeholder: ("{collection}", collection.name)
                        )
                    )
                }
            }
        }
        return statuses
    }

    /// The thresholds evaluation must record crossings for, by metric.
    private var thresholds: [Metric: Set<Int>] {
        var result: [Metric: Set<Int>] = [:]
        for rule in rules { result[rule.metric, default: []].insert(rule.threshold) }
        return result
    }

    private func status(
        _ rule: Rule,
        key: String,
        value: Int,
        crossing: UUID?,
        language: ReportLanguage,
        placeholder: (token: String, value: String)? = nil
    ) -> AchievementStatus {
        let earned = value >= rule.threshold
        var name = rule.name[language]!
        var description = rule.description[language]!
        if let placeholder {
            name = name.replacingOccurrences(of: placeholder.token, with: placeholder.value)
            description = description.replacingOccurrences(of: placeholder.token, with: placeholder.value)
        }
        return AchievementStatus(
            ruleKey: key,
            type: rule.type,
            name: name,
            description: description,
            icon: rule.icon,
            progress: earned ? 1 : Double(value) / Double(rule.threshold),
            earned: earned,
            storyID: earned ? crossing : nil
        )
    }
}

/// One pass over a child's reads in chronological order: the counts every metric needs and, for each
/// threshold a rule uses, the story of the read that first reached it.
struct ReadingHistory {
    struct ThemeTally {
        var reads = 0
        var crossings: [Int: UUID] = [:]
    }

    private(set) var distinctStories = 0
    private(set) var distinctCrossings: [Int: UUID] = [:]
    private(set) var longestStreak = 0
    private(set) var streakCrossings: [Int: UUID] = [:]
    private(set) var themes: [String: ThemeTally] = [:]

    init(reads: [ReadingRecord], timeZone: TimeZone, thresholds: [AchievementRuleBook.Metric: Set<Int>]) {
        let distinctThresholds = thresholds[.distinctStoriesRead] ?? []
        let streakThresholds = thresholds[.streakDays] ?? []
        let themeThresholds = thresholds[.themeReads] ?? []
        var seen = Set<UUID>(minimumCapacity: reads.count)
        var days = LocalDayCounter(timeZone: timeZone)
        var lastDay = Int.min
        var streak = 0
        for index in Self.chronologicalOrder(reads) {
            let read = reads[index]
            if seen.insert(read.storyID).inserted {
                distinctStories += 1
                if distinctThresholds.contains(distinctStories) { distinctCrossings[distinctStories] = read.storyID }
            }

            let day = days.day(of: read.readAt)
            // A later read can fall on an earlier local day only when clocks go back across midnight;
            // that day was already counted, so the streak stands.
            if day > lastDay {
                streak = day == lastDay + 1 ? streak + 1 : 1
                lastDay = day
                if streak > longestStreak {
                    longestStreak = streak
                    if streakThresholds.contains(streak) { streakCrossings[streak] = read.storyID }
                }
            }

            // A read without a theme cannot master one.
            if !read.theme.isEmpty {
                themes[read.theme, default: ThemeTally()].reads += 1
                let count = themes[read.theme]!.reads
                if themeThresholds.contains(count) { themes[read.theme]!.crossings[count] = read.storyID }
            }
        }
    }

    /// Indices of `reads` by `readAt`, ties in array order; reads already in order (as a query with
    /// ORDER BY gives them) skip the sort.
    static func chronologicalOrder(_ reads: [ReadingRecord]) -> [Int] {
        let indices = Array(reads.indices)
        var sorted = true
        for index in reads.indices.dropFirst() where reads[index].readAt < reads[index - 1].readAt {
            sorted = false
            break
        }
        if sorted { return indices }
        return indices.sorted { reads[$0].readAt != reads[$1].readAt ? reads[$0].readAt < reads[$1].readAt : $0 < $1 }
    }
}

/// The calendar day (days since 1970-01-01 in local time) of instants in one zone.
///
/// Asking the zone for its offset costs far more than the arithmetic, so the offset is kept until the
/// zone's next transition; instants given in chronological order then ask about once per transition.
struct LocalDayCounter {
    let timeZone: TimeZone
    private var offset = 0
    private var validFrom = Date.distantFuture
    private var validUntil = Date.distantPast

    init(timeZone: TimeZone) { self.timeZone = timeZone }

    mutating func day(of date: Date) -> Int {
        if date < validFrom || date >= validUntil {
            offset = timeZone.secondsFromGMT(for: date)
            validFrom = date
            validUntil = timeZone.nextDaylightSavingTimeTransition(after: date) ?? .distantFuture
        }
        let localSeconds = date.timeIntervalSince1970 + Double(offset)
        return Int((localSeconds / 86_400).rounded(.down))
    }
}
