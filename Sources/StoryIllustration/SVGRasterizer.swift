import Foundation

/// Why an SVG could not be drawn: markup outside the subset `SVGRasterizer` knows.
public struct SVGRasterError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}

/// Draws the SVG our built-in illustrator writes into RGB pixels, with no image library.
///
/// Only the subset our own markup uses (scenes.json and `BuiltInIllustrator`), and anything else
/// is an `SVGRasterError`, never a guess: the elements `svg`, `title`, `desc`, `defs`,
/// `linearGradient` (object-bounding-box `x1 y1 x2 y2`) with `stop`s, `g`, `path` (every command
/// but in the forms we write: absolute and relative M L H V C S Q T A Z), `circle`, `ellipse`,
/// `rect` (with `rx`/`ry`) and `text` (left out: the pixels carry no text); the attributes `fill`,
/// `fill-opacity`, `fill-rule`, `stroke`, `stroke-width`, `stroke-linecap` (`butt`, `round`),
/// `stroke-dasharray`, `opacity`, `transform` (`translate`, `scale`, `rotate`); colours as
/// `#rgb`, `#rrggbb`, `none` or `url(#id)`.
///
/// Shapes are flattened to polygons (curves within a tenth of a pixel), strokes become polygons
/// (quads, with round caps and joins as discs), and each shape is filled by scanlines with four
/// sub-rows per pixel and exact horizontal coverage. A group's `opacity` is multiplied into its
/// children (equal to the SVG's result where they do not overlap, as in our data).
public enum SVGRasterizer {
    /// The picture `svg` draws, scaled from its `viewBox` to `width × height`: RGB bytes, rows top
    /// to bottom, on white.
    /// - Throws: `SVGRasterError` naming the first element, attribute or value outside the subset.
    public static func render(_ svg: String, width: Int, height: Int) throws(SVGRasterError) -> [UInt8] {
        var canvas = Canvas(width: width, height: height)
        try draw(svg, on: &canvas)
        return canvas.rgb()
    }

    /// Checks that every element, attribute and value of `svg` is within the subset, drawing
    /// nothing (the scene data's test, and the loader's check at start-up).
    /// - Throws: `SVGRasterError` as `render` does.
    public static func check(_ svg: String) throws(SVGRasterError) {
        var canvas = Canvas(width: 0, height: 0)
        try draw(svg, on: &canvas)
    }

