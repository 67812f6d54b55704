import AstroDomain
import Foundation

/// One interpretation of the expert-rules knowledge base: what a placement means, which life
/// areas it speaks to and how strongly it marks a chart.
public struct KnowledgeRule: Sendable, Hashable, Codable {
    /// Two or three sentences, in the knowledge base's language, addressed to the reader.
    public var text: String
    /// The areas this placement speaks to (1–3).
    public var areas: [ReportArea]
    /// 0.1…1.0: how strongly the placement marks a life; rule selection ranks by it.
    public var weight: Double

    public init(text: String, areas: [ReportArea], weight: Double) {
        self.text = text
        self.areas = areas
        self.weight = weight
    }
}

/// Two planets of an aspect, in the contract's planet order (`Sun-Moon`, never `Moon-Sun`).
public struct PlanetPair: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let first: PlanetName
    public let second: PlanetName

    /// The pair of two different planets, ordered; `nil` for a planet with itself.
    public init?(_ a: PlanetName, _ b: PlanetName) {
        guard a != b else { return nil }
        (first, second) = a < b ? (a, b) : (b, a)
    }

    /// Every pair of the ten planets: 45.
    public static let all: [PlanetPair] = PlanetName.allCases.flatMap { a in
        PlanetName.allCases.compactMap { b in a < b ? PlanetPair(a, b) : nil }
    }

    /// The knowledge base's key, `Sun-Moon`.
    public var description: String { "\(first.rawValue)-\(second.rawValue)" }

    public static func < (lhs: PlanetPair, rhs: PlanetPair) -> Bool {
        (lhs.first, lhs.second) < (rhs.first, rhs.second)
    }
}

/// The chart angles the knowledge base interprets by sign.
public enum ChartAngle: String, Sendable, Hashable, CaseIterable {
    case ascendant = "Ascendant"
    case midheaven = "Midheaven"
}

/// The expert-rules knowledge base of one language, shipped as package resources (data, not
/// code): every planet in every sign and house, every major aspect of every pair of planets,
/// and the ascendant and midheaven in every sign.
public struct KnowledgeBase: Sendable {
    public let language: ReportLanguage
    public let planetInSign: [PlanetName: [ZodiacSign: KnowledgeRule]]
    public let planetInHouse: [PlanetName: [Int: KnowledgeRule]]
    public let aspects: [PlanetPair: [AspectType: KnowledgeRule]]
    public let angles: [ChartAngle: [ZodiacSign: KnowledgeRule]]
    /// A digest of the files' bytes: reports record it, so the same chart, area, language and
    /// version always give the same built-in report.
    public let version: String

    /// The rule of a planet in a sign.
    public func rule(_ planet: PlanetName, in sign: ZodiacSign) -> KnowledgeRule? { planetInSign[planet]?[sign] }
    /// The rule of a planet in a house (1…12).
    public func rule(_ planet: PlanetName, inHouse house: Int) -> KnowledgeRule? { planetInHouse[planet]?[house] }
    /// The rule of an aspect between two planets.
    public func rule(_ type: AspectType, between a: PlanetName, and b: PlanetName) -> KnowledgeRule? {
        PlanetPair(a, b).flatMap { aspects[$0]?[type] }
    }
    /// The rule of an angle in a sign.
    public func rule(_ angle: ChartAngle, in sign: ZodiacSign) -> KnowledgeRule? { angles[angle]?[sign] }

    /// Every rule the knowledge base must have and does not, as readable keys
    /// (`planet-in-house Mars 7`); empty when complete.
    public func missingEntries() -> [String] {
        var missing: [String] = []
        for planet in PlanetName.allCases {
            for sign in ZodiacSign.allCases where rule(planet, in: sign) == nil {
                missing.append("planet-in-sign \(planet.rawValue) \(sign.rawValue)")
            }
            for house in 1...12 where rule(planet, inHouse: house) == nil {
                missing.append("planet-in-house \(planet.rawValue) \(house)")
            }
        }
        for pair in PlanetPair.all {
            for type in AspectType.allCases where aspects[pair]?[type] == nil {
                missing.append("aspect \(pair) \(type.rawValue)")
            }
        }
        for angle in ChartAngle.allCases {
            for sign in ZodiacSign.allCases where rule(angle, in: sign) == nil {
                missing.append("angle \(angle.rawValue) \(sign.rawValue)")
            }
        }
        return missing
    }

    /// Every rule with its key, for checks over the whole base.
    public var allRules: [(key: String, rule: KnowledgeRule)] {
        var rules: [(String, KnowledgeRule)] = []
        for (planet, signs) in planetInSign {
            for (sign, rule) in signs { rules.append(("planet-in-sign \(planet.rawValue) \(sign.rawValue)", rule)) }
        }
        for (planet, houses) in planetInHouse {
            for (house, rule) in houses { rules.append(("planet-in-house \(planet.rawValue) \(house)", rule)) }
        }
        for (pair, types) in aspects {
            for (type, rule) in types { rules.append(("aspect \(pair) \(type.rawValue)", rule)) }
        }
        for (angle, signs) in angles {
            for (sign, rule) in signs { rules.append(("angle \(angle.rawValue) \(sign.rawValue)", rule)) }
        }
        return rules.sorted { $0.0 < $1.0 }
    }

