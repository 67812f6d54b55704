import AstroDomain
import Foundation

/// Where everything of a wheel is drawn, computed before any SVG is written (tests check it).
public struct WheelLayout: Sendable {
    /// The SVG's viewBox width and height.
    public var width: Double
    public var height: Double
    public var bodies: [WheelPlacedBody]
    /// Every text box of the drawing: headings, legend, sign glyphs, house numbers, axis labels,
    /// body glyphs and labels.
    public var textBoxes: [WheelBox]
}

/// Draws a chart wheel (or a bi-wheel) as SVG.
///
/// The same input gives the same bytes: numbers are written with a fixed formatter, elements in
/// a fixed order, and nothing depends on the clock, the locale or hashing. Every piece of text
/// is XML-escaped and cut to a bounded length, and the whole document stays under
/// `maxBytes` for any accepted input.
public enum ChartWheel {
    /// An upper bound of the SVG's size for any input `validate` accepts.
    public static let maxBytes = 400_000

    /// The SVG text of the wheel.
    /// - Throws: `WheelError` when the input is outside its bounds (see `validate`).
    public static func svg(_ input: WheelInput) throws(WheelError) -> String {
        let layout = try layout(input)
        var writer = SVGWriter(input: input, layout: layout)
        return writer.document()
    }

    /// Where every body, label and piece of text goes.
    /// - Throws: `WheelError` when the input is outside its bounds (see `validate`).
    public static func layout(_ input: WheelInput) throws(WheelError) -> WheelLayout {
        try validate(input)
        return computeLayout(input)
    }

    /// Checks the bounds: at most `WheelInput.maxBodiesPerRing` bodies per ring with unique keys,
    /// finite numbers, 0 or 12 cusps, at most `WheelInput.maxAspects` aspects, and aspects that
    /// name bodies of their rings.
    /// - Throws: `WheelError` with the code of the first rule broken.
    public static func validate(_ input: WheelInput) throws(WheelError) {
        for ring in [input.inner] + (input.outer.map { [$0] } ?? []) {
            guard ring.bodies.count <= WheelInput.maxBodiesPerRing else {
                throw WheelError(
                    code: .wheelTooManyBodies,
                    message: "a ring holds at most \(WheelInput.maxBodiesPerRing) bodies, got \(ring.bodies.count)"
                )
            }
            guard Set(ring.bodies.map(\.key)).count == ring.bodies.count else {
                throw WheelError(code: .wheelDuplicateKey, message: "body keys must be unique within a ring")
            }
            let numbers = ring.bodies.map(\.longitude) + ring.cusps + [ring.ascendant ?? 0, ring.midheaven ?? 0]
            guard numbers.allSatisfy(\.isFinite) else {
                throw WheelError(code: .wheelBadNumber, message: "longitudes, cusps and angles must be finite")
            }
            guard ring.cusps.isEmpty || ring.cusps.count == 12 else {
                throw WheelError(code: .wheelBadCusps, message: "a ring has 12 house cusps or none")
            }
        }
        guard input.aspects.count + input.crossAspects.count <= WheelInput.maxAspects else {
            throw WheelError(
                code: .wheelTooManyAspects,
                message: "a wheel draws at most \(WheelInput.maxAspects) aspects"
            )
        }
        let innerKeys = Set(input.inner.bodies.map(\.key))
        let outerKeys = Set(input.outer?.bodies.map(\.key) ?? [])
        for aspect in input.aspects where !innerKeys.contains(aspect.first) || !innerKeys.contains(aspect.second) {
            throw WheelError(code: .wheelUnknownBody, message: "an aspect names a body not in the inner ring")
        }
        for aspect in input.crossAspects where !innerKeys.contains(aspect.first) || !outerKeys.contains(aspect.second) {
            throw WheelError(
                code: .wheelUnknownBody,
                message: "a cross aspect names a body not in the inner (first) or outer (second) ring"
            )
        }
        guard (input.aspects + input.crossAspects).allSatisfy({ $0.orb.isFinite }) else {
            throw WheelError(code: .wheelBadNumber, message: "orbs must be finite")
        }
    }

