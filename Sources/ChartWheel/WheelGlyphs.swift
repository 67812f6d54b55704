import AstroDomain

/// The astrological glyphs as Unicode text.
///
/// Why text and not drawn paths: the symbols are in the fonts every platform ships (DejaVu Sans
/// on Linux, Segoe UI Symbol on Windows, Apple Symbols on macOS and iOS), stay selectable and
/// searchable, and cost a few bytes each. What goes wrong with them is emoji presentation:
/// the zodiac signs ♈…♓ (U+2648…2653) have an emoji form that some systems draw as coloured
/// tiles. Every glyph here is followed by VARIATION SELECTOR-15 (U+FE0E), which asks for the
/// text form, and the SVG names a font-family stack of symbol fonts before the generic one, so
/// a system without the first font falls back to another that has the symbols rather than to
/// an emoji font or tofu.
public enum WheelGlyphs {
    static let textPresentation = "\u{FE0E}"

    /// The font-family stack of every glyph and label.
    public static let fontFamily =
        "'DejaVu Sans', 'Noto Sans Symbols', 'Noto Sans Symbols 2', 'Segoe UI Symbol', 'Apple Symbols', 'Arial Unicode MS', sans-serif"

    public static func planet(_ name: PlanetName) -> String {
        let base: String =
            switch name {
            case .sun: "\u{2609}"
            case .moon: "\u{263D}"
            case .mercury: "\u{263F}"
            case .venus: "\u{2640}"
            case .mars: "\u{2642}"
            case .jupiter: "\u{2643}"
            case .saturn: "\u{2644}"
            case .uranus: "\u{2645}"
            case .neptune: "\u{2646}"
            case .pluto: "\u{2647}"
            }
        return base + textPresentation
    }

    public static func point(_ point: ChartPoint) -> String {
        let base: String =
            switch point {
            case .meanNode, .trueNode: "\u{260A}"
            case .chiron: "\u{26B7}"
            case .meanLilith: "\u{26B8}"
            }
        return base + textPresentation
    }

    /// The name people read for a point (`"True Node"`).
    public static func pointName(_ point: ChartPoint) -> String {
        switch point {
        case .meanNode: "Mean Node"
        case .trueNode: "True Node"
        case .chiron: "Chiron"
        case .meanLilith: "Lilith"
        }
    }

    public static func sign(_ sign: ZodiacSign) -> String {
        let index = ZodiacSign.allCases.firstIndex(of: sign)!
        return String(UnicodeScalar(0x2648 + UInt32(index))!) + textPresentation
    }
}

/// Fixed number formatting, independent of locale, so the same input gives the same bytes.
enum WheelNumber {
    /// Two decimals at most, trailing zeros dropped: `12.5`, `-3`, `0.07`.
    static func text(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        let sign = hundredths < 0 ? "-" : ""
        let magnitude = abs(hundredths)
        let whole = magnitude / 100
        let fraction = magnitude % 100
        if fraction == 0 { return "\(sign)\(whole)" }
        if fraction % 10 == 0 { return "\(sign)\(whole).\(fraction / 10)" }
        return "\(sign)\(whole).\(fraction < 10 ? "0" : "")\(fraction)"
    }

    /// Degrees and whole minutes within the sign, minutes rounded down so a body never shows in
    /// the next degree: `21°46′`.
    static func degreesInSign(_ longitude: Double) -> String {
        let minutes = Int((ChartMath.normalizedDegrees(longitude) * 60).rounded(.down)) % (30 * 60)
        let m = minutes % 60
        return "\(minutes / 60)°\(m < 10 ? "0" : "")\(m)′"
    }

    /// An orb as degrees and minutes: `2°07′`.
    static func orb(_ value: Double) -> String {
        let minutes = Int((min(max(value, 0), 360) * 60).rounded())
        let m = minutes % 60
        return "\(minutes / 60)°\(m < 10 ? "0" : "")\(m)′"
    }
}