    /// Loads the shipped knowledge base of a language.
    ///
    /// - Throws: `KnowledgeBaseError` naming the file and the key at fault (a broken build).
    public static func load(_ language: ReportLanguage) throws(KnowledgeBaseError) -> KnowledgeBase {
        guard
            let directory = Bundle.module.url(forResource: "KnowledgeBase", withExtension: nil)?
                .appendingPathComponent(language.rawValue)
        else {
            throw KnowledgeBaseError(message: "the KnowledgeBase resource folder is missing from the Reports bundle")
        }
        return try load(language: language, directory: directory)
    }

    /// Loads a knowledge base from a folder holding planet-in-sign.json, planet-in-house.json,
    /// aspects.json and angles.json.
    ///
    /// - Throws: `KnowledgeBaseError` naming the file and the key at fault.
    public static func load(language: ReportLanguage, directory: URL) throws(KnowledgeBaseError) -> KnowledgeBase {
        var digest = ContentDigest()
        func read(_ name: String) throws(KnowledgeBaseError) -> [String: [String: KnowledgeRule]] {
            let url = directory.appendingPathComponent(name)
            let data: Data
            do {
                data = try Data(contentsOf: url)
            } catch {
                throw KnowledgeBaseError(
                    message: "cannot read \(language.rawValue)/\(name): \(error.localizedDescription)"
                )
            }
            digest.add(data)
            do {
                return try JSONDecoder().decode([String: [String: KnowledgeRule]].self, from: data)
            } catch {
                throw KnowledgeBaseError(message: "\(language.rawValue)/\(name) is not valid: \(error)")
            }
        }
        func keyed<Key: Hashable>(
            _ table: [String: [String: KnowledgeRule]],
            file: String,
            outer: (String) -> Key?
        ) throws(KnowledgeBaseError) -> [Key: [String: KnowledgeRule]] {
            var result: [Key: [String: KnowledgeRule]] = [:]
            for (name, inner) in table {
                guard let key = outer(name) else {
                    throw KnowledgeBaseError(
                        message: "\(language.rawValue)/\(file): unknown key \(name.debugDescription)"
                    )
                }
                result[key] = inner
            }
            return result
        }
        func inner<Key: Hashable>(
            _ table: [String: KnowledgeRule],
            file: String,
            parse: (String) -> Key?
        ) throws(KnowledgeBaseError) -> [Key: KnowledgeRule] {
            var result: [Key: KnowledgeRule] = [:]
            for (name, rule) in table {
                guard let key = parse(name) else {
                    throw KnowledgeBaseError(
                        message: "\(language.rawValue)/\(file): unknown key \(name.debugDescription)"
                    )
                }
                result[key] = rule
            }
            return result
        }
        let pairsByName = Dictionary(uniqueKeysWithValues: PlanetPair.all.map { ($0.description, $0) })
        var planetInSign: [PlanetName: [ZodiacSign: KnowledgeRule]] = [:]
        for (planet, signs) in try keyed(
            read("planet-in-sign.json"),
            file: "planet-in-sign.json",
            outer: PlanetName.init
        ) {
            planetInSign[planet] = try inner(signs, file: "planet-in-sign.json", parse: ZodiacSign.init)
        }
        var planetInHouse: [PlanetName: [Int: KnowledgeRule]] = [:]
        for (planet, houses) in try keyed(
            read("planet-in-house.json"),
            file: "planet-in-house.json",
            outer: PlanetName.init
        ) {
            planetInHouse[planet] = try inner(houses, file: "planet-in-house.json") { text in
                Int(text).flatMap { (1...12).contains($0) ? $0 : nil }
            }
        }
        var aspects: [PlanetPair: [AspectType: KnowledgeRule]] = [:]
        for (pair, types) in try keyed(read("aspects.json"), file: "aspects.json", outer: { pairsByName[$0] }) {
            aspects[pair] = try inner(types, file: "aspects.json", parse: AspectType.init)
        }
        var angles: [ChartAngle: [ZodiacSign: KnowledgeRule]] = [:]
        for (angle, signs) in try keyed(read("angles.json"), file: "angles.json", outer: ChartAngle.init) {
            angles[angle] = try inner(signs, file: "angles.json", parse: ZodiacSign.init)
        }
        return KnowledgeBase(
            language: language,
            planetInSign: planetInSign,
            planetInHouse: planetInHouse,
            aspects: aspects,
            angles: angles,
            version: "kb-\(language.rawValue)-\(digest.hex)"
        )
    }
}

/// The knowledge base files are missing or malformed.
public struct KnowledgeBaseError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

/// FNV-1a over the files' bytes: a stable version label, not a security digest.
struct ContentDigest {
    private var hash: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func add(_ data: Data) {
        for byte in data {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
    }

    var hex: String { String(hash, radix: 16).leftPadded(to: 16) }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
