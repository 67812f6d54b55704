import AstroDomain
import Foundation
import Stories

/// The built-in illustrator's data (`Resources/Illustration/scenes.json`), checked and compiled:
/// each theme's backdrop for each scene as one ready string, each setting's scene, the character
/// kinds and the description line.
struct IllustrationScenes: Sendable {
    /// One theme, ready to draw.
    struct Theme: Sendable {
        /// The SVG from the sky to the scene's foreground, by scene name.
        var backdrops: [String: String]
        var defaultScene: String
        /// Lower-cased settings of the story knowledge base and their scenes, in the base's order.
        var settings: [ReportLanguage: [(setting: String, scene: String)]]
        /// The page badge's colour and the text colour (hex).
        var accent: String
        var ink: String
    }

    /// A character kind: the keywords of main characters it fits, the hues its body may take,
    /// and the whole figure with the runtime slots `body`, `dark`, `belly`.
    struct Kind: Sendable {
        var name: String
        var keywords: [String]
        var hues: ClosedRange<Double>
        var figure: SlotTemplate
    }

    static let characterSlots = ["body", "dark", "belly"]
    static let descriptionSlots = ["character", "place", "page", "count"]

    let version: String
    let themes: [String: Theme]
    /// Scene name → place words by language, for the description.
    let places: [String: [ReportLanguage: String]]
    /// In the data's order; the last one (no keywords) fits everyone.
    let kinds: [Kind]
    let descriptions: [ReportLanguage: SlotTemplate]

    // MARK: - The file

    private struct File: Decodable {
        struct Theme: Decodable {
            var defaultScene: String
            var palette: [String: String]
            var sky: String
        }

        struct Scene: Decodable {
            var places: [String: String]
            var svg: String
        }

        struct Rule: Decodable {
            var scene: String
            var keywords: [String]
        }

        struct Character: Decodable {
            struct Kind: Decodable {
                var kind: String
                var keywords: [String]
                var hue: [Double]
                var svg: String
            }

            var body: String
            var kinds: [Kind]
        }

        struct Labels: Decodable {
            var description: String
        }

        var version: String
        var themes: [String: Theme]
        var scenes: [String: Scene]
        var sceneRules: [Rule]
        var character: Character
        var labels: [String: Labels]
    }

    /// Loads the shipped data and compiles it against the story knowledge bases.
    /// - Throws: `StoryKnowledgeBaseError` when the file is missing or inconsistent: a theme of
    ///   the knowledge base without a palette, an unknown scene or slot, a colour that is not hex.
    static func load(knowledgeBases: [StoryKnowledgeBase]) throws(StoryKnowledgeBaseError) -> IllustrationScenes {
        guard let url = Bundle.module.url(forResource: "Illustration", withExtension: nil) else {
            throw StoryKnowledgeBaseError(
                "the Illustration resource folder is missing from the StoryIllustration bundle"
            )
        }
        return try load(file: url.appendingPathComponent("scenes.json"), knowledgeBases: knowledgeBases)
    }

