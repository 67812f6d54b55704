import AstroDomain
import Foundation

/// The compatibility score of two charts from their synastry; the method is CONTRACT.md's
/// "Compatibility score" (modern Western synastry: inter-aspects weighted by the two points and
/// the aspect's nature and tightness, plus house-overlay contributions of the personal points).
public enum CompatibilityScoring {
    /// The method's name, in every score.
    public static let method = "synastry-weighted/1"

    /// How much each point weighs: the lights, Venus and Mars carry relationships; the outer
    /// planets move slowly and are shared by a whole generation.
    public static func weight(_ point: RelationshipPoint) -> Double {
        switch point {
        case .planet(.sun), .planet(.moon), .planet(.venus): 3
        case .planet(.mars): 2.5
        case .planet(.mercury), .ascendant: 2
        case .planet(.jupiter), .planet(.saturn): 1.5
        case .midheaven: 1
        case .planet(.uranus), .planet(.neptune), .planet(.pluto): 0.5
        }
    }

    /// The nature of an aspect between two points: +1 harmonious … −1 challenging.
    public static func nature(_ type: AspectType, _ first: RelationshipPoint, _ second: RelationshipPoint) -> Double {
        switch type {
        case .trine: return 1
        case .sextile: return 0.75
        case .square: return -1
        case .opposition: return -0.5
        case .conjunction:
            // A conjunction blends the two points: heavy with Saturn or Pluto, easy otherwise.
            let heavy: Set<RelationshipPoint> = [.planet(.saturn), .planet(.pluto)]
            return heavy.contains(first) || heavy.contains(second) ? -0.5 : 0.75
        }
    }

    /// What a personal point (Sun, Moon, Venus, Mars) brings to a house of the other chart.
    public static func overlayValue(house: Int) -> Double {
        switch house {
        case 1, 5, 7: 1
        case 4, 11: 0.5
        case 8, 12: -0.5
        default: 0
        }
    }

    /// The points whose house overlays count.
    public static let overlayPoints: Set<RelationshipPoint> = [
        .planet(.sun), .planet(.moon), .planet(.venus), .planet(.mars),
    ]

    /// Damps the balance when there are few contributions, so one aspect cannot make 0 or 100.
    public static let damping = 10.0

    /// The score of a synastry: each aspect contributes
    /// `sqrt(weight(a) · weight(b)) · nature · (0.5 + 0.5 · (1 − orb / maxOrb))`; each overlay of
    /// Sun, Moon, Venus or Mars contributes `0.5 · weight · overlayValue(house)`. With H the sum of
    /// the positive contributions and C the magnitude of the negative ones,
    /// `score = round(50 + 50 · (H − C) / (H + C + damping))`, in 0…100.
    public static func score(_ synastry: Synastry) -> CompatibilityScore {
        var parts: [CompatibilityScore.Part] = []
        for aspect in synastry.aspects {
            let pairWeight = (weight(aspect.a.point) * weight(aspect.b.point)).squareRoot()
            let tightness = aspect.maxOrb > 0 ? max(0, 1 - aspect.orb / aspect.maxOrb) : 1
            let value = pairWeight * nature(aspect.type, aspect.a.point, aspect.b.point) * (0.5 + 0.5 * tightness)
            guard value != 0 else { continue }
            let feel = value > 0 ? "harmonious" : "challenging"
            parts.append(
                CompatibilityScore.Part(
                    kind: .aspect,
                    point: aspect.a,
                    otherPoint: aspect.b,
                    aspect: aspect.type,
                    house: nil,
                    points: value,
                    explanation: "A's \(aspect.a.point) \(aspect.type.rawValue.lowercased()) B's \(aspect.b.point) "
                        + "(orb \(format(aspect.orb))°): \(feel), \(signed(value))"
                )
            )
        }
        for overlay in synastry.overlaysAInB + synastry.overlaysBInA
        where overlayPoints.contains(overlay.point.point) {
            let value = 0.5 * weight(overlay.point.point) * overlayValue(house: overlay.house)
            guard value != 0 else { continue }
            parts.append(
                CompatibilityScore.Part(
                    kind: .overlay,
                    point: overlay.point,
                    otherPoint: nil,
                    aspect: nil,
                    house: overlay.house,
                    points: value,
                    explanation: "\(overlay.point.chart.rawValue)'s \(overlay.point.point) in "
                        + "\(overlay.houseChart.rawValue)'s house \(overlay.house): \(signed(value))"
                )
            )
        }
        let harmony = parts.reduce(0) { $0 + max(0, $1.points) }
        let challenge = parts.reduce(0) { $0 + max(0, -$1.points) }
        let balance = (harmony - challenge) / (harmony + challenge + damping)
        let score = Int(max(0, min(100, (50 + 50 * balance).rounded())))
        // Strongest first; the rest of the key makes the order total, so the output is deterministic.
        parts.sort { left, right in
            if abs(left.points) != abs(right.points) { return abs(left.points) > abs(right.points) }
            if left.kind != right.kind { return left.kind == .aspect }
            if left.point.chart != right.point.chart { return left.point.chart == .a }
            if left.point.point != right.point.point { return left.point.point < right.point.point }
            return (left.otherPoint?.point.index ?? -1) < (right.otherPoint?.point.index ?? -1)
        }
        return CompatibilityScore(method: method, score: score, harmony: harmony, challenge: challenge, parts: parts)
    }

    /// Two decimals without `String(format:)`, which costs microseconds a call on Linux and
    /// dominated the score's time (about 80 explanations a pair).
    private static func format(_ value: Double) -> String {
        let hundredths = Int((abs(value) * 100).rounded())
        let fraction = hundredths % 100
        return (value < 0 && hundredths > 0 ? "-" : "") + "\(hundredths / 100)." + (fraction < 10 ? "0" : "")
            + "\(fraction)"
    }
    private static func signed(_ value: Double) -> String { (value >= 0 ? "+" : "") + format(value) }
}
