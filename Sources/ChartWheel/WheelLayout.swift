import AstroDomain
import Foundation

/// An axis-aligned box in SVG user units (y grows downwards).
public struct WheelBox: Sendable, Hashable {
    public var minX: Double
    public var minY: Double
    public var maxX: Double
    public var maxY: Double

    init(centerX: Double, centerY: Double, width: Double, height: Double) {
        minX = centerX - width / 2
        maxX = centerX + width / 2
        minY = centerY - height / 2
        maxY = centerY + height / 2
    }

    /// Whether the two boxes share any area (touching edges do not count).
    public func overlaps(_ other: WheelBox) -> Bool {
        minX < other.maxX && other.minX < maxX && minY < other.maxY && other.minY < maxY
    }
}

/// Where one body of a ring is drawn.
public struct WheelPlacedBody: Sendable, Hashable {
    public enum Ring: String, Sendable, Hashable {
        case inner
        case outer
    }

    public var ring: Ring
    public var body: WheelBody
    /// Longitude reduced to [0, 360).
    public var longitude: Double
    /// The longitude its glyph and label are drawn at, moved off `longitude` when neighbours crowd it.
    public var displayLongitude: Double
    public var glyphBox: WheelBox
    public var labelBox: WheelBox
    /// The degrees text (`21°46′`, with ℞ when retrograde).
    public var labelText: String
}

/// The measured fixed geometry of a wheel: a single wheel is 800 wide, a bi-wheel 960, both with
/// a 56-unit heading band above the wheel.
struct WheelGeometry: Sendable {
    let width: Double
    let height: Double
    let headerHeight: Double = 56
    let centerX: Double
    let centerY: Double
    let zodiacOuter: Double = 370
    let zodiacInner: Double = 320
    let signGlyphRadius: Double = 345
    let innerGlyphRadius: Double = 290
    /// The radius a label's centre can come nearest the centre (inner ring) or farthest out
    /// (outer ring): labels sit beside or under their glyph.
    let innerLabelRadius: Double = 258
    let houseNumberRadius: Double = 186
    let aspectRadius: Double = 170
    /// The band of a bi-wheel's outer ring, outside the zodiac.
    let outerBandOuter: Double = 452
    let outerGlyphRadius: Double = 392
    let outerLabelRadius: Double = 428
    let axisLabelRadius: Double
    /// The longitude drawn at the left (9 o'clock): the inner ring's ascendant, or 0° Aries.
    let leftLongitude: Double

    static let glyphFontSize: Double = 17
    static let labelFontSize: Double = 10
    static let glyphBoxSize: Double = 19

    init(biWheel: Bool, leftLongitude: Double) {
        width = biWheel ? 960 : 800
        height = width + 56
        centerX = width / 2
        centerY = 56 + width / 2
        axisLabelRadius = biWheel ? 464 : 384
        self.leftLongitude = leftLongitude
    }

    /// The screen angle of a longitude in radians, 0 at the left, growing counter-clockwise
    /// (the order of the signs and the houses).
    func angle(_ longitude: Double) -> Double {
        ChartMath.normalizedDegrees(longitude - leftLongitude) * .pi / 180
    }

    func point(_ longitude: Double, _ radius: Double) -> (x: Double, y: Double) {
        let a = angle(longitude)
        return (centerX - radius * cos(a), centerY + radius * sin(a))
    }
}

/// Text widths without a font engine: generous per-character estimates for DejaVu Sans (the
/// widest of the fonts in the stack), so a real font draws within the estimated box.
enum WheelTextMetrics {
    static func width(_ text: String, fontSize: Double) -> Double {
        var ems = 0.0
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0xFE0E, 0xFE0F: continue
            case 0x30...0x39: ems += 0.64
            case 0xB0: ems += 0.5
            case 0x2032: ems += 0.3
            case 0x211E: ems += 0.85
            case 0x20: ems += 0.33
            case 0x6D, 0x77, 0x4D, 0x57: ems += 1.0  // m w M W
            case 0x41...0x5A: ems += 0.78
            case 0x61...0x7A: ems += 0.64
            case 0x21...0x7E: ems += 0.86
            case 0x80...0x24F, 0x370...0x52F: ems += 0.72
            default: ems += 1.05
            }
        }
        return ems * fontSize
    }
}