    /// Loads `file` (tests point this at edited copies).
    /// - Throws: `StoryKnowledgeBaseError` naming what is missing or malformed.
    static func load(
        file: URL,
        knowledgeBases: [StoryKnowledgeBase]
    ) throws(StoryKnowledgeBaseError) -> IllustrationScenes {
        let decoded = try StoryKnowledgeBaseError.decode(File.self, from: file, as: "the illustrator's scene data")
        func fail(_ message: String) -> StoryKnowledgeBaseError { StoryKnowledgeBaseError("\(file.path): \(message)") }
        func compile(
            _ text: String,
            fixed: [String: String] = [:],
            runtime: [String] = [],
            _ context: String
        )
            throws(StoryKnowledgeBaseError) -> SlotTemplate
        {
            do {
                return try SlotTemplate(text, fixed: fixed, runtime: runtime)
            } catch {
                throw fail("\(context): \(error.message)")
            }
        }

        for rule in decoded.sceneRules where decoded.scenes[rule.scene] == nil {
            throw fail("a scene rule names the unknown scene \(rule.scene)")
        }
        var places: [String: [ReportLanguage: String]] = [:]
        for (name, scene) in decoded.scenes {
            for language in ReportLanguage.allCases where scene.places[language.rawValue] == nil {
                throw fail("scene \(name) has no place words for \(language.rawValue)")
            }
            places[name] = Dictionary(
                uniqueKeysWithValues: ReportLanguage.allCases.map { ($0, scene.places[$0.rawValue]!) }
            )
        }

        var themes: [String: Theme] = [:]
        let themeKeys = Set(knowledgeBases.flatMap(\.themes.keys))
        for key in themeKeys.sorted() {
            guard let theme = decoded.themes[key] else { throw fail("no palette for the story theme \(key)") }
            for (slot, colour) in theme.palette where !isHexColour(colour) {
                throw fail("theme \(key) colour \(slot) is \(colour.debugDescription), not #rgb or #rrggbb")
            }
            guard decoded.scenes[theme.defaultScene] != nil else {
                throw fail("theme \(key) has the unknown default scene \(theme.defaultScene)")
            }
            let sky = try compile(theme.sky, fixed: theme.palette, "theme \(key) sky").fixedText!
            var backdrops: [String: String] = [:]
            for (name, scene) in decoded.scenes {
                let svg = try compile(scene.svg, fixed: theme.palette, "scene \(name) with theme \(key)").fixedText!
                // The sky gradient, the theme's sky, then the scene: everything behind the character.
                backdrops[name] =
                    "<defs><linearGradient id=\"sky\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">"
                    + "<stop offset=\"0\" stop-color=\"\(theme.palette["sky1"] ?? "#8ec5ff")\"/>"
                    + "<stop offset=\"1\" stop-color=\"\(theme.palette["sky2"] ?? "#e6f4ff")\"/></linearGradient></defs>"
                    + "<rect width=\"800\" height=\"600\" fill=\"url(#sky)\"/>" + sky + svg
            }
            var settings: [ReportLanguage: [(setting: String, scene: String)]] = [:]
            for base in knowledgeBases {
                settings[base.language] = (base.themes[key]?.settings ?? []).map { setting in
                    let lowered = setting.lowercased()
                    return (lowered, scene(of: lowered, rules: decoded.sceneRules) ?? theme.defaultScene)
                }
            }
            themes[key] = Theme(
                backdrops: backdrops,
                defaultScene: theme.defaultScene,
                settings: settings,
                accent: theme.palette["accent"] ?? "#e2574c",
                ink: theme.palette["ink"] ?? "#2b2b2b"
            )
        }

        var kinds: [Kind] = []
        for kind in decoded.character.kinds {
            guard kind.hue.count == 2, kind.hue[0] >= 0, kind.hue[0] <= kind.hue[1], kind.hue[1] <= 360 else {
                throw fail("character kind \(kind.kind) needs a hue range [low, high] within 0…360")
            }
            kinds.append(
                Kind(
                    name: kind.kind,
                    keywords: kind.keywords.map { $0.lowercased() },
                    hues: kind.hue[0]...kind.hue[1],
                    figure: try compile(
                        kind.svg + decoded.character.body,
                        runtime: characterSlots,
                        "character kind \(kind.kind)"
                    )
                )
            )
        }
        guard kinds.last?.keywords.isEmpty == true else {
            throw fail("the last character kind must have no keywords (it fits every character)")
        }

        var descriptions: [ReportLanguage: SlotTemplate] = [:]
        for language in ReportLanguage.allCases {
            guard let labels = decoded.labels[language.rawValue] else {
                throw fail("no labels for \(language.rawValue)")
            }
            descriptions[language] = try compile(
                labels.description,
                runtime: descriptionSlots,
                "the \(language.rawValue) description"
            )
        }
        return IllustrationScenes(
            version: decoded.version,
            themes: themes,
            places: places,
            kinds: kinds,
            descriptions: descriptions
        )
    }

    /// The scene of the rule keyword found earliest in `setting` (its head noun comes first in
    /// both languages: "the sunny meadow by the river", "затишне село біля річки"); ties go to the
    /// earlier rule.
    private static func scene(of setting: String, rules: [File.Rule]) -> String? {
        var best: (offset: Int, scene: String)?
        for rule in rules {
            for keyword in rule.keywords {
                guard let range = setting.range(of: keyword.lowercased()) else { continue }
                let offset = setting.distance(from: setting.startIndex, to: range.lowerBound)
                if best == nil || offset < best!.offset { best = (offset, rule.scene) }
            }
        }
        return best?.scene
    }

    /// `#rgb` or `#rrggbb`: safe to put in an attribute as it is.
    private static func isHexColour(_ text: String) -> Bool {
        (text.count == 4 || text.count == 7) && text.first == "#" && text.dropFirst().allSatisfy(\.isHexDigit)
    }
}