    static func geometry(_ input: WheelInput) -> WheelGeometry {
        WheelGeometry(biWheel: input.outer != nil, leftLongitude: input.inner.ascendant ?? 0)
    }

    static func computeLayout(_ input: WheelInput) -> WheelLayout {
        let geometry = geometry(input)
        var bodies = WheelLayoutEngine.place(input.inner.bodies, ring: .inner, geometry: geometry)
        if let outer = input.outer {
            bodies += WheelLayoutEngine.place(outer.bodies, ring: .outer, geometry: geometry)
        }
        var boxes: [WheelBox] = []
        for text in SVGWriter.fixedTexts(input: input, geometry: geometry) {
            boxes.append(text.box)
        }
        for body in bodies {
            boxes.append(body.glyphBox)
            boxes.append(body.labelBox)
        }
        return WheelLayout(width: geometry.width, height: geometry.height, bodies: bodies, textBoxes: boxes)
    }
}

/// Text with the box it is drawn in (centre anchored unless `anchorStart`).
struct PlacedText {
    var text: String
    var x: Double
    var y: Double
    var fontSize: Double
    var anchorStart: Bool
    var box: WheelBox
    var role: String
}

struct SVGWriter {
    let input: WheelInput
    let layout: WheelLayout
    let geometry: WheelGeometry
    let colors: WheelColors
    var out = ""

    init(input: WheelInput, layout: WheelLayout) {
        self.input = input
        self.layout = layout
        geometry = ChartWheel.geometry(input)
        colors = WheelColors(input.theme)
        out.reserveCapacity(48_000)
    }

    static let titleFontSize: Double = 16
    static let subtitleFontSize: Double = 12

    /// The heading, legend, sign glyphs, house numbers and axis labels, whose places do not
    /// depend on the bodies.
    static func fixedTexts(input: WheelInput, geometry: WheelGeometry) -> [PlacedText] {
        var texts: [PlacedText] = []
        let headingWidth = geometry.width / 2 - 24
        let title = SVGText.fit(input.title, maxScalars: 100, width: headingWidth, fontSize: titleFontSize)
        let subtitle = SVGText.fit(input.subtitle, maxScalars: 160, width: headingWidth, fontSize: subtitleFontSize)
        texts.append(start(title, x: 12, baseline: 22, fontSize: titleFontSize, role: "title"))
        texts.append(start(subtitle, x: 12, baseline: 44, fontSize: subtitleFontSize, role: "subtitle"))
        for (index, item) in legendItems.enumerated() {
            let x = geometry.width / 2 + 8 + Double(index % 2) * (geometry.width / 4)
            let baseline = 20 + Double(index / 2) * 20
            texts.append(start(item.name, x: x + 30, baseline: baseline, fontSize: 11, role: "legend"))
        }
        for sign in ZodiacSign.allCases {
            let p = geometry.point(sign.startLongitude + 15, geometry.signGlyphRadius)
            texts.append(centered(WheelGlyphs.sign(sign), x: p.x, y: p.y, fontSize: 20, size: 22, role: "sign"))
        }
        if input.inner.cusps.count == 12 {
            let cusps = input.inner.cusps.map(ChartMath.normalizedDegrees)
            let middles = (0..<12).map { index -> Double in
                let width = ChartMath.normalizedDegrees(cusps[(index + 1) % 12] - cusps[index])
                return ChartMath.normalizedDegrees(cusps[index] + width / 2)
            }
            let shown = WheelLayoutEngine.spread(middles) { longitude in
                WheelLayoutEngine.requiredArc(
                    width: 16,
                    height: 14,
                    radius: geometry.houseNumberRadius,
                    angle: geometry.angle(longitude)
                )
            }
            for index in 0..<12 {
                let p = geometry.point(shown[index], geometry.houseNumberRadius)
                texts.append(centered("\(index + 1)", x: p.x, y: p.y, fontSize: 11, size: 14, role: "house"))
            }
        }
        if let ascendant = input.inner.ascendant {
            for (name, longitude) in [("AC", ascendant), ("DC", ascendant + 180)] {
                let p = geometry.point(longitude, geometry.axisLabelRadius)
                texts.append(centered(name, x: p.x, y: p.y, fontSize: 12, size: 20, role: "axis"))
            }
        }
        if let midheaven = input.inner.midheaven {
            for (name, longitude) in [("MC", midheaven), ("IC", midheaven + 180)] {
                let p = geometry.point(longitude, geometry.axisLabelRadius)
                texts.append(centered(name, x: p.x, y: p.y, fontSize: 12, size: 20, role: "axis"))
            }
        }
        return texts
    }

