import Foundation

/// Path data (`d`) flattened to device-space polygons.
enum PathData {
    /// The subpaths of `d`, curves and arcs as chords within a tenth of a device pixel.
    /// - Throws: `SVGRasterError` for a command or argument list the path data grammar does not allow.
    static func flatten(_ d: String, transform: Affine) throws(SVGRasterError) -> [Subpath] {
        var scanner = NumberScanner(Array(d.utf8))
        var subpaths: [Subpath] = []
        var current = Subpath(points: [], closed: false)
        var point = Point(0, 0)
        var start = Point(0, 0)
        // The reflected control point of S and T: the previous curve's last control point.
        var lastCubic: Point?
        var lastQuadratic: Point?
        var command: UInt8?
        func finish() {
            if current.points.count > 1 { subpaths.append(current) }
            current = Subpath(points: [], closed: false)
        }
        func line(to target: Point) {
            if current.points.isEmpty { current.points.append(transform.apply(point)) }
            current.points.append(transform.apply(target))
            point = target
        }
        func curve(_ controls: [Point]) {
            if current.points.isEmpty { current.points.append(transform.apply(point)) }
            let device = ([point] + controls).map(transform.apply)
            // Second differences bound how far the chords stray from the curve.
            var bend = 0.0
            for index in 0..<(device.count - 2) {
                let x = device[index].x - 2 * device[index + 1].x + device[index + 2].x
                let y = device[index].y - 2 * device[index + 1].y + device[index + 2].y
                bend = max(bend, (x * x + y * y).squareRoot())
            }
            let steps = min(max(Int((bend * Double(device.count - 1) / 2 / 0.8).squareRoot().rounded(.up)), 1), 128)
            for step in 1...steps {
                let t = Double(step) / Double(steps)
                let u = 1 - t
                if device.count == 3 {
                    let (a, b, c) = (u * u, 2 * u * t, t * t)
                    current.points.append(
                        Point(
                            a * device[0].x + b * device[1].x + c * device[2].x,
                            a * device[0].y + b * device[1].y + c * device[2].y
                        )
                    )
                } else {
                    let (a, b, c, e) = (u * u * u, 3 * u * u * t, 3 * u * t * t, t * t * t)
                    current.points.append(
                        Point(
                            a * device[0].x + b * device[1].x + c * device[2].x + e * device[3].x,
                            a * device[0].y + b * device[1].y + c * device[2].y + e * device[3].y
                        )
                    )
                }
            }
            point = controls.last!
        }
        func arc(rx: Double, ry: Double, rotation: Double, large: Bool, sweep: Bool, to target: Point) {
            // SVG 1.1 appendix F.6.5: from the endpoint to the centre parameterization.
            var rx = abs(rx)
            var ry = abs(ry)
            guard rx > 0, ry > 0, point.x != target.x || point.y != target.y else {
                line(to: target)
                return
            }
            let phi = rotation * Double.pi / 180
            let (cosPhi, sinPhi) = (cos(phi), sin(phi))
            let dx = (point.x - target.x) / 2
            let dy = (point.y - target.y) / 2
            let x1 = cosPhi * dx + sinPhi * dy
            let y1 = -sinPhi * dx + cosPhi * dy
            let lambda = x1 * x1 / (rx * rx) + y1 * y1 / (ry * ry)
            if lambda > 1 {
                rx *= lambda.squareRoot()
                ry *= lambda.squareRoot()
            }
            let numerator = rx * rx * ry * ry - rx * rx * y1 * y1 - ry * ry * x1 * x1
            let denominator = rx * rx * y1 * y1 + ry * ry * x1 * x1
            let coefficient = (large != sweep ? 1.0 : -1.0) * max(0, numerator / denominator).squareRoot()
            let cx1 = coefficient * rx * y1 / ry
            let cy1 = -coefficient * ry * x1 / rx
            let cx = cosPhi * cx1 - sinPhi * cy1 + (point.x + target.x) / 2
            let cy = sinPhi * cx1 + cosPhi * cy1 + (point.y + target.y) / 2
            let theta = atan2((y1 - cy1) / ry, (x1 - cx1) / rx)
            var delta = atan2((-y1 - cy1) / ry, (-x1 - cx1) / rx) - theta
            if sweep, delta < 0 { delta += 2 * Double.pi }
            if !sweep, delta > 0 { delta -= 2 * Double.pi }
            if current.points.isEmpty { current.points.append(transform.apply(point)) }
            let turn = SVGRasterizer.segments(radius: max(rx, ry) * transform.scale)
            let steps = max(Int((Double(turn) * abs(delta) / (2 * Double.pi)).rounded(.up)), 1)
            for step in 1...steps {
                let angle = theta + delta * Double(step) / Double(steps)
                let x = cx + rx * cosPhi * cos(angle) - ry * sinPhi * sin(angle)
                let y = cy + rx * sinPhi * cos(angle) + ry * cosPhi * sin(angle)
                current.points.append(transform.apply(step == steps ? target : Point(x, y)))
            }
            point = target
        }

        while scanner.hasMore {
            if let letter = scanner.command() {
                command = letter
            } else if command == nil {
                throw SVGRasterError("path data \"\(d.prefix(40))\" does not start with a command")
            }
            let letter = command!
            let relative = letter >= 0x61
            let base = relative ? point : Point(0, 0)
            func coordinate() throws(SVGRasterError) -> Double {
                guard let value = scanner.number() else {
                    throw SVGRasterError(
                        "path data \"\(d.prefix(40))\": command \(Character(Unicode.Scalar(letter))) lacks a number"
                    )
                }
                return value
            }
            func pair() throws(SVGRasterError) -> Point {
                let x = try coordinate()
                let y = try coordinate()
                return Point(base.x + x, base.y + y)
            }
            var cubic: Point?
            var quadratic: Point?
            switch letter | 0x20 {
            case UInt8(ascii: "m"):
                finish()
                point = try pair()
                start = point
                // Further pairs after a moveto are linetos.
                command = relative ? UInt8(ascii: "l") : UInt8(ascii: "L")
            case UInt8(ascii: "l"):
                line(to: try pair())
            case UInt8(ascii: "h"):
                let x = try coordinate()
                line(to: Point(relative ? point.x + x : x, point.y))
            case UInt8(ascii: "v"):
                let y = try coordinate()
                line(to: Point(point.x, relative ? point.y + y : y))
            case UInt8(ascii: "c"):
                let first = try pair()
                let second = try pair()
                let end = try pair()
                curve([first, second, end])
                cubic = second
            case UInt8(ascii: "s"):
                let first = lastCubic.map { Point(2 * point.x - $0.x, 2 * point.y - $0.y) } ?? point
                let second = try pair()
                let end = try pair()
                curve([first, second, end])
                cubic = second
            case UInt8(ascii: "q"):
                let control = try pair()
                let end = try pair()
                curve([control, end])
                quadratic = control
            case UInt8(ascii: "t"):
                let control = lastQuadratic.map { Point(2 * point.x - $0.x, 2 * point.y - $0.y) } ?? point
                let end = try pair()
                curve([control, end])
                quadratic = control
            case UInt8(ascii: "a"):
                let rx = try coordinate()
                let ry = try coordinate()
                let rotation = try coordinate()
                guard let large = scanner.flag(), let sweep = scanner.flag() else {
                    throw SVGRasterError("path data \"\(d.prefix(40))\": an arc's flags are not 0 or 1")
                }
                arc(rx: rx, ry: ry, rotation: rotation, large: large, sweep: sweep, to: try pair())
            case UInt8(ascii: "z"):
                current.closed = true
                finish()
                point = start
                command = nil
            default:
                throw SVGRasterError("unsupported path command \(Character(Unicode.Scalar(letter)))")
            }
            lastCubic = cubic
            lastQuadratic = quadratic
        }
        finish()
        return subpaths
    }
}