    static func draw(_ svg: String, on canvas: inout Canvas) throws(SVGRasterError) {
        var parser = MarkupParser(Array(svg.utf8))
        var gradients: [String: Gradient] = [:]
        var styles: [Style] = []
        var open: [String] = []
        var gradient: (id: String, gradient: Gradient)?
        var text: (attributes: [String: String], style: Style)?
        while let token = try parser.next() {
            switch token {
            case .close(let name):
                guard open.last == name else { throw SVGRasterError("</\(name)> closes <\(open.last ?? "nothing")>") }
                open.removeLast()
                if name == "g" || name == "svg" { styles.removeLast() }
                if name == "text", let (attributes, style) = text {
                    try drawDigits(parser.characterData, attributes, style, on: &canvas, gradients: gradients)
                    text = nil
                }
                if name == "linearGradient", let finished = gradient {
                    guard finished.gradient.stops.count >= 1 else {
                        throw SVGRasterError("linearGradient \(finished.id) has no stop")
                    }
                    gradients[finished.id] = finished.gradient
                    gradient = nil
                }
            case .open(let name, let attributes, let selfClosing):
                let inText = open.contains("text") || open.contains("title") || open.contains("desc")
                if inText { throw SVGRasterError("<\(name)> inside <\(open.last!)>") }
                if open.isEmpty, name != "svg" { throw SVGRasterError("the root element is <\(name)>, not <svg>") }
                switch name {
                case "svg":
                    guard open.isEmpty else { throw SVGRasterError("a nested <svg>") }
                    try only(attributes, Self.rootAttributes, name)
                    let box = try numbers(attributes["viewBox"] ?? "", "viewBox")
                    guard box.count == 4, box[0] == 0, box[1] == 0, box[2] > 0, box[3] > 0 else {
                        throw SVGRasterError(
                            "viewBox must be \"0 0 width height\", got \(attributes["viewBox"] ?? "none")"
                        )
                    }
                    var root = Style()
                    if canvas.width > 0 {
                        root.transform = Affine(
                            a: Double(canvas.width) / box[2],
                            b: 0,
                            c: 0,
                            d: Double(canvas.height) / box[3],
                            e: 0,
                            f: 0
                        )
                    }
                    styles.append(root)
                case "title", "desc":
                    try only(attributes, ["id"], name)
                case "text":
                    try only(attributes, Self.textAttributes, name)
                    guard let parent = styles.last else { throw SVGRasterError("<text> outside the drawing") }
                    text = (
                        attributes, try parent.applying(attributes.filter { Self.paintAttributes.contains($0.key) })
                    )
                case "defs":
                    try only(attributes, [], name)
                case "linearGradient":
                    guard open.last == "defs" else { throw SVGRasterError("<linearGradient> outside <defs>") }
                    try only(attributes, ["id", "x1", "y1", "x2", "y2"], name)
                    guard let id = attributes["id"], !id.isEmpty else {
                        throw SVGRasterError("a linearGradient without id")
                    }
                    var value = Gradient()
                    value.x1 = try number(attributes["x1"] ?? "0", "x1")
                    value.y1 = try number(attributes["y1"] ?? "0", "y1")
                    value.x2 = try number(attributes["x2"] ?? "1", "x2")
                    value.y2 = try number(attributes["y2"] ?? "0", "y2")
                    gradient = (id, value)
                case "stop":
                    guard open.last == "linearGradient", gradient != nil else {
                        throw SVGRasterError("<stop> outside <linearGradient>")
                    }
                    try only(attributes, ["offset", "stop-color"], name)
                    let offset = try number(attributes["offset"] ?? "0", "offset")
                    guard case .colour(let colour) = try paint(attributes["stop-color"] ?? "#000", "stop-color") else {
                        throw SVGRasterError("stop-color must be a colour")
                    }
                    gradient!.gradient.stops.append((min(max(offset, 0), 1), colour))
                case "g", "path", "circle", "ellipse", "rect":
                    guard let parent = styles.last, !open.contains("defs") else {
                        throw SVGRasterError("<\(name)> outside the drawing")
                    }
                    let allowed: Set<String> =
                        switch name {
                        case "path": ["d"]
                        case "circle": ["cx", "cy", "r"]
                        case "ellipse": ["cx", "cy", "rx", "ry"]
                        case "rect": ["x", "y", "width", "height", "rx", "ry"]
                        default: []
                        }
                    try only(attributes, allowed.union(Self.paintAttributes), name)
                    let style = try parent.applying(attributes)
                    if name == "g" {
                        styles.append(style)
                    } else {
                        let outline = try shape(name, attributes, style.transform)
                        try canvas.paint(outline, style: style, gradients: gradients)
                    }
                default:
                    throw SVGRasterError("unsupported element <\(name)>")
                }
                if !selfClosing {
                    open.append(name)
                } else if name == "g" {
                    styles.removeLast()
                }
            }
        }
        guard open.isEmpty else { throw SVGRasterError("<\(open.last!)> is not closed") }
    }

    /// 3×5 cells of the digits 0–9, a row per three bits, top row first.
    static let digitGlyphs: [[UInt8]] = [
        [7, 5, 5, 5, 7], [2, 6, 2, 2, 7], [7, 1, 7, 4, 7], [7, 1, 7, 1, 7], [5, 5, 7, 1, 1],
        [7, 4, 7, 1, 7], [7, 4, 7, 5, 7], [7, 1, 1, 1, 1], [7, 5, 7, 5, 7], [7, 5, 7, 1, 7],
    ]