    static func start(_ text: String, x: Double, baseline: Double, fontSize: Double, role: String) -> PlacedText {
        let width = WheelTextMetrics.width(text, fontSize: fontSize)
        return PlacedText(
            text: text,
            x: x,
            y: baseline,
            fontSize: fontSize,
            anchorStart: true,
            box: WheelBox(
                centerX: x + width / 2,
                centerY: baseline - fontSize * 0.35,
                width: width,
                height: fontSize * 1.2
            ),
            role: role
        )
    }

    static func centered(
        _ text: String,
        x: Double,
        y: Double,
        fontSize: Double,
        size: Double,
        role: String
    )
        -> PlacedText
    {
        let width = max(WheelTextMetrics.width(text, fontSize: fontSize), size)
        return PlacedText(
            text: text,
            x: x,
            y: y,
            fontSize: fontSize,
            anchorStart: false,
            box: WheelBox(centerX: x, centerY: y, width: width, height: size),
            role: role
        )
    }

    struct LegendItem {
        var type: AspectType
        var name: String
    }

    static let legendItems: [LegendItem] = [
        LegendItem(type: .opposition, name: "opposition"), LegendItem(type: .square, name: "square"),
        LegendItem(type: .trine, name: "trine"), LegendItem(type: .sextile, name: "sextile"),
    ]

    // MARK: writing

    mutating func document() -> String {
        let w = n(geometry.width)
        let h = n(geometry.height)
        out += "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(w) \(h)\" width=\"\(w)\" height=\"\(h)\""
        out += " role=\"img\" aria-labelledby=\"wheel-title wheel-desc\""
        out += " font-family=\"\(SVGText.escape(WheelGlyphs.fontFamily))\">\n"
        out += "<title id=\"wheel-title\">\(SVGText.escape(SVGText.bounded(input.title, maxScalars: 100)))</title>\n"
        out += "<desc id=\"wheel-desc\">\(SVGText.escape(description()))</desc>\n"
        out += "<rect width=\"\(w)\" height=\"\(h)\" fill=\"\(colors.background)\"/>\n"
        let fixed = Self.fixedTexts(input: input, geometry: geometry)
        writeHeading(fixed)
        writeZodiac(fixed)
        writeHouses(fixed)
        writeAspects()
        writeBodies()
        out += "</svg>\n"
        return out
    }

    mutating func writeHeading(_ fixed: [PlacedText]) {
        out += "<g id=\"heading\" aria-hidden=\"true\">\n"
        for text in fixed where text.role == "title" || text.role == "subtitle" {
            let weight = text.role == "title" ? " font-weight=\"bold\"" : ""
            out += textElement(text, fill: colors.ink, extra: weight)
        }
        for (index, item) in Self.legendItems.enumerated() {
            let x = geometry.width / 2 + 8 + Double(index % 2) * (geometry.width / 4)
            let y = 20 + Double(index / 2) * 20 - 4
            out += "<line x1=\"\(n(x))\" y1=\"\(n(y))\" x2=\"\(n(x + 24))\" y2=\"\(n(y))\"\(aspectStyle(item.type))/>\n"
        }
        for text in fixed where text.role == "legend" { out += textElement(text, fill: colors.ink, extra: "") }
        out += "</g>\n"
    }