/// RGB pixels (0…1, on white) that shapes are painted onto.
struct Canvas {
    let width: Int
    let height: Int
    private var pixels: [Float]
    /// One row's coverage: partial pixels in `cover`, whole-pixel runs as differences in `runs`.
    private var cover: [Float]
    private var runs: [Float]

    /// Sub-rows sampled per pixel row.
    static let subRows = 4

    init(width: Int, height: Int) {
        self.width = max(width, 0)
        self.height = max(height, 0)
        pixels = [Float](repeating: 1, count: self.width * self.height * 3)
        cover = [Float](repeating: 0, count: self.width + 2)
        runs = [Float](repeating: 0, count: self.width + 2)
    }

    /// The pixels as bytes.
    func rgb() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: pixels.count)
        pixels.withUnsafeBufferPointer { pixels in
            bytes.withUnsafeMutableBufferPointer { bytes in
                for index in 0..<pixels.count {
                    // Blending keeps every channel within 0…1: adding 0.5 rounds to nearest.
                    bytes[index] = UInt8(pixels[index] * 255 + 0.5)
                }
            }
        }
        return bytes
    }

    /// Fills and then strokes `outline` as `style` says (in a canvas of no pixels: checks only).
    /// - Throws: `SVGRasterError` for a gradient that is not defined.
    mutating func paint(_ outline: [Subpath], style: Style, gradients: [String: Gradient]) throws(SVGRasterError) {
        func source(_ paint: Paint) throws(SVGRasterError) -> Source? {
            switch paint {
            case .none: return nil
            case .colour(let colour): return .colour(colour)
            case .gradient(let id):
                guard let gradient = gradients[id] else { throw SVGRasterError("url(#\(id)) names no gradient") }
                return .gradient(gradient)
            }
        }
        let fill = try source(style.fill)
        let stroke = try source(style.stroke)
        guard width > 0, height > 0 else { return }
        if let fill {
            fillPolygons(
                outline.map(\.points),
                evenOdd: style.evenOdd,
                source: fill,
                alpha: style.opacity * style.fillOpacity
            )
        }
        if let stroke, style.strokeWidth > 0 {
            let polygons = Self.strokePolygons(
                outline,
                width: style.strokeWidth * style.transform.scale,
                roundCaps: style.roundCaps,
                dashes: style.dashes.map { $0 * style.transform.scale }
            )
            fillPolygons(polygons, evenOdd: false, source: stroke, alpha: style.opacity)
        }
    }

    enum Source {
        case colour(Colour)
        case gradient(Gradient)
    }

    // MARK: - Strokes

    /// The stroke's area as polygons all wound the same way (so that their nonzero union is the
    /// stroke): a quad per segment, a disc per join and per round cap.
    static func strokePolygons(_ outline: [Subpath], width: Double, roundCaps: Bool, dashes: [Double]) -> [[Point]] {
        let half = width / 2
        var polygons: [[Point]] = []
        let discSteps = SVGRasterizer.segments(radius: half)
        func disc(_ centre: Point) {
            polygons.append(
                (0..<discSteps).map { step in
                    let angle = Double(step) / Double(discSteps) * 2 * Double.pi
                    return Point(centre.x + half * cos(angle), centre.y + half * sin(angle))
                }
            )
        }
        for subpath in outline {
            var points = subpath.points
            if subpath.closed, let first = points.first { points.append(first) }
            let pieces = dashes.isEmpty ? [points] : dashed(points, dashes)
            for piece in pieces where piece.count > 1 {
                for index in 0..<(piece.count - 1) {
                    let (p, q) = (piece[index], piece[index + 1])
                    let length = ((q.x - p.x) * (q.x - p.x) + (q.y - p.y) * (q.y - p.y)).squareRoot()
                    guard length > 0 else { continue }
                    let nx = -(q.y - p.y) / length * half
                    let ny = (q.x - p.x) / length * half
                    polygons.append([
                        Point(p.x + nx, p.y + ny), Point(q.x + nx, q.y + ny), Point(q.x - nx, q.y - ny),
                        Point(p.x - nx, p.y - ny),
                    ])
                }
                let isClosedLoop = subpath.closed && dashes.isEmpty
                for (index, point) in piece.enumerated() {
                    let isEnd = index == 0 || index == piece.count - 1
                    if !isEnd || roundCaps || isClosedLoop { disc(point) }
                }
            }
        }
        return polygons.map { polygon in
            var area = 0.0
            for index in polygon.indices {
                let (p, q) = (polygon[index], polygon[(index + 1) % polygon.count])
                area += p.x * q.y - q.x * p.y
            }
            return area < 0 ? polygon.reversed() : polygon
        }
    }

    /// The dashes of a polyline: pieces of `dashes[0]`, gaps of `dashes[1]`, and so on.
    static func dashed(_ points: [Point], _ dashes: [Double]) -> [[Point]] {
        var pieces: [[Point]] = []
        var piece: [Point] = [points[0]]
        var dash = 0
        var left = dashes[0]
        var drawing = true
        for index in 1..<points.count {
            var p = points[index - 1]
            let q = points[index]
            var length = ((q.x - p.x) * (q.x - p.x) + (q.y - p.y) * (q.y - p.y)).squareRoot()
            while length > left {
                let t = left / length
                p = Point(p.x + (q.x - p.x) * t, p.y + (q.y - p.y) * t)
                length -= left
                if drawing {
                    piece.append(p)
                    pieces.append(piece)
                }
                piece = [p]
                drawing.toggle()
                dash = (dash + 1) % dashes.count
                left = dashes[dash]
            }
            left -= length
            if drawing { piece.append(q) }
        }
        if drawing, piece.count > 1 { pieces.append(piece) }
        return pieces
    }

    // MARK: - Scanlines

    private struct Edge {
        var x0, y0, x1, y1: Double
        var direction: Int
    }

    /// Fills the polygons (each implicitly closed) by the fill rule, blending `source` at
    /// `alpha` times each pixel's coverage.
    private mutating func fillPolygons(_ polygons: [[Point]], evenOdd: Bool, source: Source, alpha: Float) {
        guard alpha > 0 else { return }
        var edges: [Edge] = []
        var (minX, minY, maxX, maxY) = (Double.infinity, Double.infinity, -Double.infinity, -Double.infinity)
        for polygon in polygons where polygon.count > 2 {
            for index in polygon.indices {
                let p = polygon[index]
                let q = polygon[(index + 1) % polygon.count]
                minX = min(minX, p.x)
                maxX = max(maxX, p.x)
                minY = min(minY, p.y)
                maxY = max(maxY, p.y)
                guard p.y != q.y else { continue }
                edges.append(
                    p.y < q.y
                        ? Edge(x0: p.x, y0: p.y, x1: q.x, y1: q.y, direction: 1)
                        : Edge(x0: q.x, y0: q.y, x1: p.x, y1: p.y, direction: -1)
                )
            }
        }
        guard !edges.isEmpty else { return }
        edges.sort { $0.y0 < $1.y0 }
        let firstRow = max(Int(minY.rounded(.down)), 0)
        let lastRow = min(Int(maxY.rounded(.up)), height)
        guard firstRow < lastRow, minX < Double(width), maxX > 0 else { return }

        // A gradient as 256 colours along its vector, and t's steps per pixel across and down.
        var ramp: [Colour] = []
        var t0 = 0.0
        var tPerX = 0.0
        var tPerY = 0.0
        if case .gradient(let gradient) = source {
            let (w, h) = (maxX - minX, maxY - minY)
            let start = Point(minX + gradient.x1 * w, minY + gradient.y1 * h)
            let vector = Point((gradient.x2 - gradient.x1) * w, (gradient.y2 - gradient.y1) * h)
            let length = vector.x * vector.x + vector.y * vector.y
            if length > 0 {
                tPerX = vector.x / length
                tPerY = vector.y / length
                t0 = -(start.x * vector.x + start.y * vector.y) / length
            }
            ramp = (0...255).map { gradient.colour(at: Double($0) / 255) }
        }
        var solid = Colour(r: 0, g: 0, b: 0)
        if case .colour(let colour) = source { solid = colour }
        let isGradient = !ramp.isEmpty

        let width = self.width
        let weight = 1 / Float(Self.subRows)
        var active: [Int] = []
        var crossings: [(x: Double, direction: Int)] = []
        var nextEdge = 0
        edges.withUnsafeBufferPointer { edges in
            pixels.withUnsafeMutableBufferPointer { pixels in
                cover.withUnsafeMutableBufferPointer { cover in
                    runs.withUnsafeMutableBufferPointer { runs in
                        for row in firstRow..<lastRow {
                            var touchedLow = width
                            var touchedHigh = -1
                            for sub in 0..<Self.subRows {
                                let y = Double(row) + (Double(sub) + 0.5) / Double(Self.subRows)
                                while nextEdge < edges.count, edges[nextEdge].y0 <= y {
                                    active.append(nextEdge)
                                    nextEdge += 1
                                }
                                active.removeAll { edges[$0].y1 <= y }
                                crossings.removeAll(keepingCapacity: true)
                                for index in active where edges[index].y0 <= y {
                                    let edge = edges[index]
                                    let x = edge.x0 + (y - edge.y0) * (edge.x1 - edge.x0) / (edge.y1 - edge.y0)
                                    crossings.append((x, edge.direction))
                                }
                                guard crossings.count > 1 else { continue }
                                crossings.sort { $0.x < $1.x }
                                var winding = 0
                                for index in 0..<(crossings.count - 1) {
                                    winding += evenOdd ? 1 : crossings[index].direction
                                    let inside = evenOdd ? winding % 2 != 0 : winding != 0
                                    guard inside else { continue }
                                    let left = max(crossings[index].x, 0)
                                    let right = min(crossings[index + 1].x, Double(width))
                                    guard right > left else { continue }
                                    let first = Int(left)
                                    let last = Int(right)
                                    touchedLow = min(touchedLow, first)
                                    touchedHigh = max(touchedHigh, min(last, width - 1))
                                    if first == last {
                                        cover[first] += Float(right - left) * weight
                                    } else {
                                        cover[first] += Float(Double(first + 1) - left) * weight
                                        runs[first + 1] += weight
                                        runs[last] -= weight
                                        cover[last] += Float(right - Double(last)) * weight
                                    }
                                }
                            }
                            guard touchedHigh >= touchedLow else { continue }
                            var run: Float = 0
                            let rowT = t0 + (Double(row) + 0.5) * tPerY
                            for x in touchedLow...touchedHigh {
                                run += runs[x]
                                let coverage = min(cover[x] + run, 1) * alpha
                                cover[x] = 0
                                runs[x] = 0
                                guard coverage > 0.001 else { continue }
                                var colour = solid
                                if isGradient {
                                    let t = rowT + (Double(x) + 0.5) * tPerX
                                    colour = ramp[min(max(Int(t * 255 + 0.5), 0), 255)]
                                }
                                let base = (row * width + x) * 3
                                pixels[base] += (colour.r - pixels[base]) * coverage
                                pixels[base + 1] += (colour.g - pixels[base + 1]) * coverage
                                pixels[base + 2] += (colour.b - pixels[base + 2]) * coverage
                            }
                            // A run may end one past the last touched pixel.
                            runs[touchedHigh + 1] = 0
                            cover[touchedHigh + 1] = 0
                        }
                    }
                }
            }
        }
    }
}