enum WheelLayoutEngine {
    /// Places the bodies of one ring: each keeps its longitude when it has room, and a crowd
    /// (a stellium) is spread symmetrically around the mean of its true positions, just far
    /// enough apart that no two glyph or label boxes overlap; the drawing then joins each
    /// glyph to its true position with a leader line. The spacing a pair needs depends on
    /// where on the wheel it sits, since the boxes are upright rectangles: beside the
    /// horizon neighbours are stacked vertically and need only a text height, near the
    /// meridian they sit side by side and need a text width.
    static func place(
        _ bodies: [WheelBody],
        ring: WheelPlacedBody.Ring,
        geometry: WheelGeometry
    ) -> [WheelPlacedBody] {
        guard !bodies.isEmpty else { return [] }
        let labels = bodies.map { WheelNumber.degreesInSign($0.longitude) + ($0.isRetrograde ? "℞" : "") }
        let labelWidth = labels.map { WheelTextMetrics.width($0, fontSize: WheelGeometry.labelFontSize) }.max()! + 2
        let labelHeight = WheelGeometry.labelFontSize + 3
        let glyphRadius = ring == .inner ? geometry.innerGlyphRadius : geometry.outerGlyphRadius
        let labelRadius = ring == .inner ? geometry.innerLabelRadius : geometry.outerLabelRadius
        let longitudes = bodies.map { ChartMath.normalizedDegrees($0.longitude) }
        var factor = 1.0
        var best: [WheelPlacedBody] = []
        // A denser wheel than the spacing rule foresaw (boxes of one body against the other
        // row of its neighbour) is caught by the overlap check and spread a little more.
        for _ in 0..<12 {
            let separation = { (longitude: Double) -> Double in
                let a = geometry.angle(longitude)
                let glyph = requiredArc(
                    width: WheelGeometry.glyphBoxSize,
                    height: WheelGeometry.glyphBoxSize,
                    radius: glyphRadius,
                    angle: a
                )
                // Labels nearer the centre need the wider arc: take the nearest radius a label can get.
                let nearest =
                    ring == .inner ? labelRadius : glyphRadius + (WheelGeometry.glyphBoxSize + labelHeight) / 2 + 3
                let label = requiredArc(width: labelWidth, height: labelHeight, radius: nearest, angle: a)
                return max(glyph, label) * factor
            }
            let shown = spread(longitudes, separation: separation)
            var placed: [WheelPlacedBody] = []
            for (index, body) in bodies.enumerated() {
                let g = geometry.point(shown[index], glyphRadius)
                let l = labelCenter(
                    glyph: g,
                    angle: geometry.angle(shown[index]),
                    inward: ring == .inner,
                    labelWidth: labelWidth,
                    labelHeight: labelHeight
                )
                placed.append(
                    WheelPlacedBody(
                        ring: ring,
                        body: body,
                        longitude: longitudes[index],
                        displayLongitude: shown[index],
                        glyphBox: WheelBox(
                            centerX: g.x,
                            centerY: g.y,
                            width: WheelGeometry.glyphBoxSize,
                            height: WheelGeometry.glyphBoxSize
                        ),
                        labelBox: WheelBox(centerX: l.x, centerY: l.y, width: labelWidth, height: labelHeight),
                        labelText: labels[index]
                    )
                )
            }
            best = placed
            if !anyOverlap(placed) { break }
            factor *= 1.15
        }
        return best
    }

    /// Where a body's label goes: beside its glyph (towards the centre for the inner ring,
    /// away from it for the outer) on the left and right of the wheel, above or below it near the
    /// top and bottom, so the label reads as the glyph's and both stay on the same row or column.
    static func labelCenter(
        glyph: (x: Double, y: Double),
        angle: Double,
        inward: Bool,
        labelWidth: Double,
        labelHeight: Double
    ) -> (x: Double, y: Double) {
        // Outwards from the centre at this angle is (−cos a, sin a).
        let outX = -cos(angle)
        let outY = sin(angle)
        let direction = inward ? -1.0 : 1.0
        if abs(outX) >= 0.5 {
            let offset = (WheelGeometry.glyphBoxSize + labelWidth) / 2 + 2
            return (glyph.x + direction * (outX > 0 ? 1 : -1) * offset, glyph.y)
        }
        let offset = (WheelGeometry.glyphBoxSize + labelHeight) / 2 + 1
        return (glyph.x, glyph.y + direction * (outY > 0 ? 1 : -1) * offset)
    }