    mutating func writeZodiac(_ fixed: [PlacedText]) {
        let cx = n(geometry.centerX)
        let cy = n(geometry.centerY)
        out += "<g id=\"zodiac\" aria-hidden=\"true\">\n"
        if input.outer != nil {
            out += "<circle cx=\"\(cx)\" cy=\"\(cy)\" r=\"\(n(geometry.outerBandOuter))\" fill=\"\(colors.outerBand)\""
            out += " stroke=\"\(colors.ink)\" stroke-width=\"1\"/>\n"
        }
        out += "<circle cx=\"\(cx)\" cy=\"\(cy)\" r=\"\(n(geometry.zodiacOuter))\" fill=\"\(colors.band)\""
        out += " stroke=\"\(colors.ink)\" stroke-width=\"1.2\"/>\n"
        out += "<circle cx=\"\(cx)\" cy=\"\(cy)\" r=\"\(n(geometry.zodiacInner))\" fill=\"\(colors.background)\""
        out += " stroke=\"\(colors.ink)\" stroke-width=\"1\"/>\n"
        for sign in 0..<12 {
            line(Double(sign) * 30, geometry.zodiacInner, geometry.zodiacOuter, colors.ink, 1)
        }
        for degree in stride(from: 0, to: 360, by: 5) where degree % 30 != 0 {
            let length = degree % 10 == 0 ? 7.0 : 4.0
            line(Double(degree), geometry.zodiacInner, geometry.zodiacInner + length, colors.faint, 0.8)
        }
        for (index, text) in fixed.filter({ $0.role == "sign" }).enumerated() {
            let element = ZodiacSign.allCases[index].element
            out += textElement(text, fill: colors.element(element), extra: "")
        }
        out += "</g>\n"
    }

    mutating func writeHouses(_ fixed: [PlacedText]) {
        out += "<g id=\"houses\" aria-hidden=\"true\">\n"
        out += "<circle cx=\"\(n(geometry.centerX))\" cy=\"\(n(geometry.centerY))\" r=\"\(n(geometry.aspectRadius))\""
        out += " fill=\"none\" stroke=\"\(colors.faint)\" stroke-width=\"1\"/>\n"
        for (index, cusp) in input.inner.cusps.enumerated() {
            // The angular cusps are drawn by the axes below.
            let isAxis = (index == 0 && input.inner.ascendant != nil) || (index == 9 && input.inner.midheaven != nil)
            if !isAxis { line(cusp, geometry.aspectRadius, geometry.zodiacInner, colors.faint, 0.9) }
        }
        for text in fixed where text.role == "house" { out += textElement(text, fill: colors.faint, extra: "") }
        // In a bi-wheel the axes stop at the zodiac and reappear as a stub outside the outer
        // ring, so they do not strike through the outer ring's labels.
        let axes = [input.inner.ascendant, input.inner.midheaven].compactMap { $0 }.flatMap { [$0, $0 + 180] }
        for axis in axes {
            if input.outer != nil {
                line(axis, geometry.aspectRadius, geometry.zodiacOuter, colors.ink, 2)
                line(axis, geometry.outerBandOuter - 6, geometry.outerBandOuter + 6, colors.ink, 2)
            } else {
                line(axis, geometry.aspectRadius, geometry.zodiacOuter + 6, colors.ink, 2)
            }
        }
        for text in fixed where text.role == "axis" {
            out += textElement(text, fill: colors.ink, extra: " font-weight=\"bold\"")
        }
        out += "</g>\n"
    }