    /// Draws a text of ASCII digits (the page number) in the built-in block font: cap height
    /// 0.7 em, anchored as `text-anchor` says. Other texts are left out.
    private static func drawDigits(
        _ content: String,
        _ attributes: [String: String],
        _ style: Style,
        on canvas: inout Canvas,
        gradients: [String: Gradient]
    ) throws(SVGRasterError) {
        let digits = content.utf8.map { Int($0) - 0x30 }
        guard !digits.isEmpty, digits.allSatisfy({ (0...9).contains($0) }) else { return }
        let size = try number(attributes["font-size"] ?? "16", "font-size")
        let cell = size * 0.7 / 5
        let width = Double(digits.count * 4 - 1) * cell
        var left = try number(attributes["x"] ?? "0", "x")
        switch attributes["text-anchor"] ?? "start" {
        case "start": break
        case "middle": left -= width / 2
        case "end": left -= width
        case let other: throw SVGRasterError("text-anchor=\"\(other)\"")
        }
        let top = try number(attributes["y"] ?? "0", "y") - 5 * cell
        var cells: [Subpath] = []
        for (position, digit) in digits.enumerated() {
            for (row, bits) in digitGlyphs[digit].enumerated() {
                for column in 0..<3 where bits & (4 >> UInt8(column)) != 0 {
                    let x = left + Double(position * 4 + column) * cell
                    let y = top + Double(row) * cell
                    let corners = [Point(x, y), Point(x + cell, y), Point(x + cell, y + cell), Point(x, y + cell)]
                    cells.append(Subpath(points: corners.map(style.transform.apply), closed: true))
                }
            }
        }
        var fill = style
        fill.stroke = .none
        try canvas.paint(cells, style: fill, gradients: gradients)
    }

    static let rootAttributes: Set<String> = [
        "xmlns", "viewBox", "width", "height", "role", "aria-labelledby", "data-scene", "data-kind", "font-family",
    ]
    static let textAttributes: Set<String> = [
        "x", "y", "text-anchor", "font-size", "font-weight", "fill", "fill-opacity",
    ]
    static let paintAttributes: Set<String> = [
        "fill", "fill-opacity", "fill-rule", "stroke", "stroke-width", "stroke-linecap", "stroke-dasharray",
        "opacity", "transform",
    ]