    /// Whether any two boxes of the placed bodies (glyphs and labels) overlap.
    static func anyOverlap(_ placed: [WheelPlacedBody]) -> Bool {
        let boxes = placed.flatMap { [$0.glyphBox, $0.labelBox] }
        for i in boxes.indices {
            for j in boxes.indices where j > i && boxes[i].overlaps(boxes[j]) { return true }
        }
        return false
    }

    /// The arc in degrees that keeps two upright boxes of this size at this radius apart when
    /// they sit side by side along the circle at screen angle `angle`.
    static func requiredArc(width: Double, height: Double, radius: Double, angle: Double) -> Double {
        let s = abs(sin(angle))
        let c = abs(cos(angle))
        // Neighbours are displaced along the tangent (sin a, cos a): clear when the horizontal
        // part passes the width or the vertical part passes the height.
        let chord = min(s > 1e-9 ? width / s : .infinity, c > 1e-9 ? height / c : .infinity) + 2
        let ratio = min(chord / (2 * radius), 1)
        return 2 * asin(ratio) * 180 / .pi
    }

    /// Spreads longitudes (each in [0, 360)) so that neighbours are at least
    /// `separation(at:)` apart, moving each crowd as a block centred on the mean of its members'
    /// true positions. Returns the shown longitudes, in the input order.
    static func spread(_ longitudes: [Double], separation: (Double) -> Double) -> [Double] {
        let n = longitudes.count
        guard n > 1 else { return longitudes }
        let order = longitudes.indices.sorted { (longitudes[$0], $0) < (longitudes[$1], $1) }
        // Unroll the circle at its widest gap, where no crowd can be.
        var widest = 0
        var widestGap = -1.0
        for k in 0..<n {
            let gap = ChartMath.normalizedDegrees(longitudes[order[(k + 1) % n]] - longitudes[order[k]])
            let wrapped = gap == 0 && k == n - 1 ? 360 : gap
            if wrapped > widestGap {
                widestGap = wrapped
                widest = k
            }
        }
        let start = longitudes[order[(widest + 1) % n]]
        var items: [(index: Int, position: Double)] = (0..<n).map { k in
            let index = order[(widest + 1 + k) % n]
            return (index, start + ChartMath.normalizedDegrees(longitudes[index] - start))
        }
        items.sort { ($0.position, $0.index) < ($1.position, $1.index) }
        // Crowds: runs of consecutive items shown at one common spacing around their mean.
        struct Crowd {
            var members: [Int]  // positions in `items`
            var mean: Double
            var step: Double
        }
        func span(_ crowd: Crowd) -> (Double, Double) {
            let half = Double(crowd.members.count - 1) * crowd.step / 2
            return (crowd.mean - half, crowd.mean + half)
        }
        var crowds = items.indices.map { Crowd(members: [$0], mean: items[$0].position, step: 0) }
        var merged = true
        while merged && crowds.count > 1 {
            merged = false
            var k = 0
            while k + 1 < crowds.count {
                let left = crowds[k]
                let right = crowds[k + 1]
                let needed = separation((span(left).1 + span(right).0) / 2)
                if span(right).0 - span(left).1 < needed {
                    let members = left.members + right.members
                    let mean = members.map { items[$0].position }.reduce(0, +) / Double(members.count)
                    let step = min(separation(mean), 360 / Double(n))
                    crowds[k] = Crowd(members: members, mean: mean, step: max(step, needed))
                    crowds.remove(at: k + 1)
                    merged = true
                } else {
                    k += 1
                }
            }
            // The last crowd may grow round into the first across 0°.
            if crowds.count > 1 {
                let first = crowds[0]
                let last = crowds[crowds.count - 1]
                if span(first).0 + 360 - span(last).1 < separation(span(last).1) {
                    let members = last.members + first.members
                    let positions =
                        last.members.map { items[$0].position } + first.members.map { items[$0].position + 360 }
                    for (offset, member) in first.members.enumerated() {
                        items[member].position = positions[last.members.count + offset]
                    }
                    let mean = positions.reduce(0, +) / Double(members.count)
                    let step = min(separation(mean), 360 / Double(n))
                    crowds.removeFirst()
                    crowds[crowds.count - 1] = Crowd(members: members, mean: mean, step: step)
                    merged = true
                }
            }
        }
        var shown = [Double](repeating: 0, count: n)
        for crowd in crowds {
            let (low, _) = span(crowd)
            for (offset, member) in crowd.members.enumerated() {
                shown[items[member].index] = ChartMath.normalizedDegrees(low + Double(offset) * crowd.step)
            }
        }
        return shown
    }
}