    mutating func writeAspects() {
        let inner = Dictionary(uniqueKeysWithValues: input.inner.bodies.map { ($0.key, $0) })
        let outer = Dictionary(uniqueKeysWithValues: (input.outer?.bodies ?? []).map { ($0.key, $0) })
        out += "<g id=\"aspects\">\n"
        for (aspects, cross) in [(input.aspects, false), (input.crossAspects, true)] {
            for aspect in aspects where aspect.type != .conjunction {
                guard let a = inner[aspect.first], let b = (cross ? outer : inner)[aspect.second] else { continue }
                let p = geometry.point(a.longitude, geometry.aspectRadius)
                let q = geometry.point(b.longitude, geometry.aspectRadius)
                out +=
                    "<line x1=\"\(n(p.x))\" y1=\"\(n(p.y))\" x2=\"\(n(q.x))\" y2=\"\(n(q.y))\"\(aspectStyle(aspect.type))"
                out += cross ? " opacity=\"0.8\">" : ">"
                out += "<title>\(SVGText.escape(aspectText(aspect, cross: cross)))</title></line>\n"
            }
        }
        out += "</g>\n"
    }

    mutating func writeBodies() {
        out += "<g id=\"bodies\">\n"
        for placed in layout.bodies {
            let isOuter = placed.ring == .outer
            let ink = isOuter ? colors.outerInk : colors.ink
            let tickFrom = isOuter ? geometry.zodiacOuter : geometry.zodiacInner
            let tickTo = isOuter ? geometry.zodiacOuter + 7 : geometry.zodiacInner - 7
            let glyphEdge = isOuter ? geometry.outerGlyphRadius - 11 : geometry.innerGlyphRadius + 11
            out += "<g><title>\(SVGText.escape(placementText(placed)))</title>"
            line(placed.longitude, tickFrom, tickTo, ink, 1.5, newline: false)
            // The leader joins the true position to the glyph when the glyph was moved.
            let t = geometry.point(placed.longitude, tickTo)
            let g = geometry.point(placed.displayLongitude, glyphEdge)
            out += "<line x1=\"\(n(t.x))\" y1=\"\(n(t.y))\" x2=\"\(n(g.x))\" y2=\"\(n(g.y))\" stroke=\"\(ink)\""
            out += " stroke-width=\"0.7\" opacity=\"0.7\"/>"
            // The position on the aspect circle, where the aspect lines end.
            let dot = geometry.point(placed.longitude, geometry.aspectRadius)
            out += "<circle cx=\"\(n(dot.x))\" cy=\"\(n(dot.y))\" r=\"2\" fill=\"\(ink)\"/>"
            let glyph = SVGText.bounded(placed.body.glyph, maxScalars: 3)
            let gc = (
                x: (placed.glyphBox.minX + placed.glyphBox.maxX) / 2,
                y: (placed.glyphBox.minY + placed.glyphBox.maxY) / 2
            )
            out += "<text x=\"\(n(gc.x))\" y=\"\(n(gc.y))\" font-size=\"\(n(WheelGeometry.glyphFontSize))\""
            out +=
                " text-anchor=\"middle\" dominant-baseline=\"central\" fill=\"\(ink)\">\(SVGText.escape(glyph))</text>"
            let lc = (
                x: (placed.labelBox.minX + placed.labelBox.maxX) / 2,
                y: (placed.labelBox.minY + placed.labelBox.maxY) / 2
            )
            out += "<text x=\"\(n(lc.x))\" y=\"\(n(lc.y))\" font-size=\"\(n(WheelGeometry.labelFontSize))\""
            let retro = placed.body.isRetrograde ? " font-style=\"italic\"" : ""
            out += " text-anchor=\"middle\" dominant-baseline=\"central\" fill=\"\(ink)\"\(retro)>"
            out += "\(SVGText.escape(placed.labelText))</text></g>\n"
        }
        out += "</g>\n"
    }