    private static func only(
        _ attributes: [String: String],
        _ allowed: Set<String>,
        _ element: String
    )
        throws(SVGRasterError)
    {
        if let unknown = attributes.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw SVGRasterError("unsupported attribute \(unknown) on <\(element)>")
        }
    }

    // MARK: - Shapes

    /// The element's outline in device space: its subpaths and whether each is closed.
    private static func shape(
        _ name: String,
        _ attributes: [String: String],
        _ transform: Affine
    )
        throws(SVGRasterError) -> [Subpath]
    {
        func value(_ key: String, _ fallback: Double = 0) throws(SVGRasterError) -> Double {
            guard let text = attributes[key] else { return fallback }
            return try number(text, key)
        }
        switch name {
        case "path":
            return try PathData.flatten(attributes["d"] ?? "", transform: transform)
        case "circle":
            let r = try value("r")
            return [ellipse(cx: try value("cx"), cy: try value("cy"), rx: r, ry: r, transform)]
        case "ellipse":
            return [
                ellipse(cx: try value("cx"), cy: try value("cy"), rx: try value("rx"), ry: try value("ry"), transform)
            ]
        default:
            let x = try value("x")
            let y = try value("y")
            let width = try value("width")
            let height = try value("height")
            var rx = attributes["rx"] == nil ? try value("ry") : try value("rx")
            var ry = attributes["ry"] == nil ? rx : try value("ry")
            guard width > 0, height > 0 else { return [] }
            rx = min(max(rx, 0), width / 2)
            ry = min(max(ry, 0), height / 2)
            if rx == 0 || ry == 0 {
                let corners = [Point(x, y), Point(x + width, y), Point(x + width, y + height), Point(x, y + height)]
                return [Subpath(points: corners.map(transform.apply), closed: true)]
            }
            var points: [Point] = []
            let steps = segments(radius: max(rx, ry) * transform.scale) / 4 + 1
            let corners = [
                (x + width - rx, y + ry, -Double.pi / 2), (x + width - rx, y + height - ry, 0.0),
                (x + rx, y + height - ry, Double.pi / 2), (x + rx, y + ry, Double.pi),
            ]
            for (cx, cy, start) in corners {
                for step in 0...steps {
                    let angle = start + Double(step) / Double(steps) * Double.pi / 2
                    points.append(transform.apply(Point(cx + rx * cos(angle), cy + ry * sin(angle))))
                }
            }
            return [Subpath(points: points, closed: true)]
        }
    }

    static func ellipse(cx: Double, cy: Double, rx: Double, ry: Double, _ transform: Affine) -> Subpath {
        guard rx > 0, ry > 0 else { return Subpath(points: [], closed: true) }
        let steps = segments(radius: max(rx, ry) * transform.scale)
        let points = (0..<steps).map { step in
            let angle = Double(step) / Double(steps) * 2 * Double.pi
            return transform.apply(Point(cx + rx * cos(angle), cy + ry * sin(angle)))
        }
        return Subpath(points: points, closed: true)
    }

    /// Segments for a full turn of `radius` device pixels, the chords within 0.1 pixel of the arc.
    static func segments(radius: Double) -> Int {
        guard radius > 0.1 else { return 8 }
        let step = acos(max(-1, 1 - 0.1 / radius))
        return min(max(Int((2 * Double.pi / step).rounded(.up)), 8), 256)
    }

    // MARK: - Values

    static func number(_ text: String, _ name: String) throws(SVGRasterError) -> Double {
        guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value.isFinite else {
            throw SVGRasterError("\(name)=\"\(text)\" is not a number")
        }
        return value
    }

    static func numbers(_ text: String, _ name: String) throws(SVGRasterError) -> [Double] {
        var scanner = NumberScanner(Array(text.utf8))
        var values: [Double] = []
        while scanner.hasMore {
            guard let value = scanner.number() else {
                throw SVGRasterError("\(name)=\"\(text)\" is not a list of numbers")
            }
            values.append(value)
        }
        return values
    }

    static func paint(_ text: String, _ name: String) throws(SVGRasterError) -> Paint {
        if text == "none" { return .none }
        if text.hasPrefix("url(#"), text.hasSuffix(")") { return .gradient(String(text.dropFirst(5).dropLast())) }
        let digits = Array(text.utf8.dropFirst())
        guard text.first == "#", digits.count == 3 || digits.count == 6,
            let value = UInt32(String(decoding: digits, as: UTF8.self), radix: 16)
        else { throw SVGRasterError("\(name)=\"\(text)\" is not #rgb, #rrggbb, none or url(#id)") }
        if digits.count == 3 {
            let r = Float((value >> 8) & 15) / 15
            let g = Float((value >> 4) & 15) / 15
            let b = Float(value & 15) / 15
            return .colour(Colour(r: r, g: g, b: b))
        }
        return .colour(
            Colour(r: Float((value >> 16) & 255) / 255, g: Float((value >> 8) & 255) / 255, b: Float(value & 255) / 255)
        )
    }

    static func transform(_ text: String) throws(SVGRasterError) -> Affine {
        var result = Affine.identity
        var rest = Substring(text)
        while true {
            rest = rest.drop { $0 == " " || $0 == "," }
            if rest.isEmpty { break }
            guard let open = rest.firstIndex(of: "("), let close = rest.firstIndex(of: ")"), open < close else {
                throw SVGRasterError("transform=\"\(text)\" is not a list of functions")
            }
            let name = rest[..<open].trimmingCharacters(in: .whitespaces)
            let arguments = try numbers(String(rest[rest.index(after: open)..<close]), "transform")
            let step: Affine
            switch (name, arguments.count) {
            case ("translate", 1): step = Affine(a: 1, b: 0, c: 0, d: 1, e: arguments[0], f: 0)
            case ("translate", 2): step = Affine(a: 1, b: 0, c: 0, d: 1, e: arguments[0], f: arguments[1])
            case ("scale", 1): step = Affine(a: arguments[0], b: 0, c: 0, d: arguments[0], e: 0, f: 0)
            case ("scale", 2): step = Affine(a: arguments[0], b: 0, c: 0, d: arguments[1], e: 0, f: 0)
            case ("rotate", 1), ("rotate", 3):
                let angle = arguments[0] * Double.pi / 180
                let rotation = Affine(a: cos(angle), b: sin(angle), c: -sin(angle), d: cos(angle), e: 0, f: 0)
                if arguments.count == 3 {
                    let (x, y) = (arguments[1], arguments[2])
                    step = Affine(a: 1, b: 0, c: 0, d: 1, e: x, f: y).then(rotation)
                        .then(Affine(a: 1, b: 0, c: 0, d: 1, e: -x, f: -y))
                } else {
                    step = rotation
                }
            default:
                throw SVGRasterError("unsupported transform \(name) with \(arguments.count) arguments")
            }
            result = result.then(step)
            rest = rest[rest.index(after: close)...]
        }
        return result
    }
}

