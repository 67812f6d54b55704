import AstroDomain
import Foundation

/// An unordered pair of synastry points, the synastry knowledge base's key: `Sun-Moon`, with the
/// first point never later than the second in `RelationshipPoint.all` (Sun … Pluto, ASC, MC).
/// Same-point pairs exist (`Venus-Venus`): both people have that point.
public struct PointPair: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let first: RelationshipPoint
    public let second: RelationshipPoint

    /// The pair of two points, in key order.
    public init(_ a: RelationshipPoint, _ b: RelationshipPoint) {
        (first, second) = a.index <= b.index ? (a, b) : (b, a)
    }

    /// Every pair of the twelve points, same-point pairs included: 78.
    public static let all: [PointPair] = RelationshipPoint.all.flatMap { a in
        RelationshipPoint.all.compactMap { b in a.index <= b.index ? PointPair(a, b) : nil }
    }

    /// The knowledge base's key, `Sun-Moon`, `Venus-ASC`, `MC-MC`.
    public var description: String { "\(first.rawValue)-\(second.rawValue)" }

    public static func < (lhs: PointPair, rhs: PointPair) -> Bool {
        (lhs.first.index, lhs.second.index) < (rhs.first.index, rhs.second.index)
    }
}

/// The synastry (inter-aspect) knowledge base of one language: what each of the five major
/// aspects between a point of one chart and a point of the other means for the two people.
/// Shipped as two files per language (`synastry-personal.json`, `synastry-outer.json`), merged
/// on load; every one of the 78 pairs × 5 aspects must be present exactly once.
public struct SynastryKnowledgeBase: Sendable {
    public let language: ReportLanguage
    public let entries: [PointPair: [AspectType: KnowledgeRule]]
    /// A digest of the files' bytes, recorded with each report (same inputs and version, same report).
    public let version: String

    /// The files of a language, merged in this order.
    public static let files = ["synastry-personal.json", "synastry-outer.json"]
    /// Every entry the base must hold: 78 pairs × 5 aspect types.
    public static let requiredCount = PointPair.all.count * AspectType.allCases.count
    /// The bounds of a text's length: shipped texts are 35–80 words; anything outside this is a
    /// broken file, refused at load.
    static let textCharacters = 1...2000

    public init(language: ReportLanguage, entries: [PointPair: [AspectType: KnowledgeRule]], version: String) {
        self.language = language
        self.entries = entries
        self.version = version
    }

    /// The reading of an aspect between a point of one chart and a point of the other (in
    /// either order).
    public func rule(_ type: AspectType, between a: RelationshipPoint, and b: RelationshipPoint) -> KnowledgeRule? {
        entries[PointPair(a, b)]?[type]
    }

    /// Every entry the base must have and does not (`synastry Venus-Mars Trine`); empty when complete.
    public func missingEntries() -> [String] {
        PointPair.all.flatMap { pair in
            AspectType.allCases.compactMap { type in
                entries[pair]?[type] == nil ? "synastry \(pair) \(type.rawValue)" : nil
            }
        }
    }

    /// Loads the shipped synastry knowledge base of a language.
    ///
    /// - Throws: `KnowledgeBaseError` naming the file and key at fault, or listing missing entries
    ///   (a broken build).
    public static func load(_ language: ReportLanguage) throws(KnowledgeBaseError) -> SynastryKnowledgeBase {
        guard
            let directory = Bundle.module.url(forResource: "KnowledgeBase", withExtension: nil)?
                .appendingPathComponent(language.rawValue)
        else {
            throw KnowledgeBaseError(message: "the KnowledgeBase resource folder is missing from the Reports bundle")
        }
        return try load(language: language, directory: directory)
    }

    /// Loads and merges `files` from a folder. Refused: an unreadable or malformed file, a key
    /// that is not a pair in key order or not an aspect type, a key present in both files, a
    /// weight outside 0.1…1.0, an empty or oversized text, areas without `relationships`, and a
    /// base missing any of the required entries.
    ///
    /// - Throws: `KnowledgeBaseError` naming the file and the key at fault.
    public static func load(
        language: ReportLanguage,
        directory: URL
    ) throws(KnowledgeBaseError) -> SynastryKnowledgeBase {
        let pairsByName = Dictionary(uniqueKeysWithValues: PointPair.all.map { ($0.description, $0) })
        var digest = ContentDigest()
        var entries: [PointPair: [AspectType: KnowledgeRule]] = [:]
        var sources: [PointPair: String] = [:]
        for file in files {
            let name = "\(language.rawValue)/\(file)"
            let data: Data
            do {
                data = try Data(contentsOf: directory.appendingPathComponent(file))
            } catch {
                throw KnowledgeBaseError(message: "cannot read \(name): \(error.localizedDescription)")
            }
            digest.add(data)
            let table: [String: [String: KnowledgeRule]]
            do {
                table = try JSONDecoder().decode([String: [String: KnowledgeRule]].self, from: data)
            } catch {
                throw KnowledgeBaseError(message: "\(name) is not valid: \(error)")
            }
            // Sorted, so the first error reported is the same on every run.
            for key in table.keys.sorted() {
                guard let pair = pairsByName[key] else {
                    throw KnowledgeBaseError(
                        message: "\(name): unknown pair \(key.debugDescription) (First-Second in point order)"
                    )
                }
                if let other = sources[pair] {
                    throw KnowledgeBaseError(message: "\(name): pair \(key) is also in \(other)")
                }
                sources[pair] = name
                var aspects: [AspectType: KnowledgeRule] = [:]
                for (typeName, rule) in table[key]! {
                    guard let type = AspectType(rawValue: typeName) else {
                        throw KnowledgeBaseError(
                            message: "\(name): \(key): unknown aspect \(typeName.debugDescription)"
                        )
                    }
                    guard (0.1...1.0).contains(rule.weight),
                        textCharacters.contains(rule.text.count),
                        rule.areas.contains(.relationships)
                    else {
                        throw KnowledgeBaseError(
                            message: "\(name): \(key) \(typeName): weight must be 0.1…1.0, the text 1–2000 "
                                + "characters, and areas must include relationships"
                        )
                    }
                    aspects[type] = rule
                }
                entries[pair] = aspects
            }
        }
        let base = SynastryKnowledgeBase(
            language: language,
            entries: entries,
            version: "kb-synastry-\(language.rawValue)-\(digest.hex)"
        )
        let missing = base.missingEntries()
        guard missing.isEmpty else {
            throw KnowledgeBaseError(
                message: "the \(language.rawValue) synastry knowledge base lacks \(missing.count) of "
                    + "\(requiredCount) entries, e.g. \(missing.prefix(5).joined(separator: ", "))"
            )
        }
        return base
    }
}