    // MARK: text for people

    func placementText(_ placed: WheelPlacedBody) -> String {
        let name = SVGText.bounded(placed.body.name, maxScalars: 40)
        var text =
            "\(name) \(WheelNumber.degreesInSign(placed.longitude)) \(ZodiacSign(longitude: placed.longitude).rawValue)"
        if input.inner.cusps.count == 12,
            let house = ChartMath.house(ofLongitude: placed.longitude, cusps: input.inner.cusps)
        {
            text += placed.ring == .outer ? ", in inner house \(house)" : ", house \(house)"
        }
        if placed.body.isRetrograde { text += ", retrograde" }
        return text
    }

    func aspectText(_ aspect: WheelAspect, cross: Bool) -> String {
        let innerName = input.inner.bodies.first { $0.key == aspect.first }.map(\.name) ?? aspect.first
        let other = (cross ? input.outer?.bodies : input.inner.bodies)?.first { $0.key == aspect.second }
        let otherName = other.map(\.name) ?? aspect.second
        let first = SVGText.bounded(innerName, maxScalars: 40)
        let second = SVGText.bounded(otherName, maxScalars: 40)
        let kind = aspect.type.rawValue.lowercased()
        if cross {
            let label = SVGText.bounded(input.outer?.label ?? "", maxScalars: 60)
            return "\(first) \(kind) \(label) \(second), orb \(WheelNumber.orb(aspect.orb))"
        }
        return "\(first) \(kind) \(second), orb \(WheelNumber.orb(aspect.orb))"
    }

    /// The text a screen reader reads: every placement, the angles, every aspect.
    func description() -> String {
        var parts: [String] = []
        parts.append(SVGText.bounded(input.subtitle, maxScalars: 160) + ".")
        let innerLabel = SVGText.bounded(input.inner.label, maxScalars: 60)
        let inner = layout.bodies.filter { $0.ring == .inner }.map(placementText)
        parts.append(
            "\(input.outer == nil ? "Placements" : "Inner ring, \(innerLabel)"): \(inner.joined(separator: "; "))."
        )
        if let ascendant = input.inner.ascendant {
            parts.append(
                "Ascendant \(WheelNumber.degreesInSign(ascendant)) \(ZodiacSign(longitude: ascendant).rawValue)."
            )
        }
        if let midheaven = input.inner.midheaven {
            parts.append(
                "Midheaven \(WheelNumber.degreesInSign(midheaven)) \(ZodiacSign(longitude: midheaven).rawValue)."
            )
        }
        if !input.aspects.isEmpty {
            parts.append("Aspects: \(input.aspects.map { aspectText($0, cross: false) }.joined(separator: "; ")).")
        }
        if let outer = input.outer {
            let label = SVGText.bounded(outer.label, maxScalars: 60)
            let bodies = layout.bodies.filter { $0.ring == .outer }.map(placementText)
            parts.append("Outer ring, \(label): \(bodies.joined(separator: "; ")).")
            if !input.crossAspects.isEmpty {
                parts.append(
                    "Aspects between the rings: \(input.crossAspects.map { aspectText($0, cross: true) }.joined(separator: "; "))."
                )
            }
        }
        return parts.joined(separator: " ")
    }

    // MARK: primitives

    func n(_ value: Double) -> String { WheelNumber.text(value) }

    mutating func line(
        _ longitude: Double,
        _ from: Double,
        _ to: Double,
        _ stroke: String,
        _ width: Double,
        newline: Bool = true
    ) {
        let p = geometry.point(longitude, from)
        let q = geometry.point(longitude, to)
        out += "<line x1=\"\(n(p.x))\" y1=\"\(n(p.y))\" x2=\"\(n(q.x))\" y2=\"\(n(q.y))\" stroke=\"\(stroke)\""
        out += " stroke-width=\"\(n(width))\"/>"
        if newline { out += "\n" }
    }