// MARK: - Geometry

struct Point: Sendable {
    var x: Double
    var y: Double

    init(_ x: Double, _ y: Double) {
        self.x = x
        self.y = y
    }
}

struct Subpath: Sendable {
    var points: [Point]
    var closed: Bool
}

/// `x' = a x + c y + e`, `y' = b x + d y + f`, as SVG writes matrices.
struct Affine: Sendable {
    var a, b, c, d, e, f: Double

    static let identity = Affine(a: 1, b: 0, c: 0, d: 1, e: 0, f: 0)

    func apply(_ point: Point) -> Point {
        Point(a * point.x + c * point.y + e, b * point.x + d * point.y + f)
    }

    /// `self` applied after `inner`: the matrix product `self × inner`.
    func then(_ inner: Affine) -> Affine {
        Affine(
            a: a * inner.a + c * inner.b,
            b: b * inner.a + d * inner.b,
            c: a * inner.c + c * inner.d,
            d: b * inner.c + d * inner.d,
            e: a * inner.e + c * inner.f + e,
            f: b * inner.e + d * inner.f + f
        )
    }

    /// How much lengths grow (the square root of the determinant's size).
    var scale: Double { abs(a * d - b * c).squareRoot() }
}

// MARK: - Style

struct Colour: Sendable {
    var r, g, b: Float
}

enum Paint: Sendable {
    case none
    case colour(Colour)
    case gradient(String)
}

struct Gradient: Sendable {
    var x1 = 0.0, y1 = 0.0, x2 = 1.0, y2 = 0.0
    var stops: [(offset: Double, colour: Colour)] = []

    func colour(at t: Double) -> Colour {
        guard let first = stops.first, let last = stops.last else { return Colour(r: 0, g: 0, b: 0) }
        if t <= first.offset { return first.colour }
        for (index, stop) in stops.enumerated().dropFirst() where t <= stop.offset {
            let previous = stops[index - 1]
            let span = stop.offset - previous.offset
            let w = Float(span > 0 ? (t - previous.offset) / span : 1)
            return Colour(
                r: previous.colour.r + (stop.colour.r - previous.colour.r) * w,
                g: previous.colour.g + (stop.colour.g - previous.colour.g) * w,
                b: previous.colour.b + (stop.colour.b - previous.colour.b) * w
            )
        }
        return last.colour
    }
}

/// The inherited presentation attributes, and the element's own opacity and transform.
struct Style: Sendable {
    var fill: Paint = .colour(Colour(r: 0, g: 0, b: 0))
    var fillOpacity: Float = 1
    var evenOdd = false
    var stroke: Paint = .none
    var strokeWidth = 1.0
    var roundCaps = false
    var dashes: [Double] = []
    var opacity: Float = 1
    var transform = Affine.identity

    func applying(_ attributes: [String: String]) throws(SVGRasterError) -> Style {
        var style = self
        for (key, text) in attributes {
            switch key {
            case "fill": style.fill = try SVGRasterizer.paint(text, key)
            case "stroke": style.stroke = try SVGRasterizer.paint(text, key)
            case "fill-opacity": style.fillOpacity = Float(min(max(try SVGRasterizer.number(text, key), 0), 1))
            case "opacity": style.opacity *= Float(min(max(try SVGRasterizer.number(text, key), 0), 1))
            case "stroke-width":
                let width = try SVGRasterizer.number(text, key)
                guard width >= 0 else { throw SVGRasterError("stroke-width=\"\(text)\" is negative") }
                style.strokeWidth = width
            case "fill-rule":
                guard text == "nonzero" || text == "evenodd" else { throw SVGRasterError("fill-rule=\"\(text)\"") }
                style.evenOdd = text == "evenodd"
            case "stroke-linecap":
                guard text == "butt" || text == "round" else { throw SVGRasterError("stroke-linecap=\"\(text)\"") }
                style.roundCaps = text == "round"
            case "stroke-dasharray":
                let dashes = text == "none" ? [] : try SVGRasterizer.numbers(text, key)
                guard dashes.allSatisfy({ $0 >= 0 }), dashes.isEmpty || dashes.reduce(0, +) > 0 else {
                    throw SVGRasterError("stroke-dasharray=\"\(text)\"")
                }
                style.dashes = dashes.count % 2 == 1 ? dashes + dashes : dashes
            case "transform": style.transform = style.transform.then(try SVGRasterizer.transform(text))
            default: break
            }
        }
        return style
    }
}

