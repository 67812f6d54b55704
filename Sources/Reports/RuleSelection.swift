import AstroDomain
import Foundation

/// What in a chart a knowledge-base rule interprets.
public enum ChartFactor: Sendable, Hashable {
    case planetInSign(PlanetName, ZodiacSign, retrograde: Bool)
    case planetInHouse(PlanetName, house: Int)
    case aspect(PlanetPair, AspectType, orb: Double)
    case angle(ChartAngle, ZodiacSign)

    /// A stable key (`aspect Sun-Moon Square`), used to break ties the same way every time.
    public var key: String {
        switch self {
        case .planetInSign(let planet, let sign, _): "planet-in-sign \(planet.rawValue) \(sign.rawValue)"
        case .planetInHouse(let planet, let house): "planet-in-house \(planet.rawValue) \(house)"
        case .aspect(let pair, let type, _): "aspect \(pair) \(type.rawValue)"
        case .angle(let angle, let sign): "angle \(angle.rawValue) \(sign.rawValue)"
        }
    }
}

/// A rule chosen for a report, with the score that ranked it.
public struct SelectedRule: Sendable, Hashable {
    public var factor: ChartFactor
    public var rule: KnowledgeRule
    public var score: Double
}

/// Ranks the knowledge base's rules for one chart and life area and keeps the strongest, as
/// the seed prescribes: by the rule's weight, by how tight an aspect is, and by angularity
/// (planets on the angles' houses, 1, 4, 7 and 10, count more), with the area's own houses and
/// bodies preferred.
public enum RuleSelection {
    /// How many rules a report is written from.
    public static let defaultCount = 10

    /// The houses and planets each area is read from first.
    static func emphasis(_ area: ReportArea) -> (houses: Set<Int>, planets: Set<PlanetName>) {
        switch area {
        case .finances: ([2, 8], [.venus, .jupiter, .saturn, .pluto])
        case .career: ([10, 6], [.saturn, .sun, .mars, .jupiter])
        case .relationships: ([7, 5], [.venus, .moon, .mars])
        case .health: ([6, 1], [.mars, .moon, .sun, .saturn])
        case .general: ([1], [.sun, .moon])
        }
    }

    /// The factors of a chart that the knowledge base interprets: every planet's sign and
    /// house, every aspect, and the ascendant's and midheaven's signs.
    public static func factors(of chart: NatalChart) -> [ChartFactor] {
        var factors: [ChartFactor] = []
        for planet in chart.planets {
            factors.append(.planetInSign(planet.name, planet.sign, retrograde: planet.isRetrograde))
            factors.append(.planetInHouse(planet.name, house: planet.house))
        }
        for aspect in chart.aspects {
            if let pair = PlanetPair(aspect.planet1, aspect.planet2) {
                factors.append(.aspect(pair, aspect.type, orb: aspect.orb))
            }
        }
        factors.append(.angle(.ascendant, ZodiacSign(longitude: chart.ascendant)))
        factors.append(.angle(.midheaven, ZodiacSign(longitude: chart.midheaven)))
        return factors
    }

    /// The top `count` rules for `area`, strongest first; the same chart, area and knowledge
    /// base always give the same list.
    public static func select(
        chart: NatalChart,
        area: ReportArea,
        base: KnowledgeBase,
        count: Int = defaultCount
    ) -> [SelectedRule] {
        let houseOf = Dictionary(chart.planets.map { ($0.name, $0.house) }, uniquingKeysWith: { first, _ in first })
        let (areaHouses, areaPlanets) = emphasis(area)
        var candidates: [SelectedRule] = []
        for factor in factors(of: chart) {
            guard let rule = rule(for: factor, in: base) else { continue }
            var score = rule.weight
            switch factor {
            case .planetInSign(let planet, _, _):
                if areaPlanets.contains(planet) { score *= 1.15 }
                // The general reading always starts from the "big three": Sun, Moon, ascendant.
                if area == .general, planet == .sun || planet == .moon { score *= 1.5 }
                if let house = houseOf[planet], [1, 4, 7, 10].contains(house) { score *= 1.1 }
            case .planetInHouse(let planet, let house):
                if areaHouses.contains(house) { score *= 1.3 }
                if [1, 4, 7, 10].contains(house) { score *= 1.2 }
                if areaPlanets.contains(planet) { score *= 1.1 }
            case .aspect(let pair, let type, let orb):
                // An exact aspect counts half again as much as one at the edge of its orb.
                let tightness = max(0, 1 - orb / type.maxOrb)
                score *= 1 + 0.5 * tightness
                if areaPlanets.contains(pair.first) || areaPlanets.contains(pair.second) { score *= 1.1 }
                // The general reading leans on the strongest aspects, whatever their tags.
                if area == .general, tightness > 0.75 { score *= 1.1 }
            case .angle(let angle, _):
                if area == .career, angle == .midheaven { score *= 1.3 }
                if area == .general, angle == .ascendant { score *= 1.5 }
                if area == .health, angle == .ascendant { score *= 1.2 }
            }
            let speaksToArea = rule.areas.contains(area)
            let strongAspectForGeneral: Bool
            if area == .general, case .aspect(_, _, let orb) = factor, orb <= 2 {
                strongAspectForGeneral = true
            } else {
                strongAspectForGeneral = false
            }
            guard speaksToArea || strongAspectForGeneral else { continue }
            candidates.append(SelectedRule(factor: factor, rule: rule, score: score))
        }
        candidates.sort { lhs, rhs in
            lhs.score != rhs.score ? lhs.score > rhs.score : lhs.factor.key < rhs.factor.key
        }
        return Array(candidates.prefix(count))
    }

    static func rule(for factor: ChartFactor, in base: KnowledgeBase) -> KnowledgeRule? {
        switch factor {
        case .planetInSign(let planet, let sign, _): base.rule(planet, in: sign)
        case .planetInHouse(let planet, let house): base.rule(planet, inHouse: house)
        case .aspect(let pair, let type, _): base.aspects[pair]?[type]
        case .angle(let angle, let sign): base.rule(angle, in: sign)
        }
    }
}