    func textElement(_ text: PlacedText, fill: String, extra: String) -> String {
        let anchor = text.anchorStart ? "" : " text-anchor=\"middle\" dominant-baseline=\"central\""
        return
            "<text x=\"\(n(text.x))\" y=\"\(n(text.y))\" font-size=\"\(n(text.fontSize))\"\(anchor) fill=\"\(fill)\"\(extra)>"
            + "\(SVGText.escape(text.text))</text>\n"
    }

    /// Colour and dash pattern, so the aspect's kind does not rest on colour alone: oppositions
    /// solid and squares dashed (both the hard colour), trines solid and sextiles dotted (the
    /// soft colours).
    func aspectStyle(_ type: AspectType) -> String {
        switch type {
        case .opposition: " stroke=\"\(colors.hard)\" stroke-width=\"1.6\""
        case .square: " stroke=\"\(colors.hard)\" stroke-width=\"1.4\" stroke-dasharray=\"7 4\""
        case .trine: " stroke=\"\(colors.soft)\" stroke-width=\"1.6\""
        case .sextile: " stroke=\"\(colors.sextile)\" stroke-width=\"1.4\" stroke-dasharray=\"2 3\""
        case .conjunction: " stroke=\"\(colors.ink)\" stroke-width=\"1\""
        }
    }
}

/// The colours of a theme; the hard and soft aspect colours differ in lightness as well as in
/// hue, for readers who do not tell red from blue.
struct WheelColors {
    let background, ink, faint, band, outerBand, outerInk, hard, soft, sextile: String
    let fire, earth, air, water: String

    init(_ theme: WheelTheme) {
        switch theme {
        case .light:
            (background, ink, faint, band, outerBand) = ("#ffffff", "#1f2937", "#6b7280", "#f3f4f6", "#f5f3ff")
            (outerInk, hard, soft, sextile) = ("#6d28d9", "#c62828", "#1565c0", "#2e7d32")
            (fire, earth, air, water) = ("#c62828", "#5d7a1f", "#a16207", "#1565c0")
        case .dark:
            (background, ink, faint, band, outerBand) = ("#111827", "#e5e7eb", "#9ca3af", "#1f2937", "#1e1b2e")
            (outerInk, hard, soft, sextile) = ("#c4b5fd", "#f87171", "#60a5fa", "#4ade80")
            (fire, earth, air, water) = ("#f87171", "#a3e635", "#facc15", "#60a5fa")
        }
    }

    func element(_ element: ZodiacSign.Element) -> String {
        switch element {
        case .fire: fire
        case .earth: earth
        case .air: air
        case .water: water
        }
    }
}

/// Text as it goes into the SVG: bounded, without characters XML forbids, escaped.
enum SVGText {
    /// At most `maxScalars` Unicode scalars, control characters removed (XML 1.0 forbids most).
    static func bounded(_ text: String, maxScalars: Int) -> String {
        var scalars = String.UnicodeScalarView()
        var count = 0
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || (0xFFFE...0xFFFF).contains(scalar.value) {
                continue
            }
            if count == maxScalars {
                scalars.append("…")
                break
            }
            scalars.append(scalar)
            count += 1
        }
        return String(scalars)
    }

    /// `bounded`, then cut further (with …) until its estimated width fits.
    static func fit(_ text: String, maxScalars: Int, width: Double, fontSize: Double) -> String {
        var result = bounded(text, maxScalars: maxScalars)
        while WheelTextMetrics.width(result, fontSize: fontSize) > width, !result.isEmpty {
            var scalars = Array(result.unicodeScalars)
            if scalars.last == "…" { scalars.removeLast() }
            if !scalars.isEmpty { scalars.removeLast() }
            result = String(String.UnicodeScalarView(scalars)) + (scalars.isEmpty ? "" : "…")
        }
        return result
    }

    static func escape(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&apos;"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}