// MARK: - Markup

/// Tags of the XML our illustrator writes: no comments, CDATA, processing instructions or
/// single-quoted attributes (each an error), character data skipped.
struct MarkupParser {
    enum Token {
        case open(String, [String: String], selfClosing: Bool)
        case close(String)
    }

    private let bytes: [UInt8]
    private var index = 0
    /// The character data before the latest tag (entities left as written).
    private(set) var characterData = ""

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func next() throws(SVGRasterError) -> Token? {
        let start = index
        while index < bytes.count, bytes[index] != UInt8(ascii: "<") { index += 1 }
        characterData = String(decoding: bytes[start..<index], as: UTF8.self)
        guard index < bytes.count else { return nil }
        index += 1
        var closing = false
        if index < bytes.count, bytes[index] == UInt8(ascii: "/") {
            closing = true
            index += 1
        }
        let name = self.name()
        guard !name.isEmpty else { throw SVGRasterError("unsupported markup at byte \(index)") }
        var attributes: [String: String] = [:]
        while true {
            skipSpace()
            guard index < bytes.count else { throw SVGRasterError("<\(name) is not closed") }
            if bytes[index] == UInt8(ascii: ">") {
                index += 1
                return closing ? .close(name) : .open(name, attributes, selfClosing: false)
            }
            if bytes[index] == UInt8(ascii: "/"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: ">"),
                !closing
            {
                index += 2
                return .open(name, attributes, selfClosing: true)
            }
            let key = self.name()
            skipSpace()
            guard !key.isEmpty, !closing, index + 1 < bytes.count, bytes[index] == UInt8(ascii: "="),
                bytes[index + 1] == UInt8(ascii: "\"")
            else { throw SVGRasterError("malformed attribute in <\(name)>") }
            index += 2
            let start = index
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") { index += 1 }
            guard index < bytes.count else { throw SVGRasterError("unterminated attribute \(key)") }
            guard attributes[key] == nil else { throw SVGRasterError("duplicate attribute \(key) in <\(name)>") }
            attributes[key] = String(decoding: bytes[start..<index], as: UTF8.self)
            index += 1
        }
    }

    private mutating func name() -> String {
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            let isNameByte =
                (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "_")
            guard isNameByte else { break }
            index += 1
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }
}

/// Reads the numbers of path data and lists: separators are spaces and commas; `-` and a second
/// `.` start a new number.
struct NumberScanner {
    private let bytes: [UInt8]
    private(set) var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var hasMore: Bool {
        mutating get {
            skipSeparators()
            return index < bytes.count
        }
    }

    mutating func skipSeparators() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D, 0x2C].contains(bytes[index]) { index += 1 }
    }

    /// The next byte after separators, if it is a letter (a path command).
    mutating func command() -> UInt8? {
        skipSeparators()
        guard index < bytes.count else { return nil }
        let byte = bytes[index]
        guard (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) else { return nil }
        index += 1
        return byte
    }

    mutating func number() -> Double? {
        skipSeparators()
        let start = index
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") || bytes[index] == UInt8(ascii: "+") { index += 1 }
        var digits = false
        var dot = false
        while index < bytes.count {
            let byte = bytes[index]
            if byte >= 0x30 && byte <= 0x39 {
                digits = true
            } else if byte == UInt8(ascii: "."), !dot {
                dot = true
            } else if byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E"), digits {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "-") || bytes[index] == UInt8(ascii: "+") {
                    index += 1
                }
                continue
            } else {
                break
            }
            index += 1
        }
        guard digits, let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)), value.isFinite else {
            index = start
            return nil
        }
        return value
    }

    /// An arc flag: one `0` or `1`, which may be written with no separator before the next number.
    mutating func flag() -> Bool? {
        skipSeparators()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "0") || bytes[index] == UInt8(ascii: "1") else {
            return nil
        }
        index += 1
        return bytes[index - 1] == UInt8(ascii: "1")
    }
}
