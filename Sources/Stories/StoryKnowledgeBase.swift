import AstroDomain
import Foundation

/// The age groups of Magical Stories, as stored (`stories.age_group`).
public enum StoryAgeGroup: Int, Sendable, Codable, CaseIterable, Hashable {
    /// 3–5 years.
    case preschool = 0
    /// 6–8 years.
    case elementary = 1
    /// 9–10 years.
    case preteen = 2
}

/// How long a page and a sentence may be for an age group, and a story's default length.
public struct StoryAgeRules: Sendable, Decodable, Hashable {
    public var label: String
    public var defaultPages: Int
    public var minWordsPerPage: Int
    public var maxWordsPerPage: Int
    public var maxWordsPerSentence: Int
}

/// One theme's material: titles, settings and the story beats for each age group.
public struct StoryTheme: Sendable, Decodable, Hashable {
    /// The beats of one age group: each text is one page.
    public struct Beats: Sendable, Decodable, Hashable {
        public var openings: [String]
        public var middles: [String]
        public var resolutions: [String]
        public var endings: [String]
    }

    /// emotionalIntelligence, cognitiveDevelopment, confidenceLeadership or socialResponsibility.
    public var growthCategory: String
    public var titles: [String]
    public var settings: [String]
    /// By age group (`"0"`, `"1"`, `"2"`).
    public var beats: [String: Beats]

    /// The beats of `age`; every theme of a loaded knowledge base has all three.
    public func beats(_ age: StoryAgeGroup) -> Beats { beats[String(age.rawValue)]! }
}

/// The built-in story writer's data for one language (package resources, not code): age rules,
/// eight themes with their beats, and the words no children's story may contain.
public struct StoryKnowledgeBase: Sendable {
    public let language: ReportLanguage
    public let ageRules: [StoryAgeGroup: StoryAgeRules]
    public let themes: [String: StoryTheme]
    /// Lower-case whole words refused in any story text.
    public let blocklist: Set<String>
    /// A digest of the file's bytes: stories record it, so the same request and version always
    /// give the same built-in story.
    public let version: String

    /// The growth categories a theme may belong to (the collections' categories).
    public static let growthCategories: Set<String> = [
        "emotionalIntelligence", "cognitiveDevelopment", "confidenceLeadership", "socialResponsibility",
    ]

    private struct File: Decodable {
        var language: String
        var ageGroups: [String: StoryAgeRules]
        var themes: [String: StoryTheme]
        var blocklist: [String]
    }

    /// Loads the shipped knowledge base of `language`.
    ///
    /// - Throws: `StoryKnowledgeBaseError` when the file is missing, is not valid JSON, or is
    ///   incomplete (an age group without rules, a theme without beats for every age group).
    public static func load(_ language: ReportLanguage) throws(StoryKnowledgeBaseError) -> StoryKnowledgeBase {
        guard
            let url = Bundle.module.url(forResource: "StoryKnowledgeBase", withExtension: nil)?
                .appendingPathComponent(language.rawValue).appendingPathComponent("stories.json")
        else {
            throw StoryKnowledgeBaseError("the StoryKnowledgeBase resource folder is missing from the Stories bundle")
        }
        return try load(language: language, file: url)
    }

    /// Loads a knowledge base from `file` (tests point this at edited copies).
    ///
    /// - Throws: `StoryKnowledgeBaseError` naming what is missing or malformed.
    public static func load(language: ReportLanguage, file: URL) throws(StoryKnowledgeBaseError) -> StoryKnowledgeBase {
        let (decoded, data) = try StoryKnowledgeBaseError.decodeKeepingBytes(
            File.self,
            from: file,
            as: "a story knowledge base"
        )
        guard decoded.language == language.rawValue else {
            throw StoryKnowledgeBaseError("\(file.path) is for language \(decoded.language), not \(language.rawValue)")
        }
        var rules: [StoryAgeGroup: StoryAgeRules] = [:]
        for age in StoryAgeGroup.allCases {
            guard let rule = decoded.ageGroups[String(age.rawValue)] else {
                throw StoryKnowledgeBaseError("\(file.path): no rules for age group \(age.rawValue)")
            }
            rules[age] = rule
        }
        guard Set(decoded.themes.keys) == Set(StoryThemes.keys) else {
            throw StoryKnowledgeBaseError(
                "\(file.path): themes \(decoded.themes.keys.sorted()), not the contract's \(StoryThemes.keys)"
            )
        }
        for (key, theme) in decoded.themes {
            guard growthCategories.contains(theme.growthCategory) else {
                throw StoryKnowledgeBaseError("\(file.path): theme \(key) has growth category \(theme.growthCategory)")
            }
            guard !theme.titles.isEmpty, !theme.settings.isEmpty else {
                throw StoryKnowledgeBaseError("\(file.path): theme \(key) needs titles and settings")
            }
            for age in StoryAgeGroup.allCases {
                guard let beats = theme.beats[String(age.rawValue)], !beats.openings.isEmpty,
                    beats.middles.count >= BuiltInStoryWriter.pageRange.upperBound - 3, !beats.resolutions.isEmpty,
                    !beats.endings.isEmpty
                else {
                    throw StoryKnowledgeBaseError(
                        "\(file.path): theme \(key) lacks beats for age group \(age.rawValue) "
                            + "(openings, \(BuiltInStoryWriter.pageRange.upperBound - 3) middles, resolutions, endings)"
                    )
                }
            }
        }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in data {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return StoryKnowledgeBase(
            language: language,
            ageRules: rules,
            themes: decoded.themes,
            blocklist: Set(decoded.blocklist.map { $0.lowercased() }),
            version: "stories-\(language.rawValue)-\(String(hash, radix: 16))"
        )
    }
}

/// The story knowledge base could not be loaded: a broken build or an edited file.
public struct StoryKnowledgeBaseError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }

    /// Reads and decodes one of the shipped data files.
    ///
    /// - Parameter what: what the file should be, for the message (e.g. "a story knowledge base").
    /// - Throws: `StoryKnowledgeBaseError` naming the file: unreadable, or not `what`.
    public static func decode<Value: Decodable>(
        _ type: Value.Type,
        from file: URL,
        as what: String
    ) throws(StoryKnowledgeBaseError) -> Value {
        try decodeKeepingBytes(type, from: file, as: what).value
    }

    /// `decode(_:from:as:)`, also returning the file's bytes (to digest them into a version).
    static func decodeKeepingBytes<Value: Decodable>(
        _ type: Value.Type,
        from file: URL,
        as what: String
    ) throws(StoryKnowledgeBaseError) -> (value: Value, bytes: Data) {
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw StoryKnowledgeBaseError("cannot read \(file.path): \(error.localizedDescription)")
        }
        do {
            return (try JSONDecoder().decode(Value.self, from: data), data)
        } catch {
            throw StoryKnowledgeBaseError("\(file.path) is not \(what): \(error)")
        }
    }
}
