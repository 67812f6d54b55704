import AstroDomain
import Foundation

/// The house-overlay texts of a relationship reading: for each planet of one partner and each of
/// the other partner's twelve houses, what that planet brings to that area of the other's life
/// (files `synastry-overlays.json`, one per language; 10 planets × 12 houses).
///
/// The texts are symmetric ("the Venus person", "the other's seventh house"): the report's heading
/// says whose planet falls in whose house.
public struct SynastryOverlayKnowledge: Sendable {
    /// The file name inside a language's knowledge-base folder.
    public static let fileName = "synastry-overlays.json"
    /// The largest file the loader reads; the shipped files are about 100 KB.
    public static let maximumFileBytes = 1 << 20
    /// The largest text of one entry, in characters.
    public static let maximumTextCharacters = 1_000
    /// The range every entry's weight must lie in.
    public static let weightRange: ClosedRange<Double> = 0.1...1.0

    public let language: ReportLanguage
    /// Planet → house (1…12) → rule.
    public let rules: [PlanetName: [Int: KnowledgeRule]]
    /// A label that changes whenever the file's bytes change, e.g. `overlays-en-0123456789abcdef`.
    public let version: String

    /// The text for one partner's `planet` falling in the other partner's `house` (1…12), or
    /// `nil` when the entry is missing or the house is out of range.
    public func rule(planet: PlanetName, house: Int) -> KnowledgeRule? { rules[planet]?[house] }

    /// Every planet/house entry the file lacks, as `"Venus/7"`, in planet then house order;
    /// empty when the file is complete (120 entries).
    public func missingEntries() -> [String] {
        PlanetName.allCases.flatMap { planet in
            (1...12).compactMap { house in rules[planet]?[house] == nil ? "\(planet.rawValue)/\(house)" : nil }
        }
    }

    /// Loads the shipped overlay texts of a language.
    ///
    /// - Throws: `SynastryOverlayKnowledgeError` naming the file and the key at fault (a broken
    ///   build).
    public static func load(
        _ language: ReportLanguage
    ) throws(SynastryOverlayKnowledgeError)
        -> SynastryOverlayKnowledge
    {
        guard
            let directory = Bundle.module.url(forResource: "KnowledgeBase", withExtension: nil)?
                .appendingPathComponent(language.rawValue)
        else {
            throw SynastryOverlayKnowledgeError(
                code: .unreadable,
                file: "\(language.rawValue)/\(fileName)",
                key: nil,
                detail: "the KnowledgeBase resource folder is missing from the Reports bundle"
            )
        }
        return try load(language: language, directory: directory)
    }

    /// Loads `synastry-overlays.json` from a folder. Missing entries are not an error here (see
    /// `missingEntries()`); an unknown key or an invalid entry is.
    ///
    /// - Throws: `SynastryOverlayKnowledgeError`: `.unreadable` (missing, unreadable or larger than
    ///   `maximumFileBytes`), `.malformed` (not JSON of the expected shape), `.unknownKey` (a planet
    ///   that is not a `PlanetName` raw value or a house outside "1"…"12"), `.invalidEntry` (empty
    ///   or overlong text, weight outside `weightRange`, no areas, or no `relationships` area).
    public static func load(
        language: ReportLanguage,
        directory: URL
    ) throws(SynastryOverlayKnowledgeError)
        -> SynastryOverlayKnowledge
    {
        let file = "\(language.rawValue)/\(fileName)"
        let url = directory.appendingPathComponent(fileName)
        let data: Data
        do {
            // Checked before reading so a runaway file is refused without loading it whole.
            let size = try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int ?? 0
            guard size <= maximumFileBytes else {
                throw SynastryOverlayKnowledgeError(
                    code: .unreadable,
                    file: file,
                    key: nil,
                    detail: "\(size) bytes, more than \(maximumFileBytes)"
                )
            }
            data = try Data(contentsOf: url)
        } catch let error as SynastryOverlayKnowledgeError {
            throw error
        } catch {
            throw SynastryOverlayKnowledgeError(
                code: .unreadable,
                file: file,
                key: nil,
                detail: error.localizedDescription
            )
        }
        let table: [String: [String: KnowledgeRule]]
        do {
            table = try JSONDecoder().decode([String: [String: KnowledgeRule]].self, from: data)
        } catch {
            throw SynastryOverlayKnowledgeError(code: .malformed, file: file, key: nil, detail: "\(error)")
        }
        var rules: [PlanetName: [Int: KnowledgeRule]] = [:]
        // Sorted so the same bad file always reports the same key.
        for (planetName, houses) in table.sorted(by: { $0.key < $1.key }) {
            guard let planet = PlanetName(rawValue: planetName) else {
                throw SynastryOverlayKnowledgeError(
                    code: .unknownKey,
                    file: file,
                    key: planetName,
                    detail: "not a planet"
                )
            }
            var byHouse: [Int: KnowledgeRule] = [:]
            for (houseName, rule) in houses.sorted(by: { $0.key < $1.key }) {
                let key = "\(planetName)/\(houseName)"
                guard let house = Int(houseName), (1...12).contains(house), String(house) == houseName else {
                    throw SynastryOverlayKnowledgeError(
                        code: .unknownKey,
                        file: file,
                        key: key,
                        detail: "houses are \"1\"…\"12\""
                    )
                }
                if let problem = problem(with: rule) {
                    throw SynastryOverlayKnowledgeError(code: .invalidEntry, file: file, key: key, detail: problem)
                }
                byHouse[house] = rule
            }
            rules[planet] = byHouse
        }
        var digest = ContentDigest()
        digest.add(data)
        return SynastryOverlayKnowledge(
            language: language,
            rules: rules,
            version: "overlays-\(language.rawValue)-\(digest.hex)"
        )
    }

    private static func problem(with rule: KnowledgeRule) -> String? {
        let text = rule.text.trimmingCharacters(in: .whitespacesAndNewlines)
        if text.isEmpty { return "empty text" }
        if rule.text.count > maximumTextCharacters {
            return "text of \(rule.text.count) characters, more than \(maximumTextCharacters)"
        }
        if !rule.weight.isFinite || !weightRange.contains(rule.weight) {
            return "weight \(rule.weight) outside \(weightRange.lowerBound)…\(weightRange.upperBound)"
        }
        if !rule.areas.contains(.relationships) { return "areas must include relationships" }
        return nil
    }
}

/// `synastry-overlays.json` is missing or malformed. `code` is stable; `file` is the language
/// folder and file name (`uk/synastry-overlays.json`); `key` is the planet or `"Planet/house"` at
/// fault when there is one.
public struct SynastryOverlayKnowledgeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable codes of the overlay file's problems.
    public enum Code: String, Sendable, Hashable {
        case unreadable = "overlay_kb_unreadable"
        case malformed = "overlay_kb_malformed"
        case unknownKey = "overlay_kb_unknown_key"
        case invalidEntry = "overlay_kb_invalid_entry"
    }

    public var code: Code
    public var file: String
    public var key: String?
    public var detail: String

    public init(code: Code, file: String, key: String?, detail: String) {
        self.code = code
        self.file = file
        self.key = key
        self.detail = detail
    }

    public var description: String {
        "\(code.rawValue): \(file)" + (key.map { " key \($0.debugDescription)" } ?? "") + ": \(detail)"
    }
}
