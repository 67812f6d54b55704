import AstroDomain
import Foundation

extension ReportPrompt {
    /// How many inter-aspects a pair prompt lists at most (tightest first).
    public static let pairAspectLimit = 16

    /// Builds the prompt of a relationships report for two: the pair persona, both charts'
    /// placements each labelled with its owner's name, the inter-aspects (whose point is whose,
    /// and the orb), the compatibility score with its method, and, when `overlays` are given, the
    /// strongest house overlays (whose planet falls in whose house) after the template's text.
    /// Aspects are dropped from the end until the estimate fits the budget.
    public static func buildPair(
        chartA: NatalChart,
        chartB: NatalChart,
        synastry: Synastry,
        score: CompatibilityScore,
        couple: ReportCouple,
        language: ReportLanguage,
        phrases: PairPhrases,
        templates: PromptTemplates,
        overlays: PairOverlays? = nil
    ) -> ReportPrompt {
        let ordered = synastry.aspects.sorted { lhs, rhs in
            let left = lhs.maxOrb > 0 ? lhs.orb / lhs.maxOrb : 0
            let right = rhs.maxOrb > 0 ? rhs.orb / rhs.maxOrb : 0
            if left != right { return left < right }
            return (lhs.a.point.index, lhs.b.point.index) < (rhs.a.point.index, rhs.b.point.index)
        }
        var lines = ordered.prefix(pairAspectLimit).enumerated().map { index, aspect in
            let owned = phrases.fill(
                phrases.parts[aspect.type.rawValue] ?? "{first} {second}",
                [
                    "first": phrases.owned(aspect.a.point, by: couple.name(aspect.a.chart)),
                    "second": phrases.owned(aspect.b.point, by: couple.name(aspect.b.chart)),
                ]
            )
            return "\(index + 1). \(owned), \(PairReportWriter.formatOrb(aspect.orb))"
        }
        let overlayBlock = overlays?.promptBlock(synastry, couple: couple, pairPhrases: phrases) ?? ""
        func user(_ lines: [String]) -> String {
            let text = phrases.fill(
                templates.pairUser,
                [
                    "a": couple.nameA, "b": couple.nameB, "minWords": "400", "maxWords": "500",
                    "chartA": summary(chartA), "chartB": summary(chartB), "score": "\(score.score)",
                    "method": score.method, "aspects": lines.joined(separator: "\n"),
                ]
            )
            return overlayBlock.isEmpty ? text : text + "\n\n" + overlayBlock
        }
        let system = templates.pairSystem
        var text = user(lines)
        while estimateTokens(system) + estimateTokens(text) > tokenBudget, lines.count > 3 {
            lines.removeLast()
            text = user(lines)
        }
        return ReportPrompt(
            system: system,
            user: text,
            version: templates.version,
            estimatedTokens: estimateTokens(system) + estimateTokens(text)
        )
    }
}
