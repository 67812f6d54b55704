import AstroDomain
import ByteCodecs
import Foundation
import Stories

/// The offline illustrator: draws each page from data as an 800×600 picture: the theme's palette
/// and sky, the scene of the story's setting, the main character as a simple friendly figure with
/// a name label, and the page number.
///
/// As a PNG (the default: what an app's image view decodes) the SVG is drawn by `SVGRasterizer`
/// and compressed by `PNGEncoder`, with no image library: the same scene, figure and colours, the
/// page number in a small built-in digit font, and no name label or title (the pixels carry no
/// words; the app shows them beside the picture). As an SVG (under 16 KB) it has all of them.
///
/// Deterministic: the same request gives the same bytes. The character's kind comes from its
/// name (a fox, a bunny, …) and its colours from the story id and name, so every page of a story
/// shows the same figure. The scene is that of the first of the theme's settings named in the
/// page text; on a page naming none it is the previous page's scene (read from `previousImage`,
/// when that is one of ours), else the theme's default.
public struct BuiltInIllustrator: StoryIllustrator {
    public var name: String { "built-in" }

    /// The scene data's version (`illustration-scenes-v1`), to store beside the pages.
    public var version: String { scenes.version }

    /// What the pages are stored as.
    public enum Format: String, Sendable, CaseIterable {
        /// `image/png`, 800×600.
        case png
        /// `image/svg+xml`.
        case svg
    }

    /// The pixel size of a PNG page: the SVG's own view box, one pixel per unit (an iPhone shows
    /// it full width at about 2 pixels per point; a PNG page stays near 20–40 KB).
    public static let pngSize = (width: 800, height: 600)

    public let format: Format
    private let scenes: IllustrationScenes

    /// Loads the story knowledge bases of both languages and the scene data.
    /// - Throws: `StoryKnowledgeBaseError` when a shipped file is missing or inconsistent, and,
    ///   for `png`, when a scene or figure uses SVG the rasterizer does not draw.
    public init(format: Format = .png) throws(StoryKnowledgeBaseError) {
        let bases = try ReportLanguage.allCases.map { language throws(StoryKnowledgeBaseError) in
            try StoryKnowledgeBase.load(language)
        }
        scenes = try IllustrationScenes.load(knowledgeBases: bases)
        self.format = format
        if format == .png { try checkRasterSubset() }
    }

    /// Parses every backdrop and figure the data can give with the rasterizer's checks, so that a
    /// data edit outside its subset stops the worker at start-up rather than drawing wrong.
    /// - Throws: `StoryKnowledgeBaseError` naming the theme, scene or kind.
    func checkRasterSubset() throws(StoryKnowledgeBaseError) {
        let open = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 800 600\">"
        for (themeName, theme) in scenes.themes.sorted(by: { $0.key < $1.key }) {
            for (sceneName, backdrop) in theme.backdrops.sorted(by: { $0.key < $1.key }) {
                do {
                    try SVGRasterizer.check(open + backdrop + "</svg>")
                } catch {
                    throw StoryKnowledgeBaseError("theme \(themeName) scene \(sceneName): \(error.message)")
                }
            }
        }
        for kind in scenes.kinds {
            var figure = open + "<g transform=\"translate(400 540) scale(-1 1)\">"
            kind.figure.render(["#123456", "#234567", "#345678"], into: &figure)
            do {
                try SVGRasterizer.check(figure + "</g></svg>")
            } catch {
                throw StoryKnowledgeBaseError("character kind \(kind.name): \(error.message)")
            }
        }
    }

    /// Draws the page; never suspends (see `render`).
    /// - Throws: `IllustrationError` `unknown-theme` for a theme the knowledge base does not have.
    public func illustrate(_ request: IllustrationRequest) async throws(IllustrationError) -> StoryImage {
        try render(request)
    }

    /// Draws the page synchronously.
    /// - Returns: an `image/png` image stored as `png`, or `image/svg+xml` stored as `svg`, as
    ///   `format` says. (Should the rasterizer refuse a page, which the start-up check rules out,
    ///   the page is the SVG rather than a trap.)
    /// - Throws: `IllustrationError` `unknown-theme` (not transient) for a theme without a palette.
    public func render(_ request: IllustrationRequest) throws(IllustrationError) -> StoryImage {
        let (svg, sceneName, kindName) = try svgText(request, forPixels: format == .png)
        let svgImage = StoryImage(data: Data(svg.utf8), fileExtension: "svg", mediaType: "image/svg+xml")
        guard format == .png else { return svgImage }
        guard
            let rgb = try? SVGRasterizer.render(svg, width: Self.pngSize.width, height: Self.pngSize.height)
        else { return svgImage }
        let png = PNGEncoder.encode(
            width: Self.pngSize.width,
            height: Self.pngSize.height,
            rgb: rgb,
            text: [("scene", sceneName), ("kind", kindName), ("Software", Self.softwarePrefix + version)]
        )
        return StoryImage(data: Data(png), fileExtension: "png", mediaType: "image/png")
    }

    /// The page as SVG, and its scene and character kind. `forPixels` leaves out the name label
    /// and the title banner, whose words the rasterizer does not draw.
    func svgText(
        _ request: IllustrationRequest,
        forPixels: Bool
    ) throws(IllustrationError) -> (svg: String, scene: String, kind: String) {
        guard let theme = scenes.themes[request.theme] else {
            throw IllustrationError(
                code: .unknownTheme,
                message: "no illustration theme \(request.theme.debugDescription); themes: "
                    + scenes.themes.keys.sorted().joined(separator: ", "),
                isTransient: false
            )
        }
        let sceneName = scene(for: request, theme: theme)
        let character = request.mainCharacter.trimmingCharacters(in: .whitespacesAndNewlines)
        let kind = self.kind(of: character)
        let seed = Self.seed(storyID: request.storyID, character: character)
        let hue = kind.hues.lowerBound + Double(seed % 1_000) / 1_000 * (kind.hues.upperBound - kind.hues.lowerBound)
        let colours = [
            Self.hex(hue: hue, saturation: 0.55, lightness: 0.6),
            Self.hex(hue: hue, saturation: 0.45, lightness: 0.36),
            Self.hex(hue: hue, saturation: 0.6, lightness: 0.88),
        ]
        let page = min(max(request.pageNumber, 0), 9_999)
        // Spread over the pages (the same place on the same page of a story), facing both ways.
        let x = 200 + (page &* 137 &+ Int((seed >> 20) % 97)) % 341
        let facing = page % 2 == 0 ? "-1" : "1"

        var svg = ""
        svg.reserveCapacity(12_288)
        svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 800 600\" width=\"800\" height=\"600\" "
        svg += "role=\"img\" aria-labelledby=\"title desc\" data-scene=\"\(sceneName)\" data-kind=\"\(kind.name)\" "
        svg += "font-family=\"Nunito, Verdana, sans-serif\"><title id=\"title\">"
        Self.appendEscaped(request.title, maxCharacters: 120, to: &svg)
        svg += "</title><desc id=\"desc\">"
        let description = scenes.descriptions[request.language]!.render([
            character, scenes.places[sceneName]?[request.language] ?? "", String(page), String(request.pageCount),
        ])
        Self.appendEscaped(description, maxCharacters: 200, to: &svg)
        svg += "</desc>"
        svg += theme.backdrops[sceneName]!

        svg += "<g transform=\"translate(\(x) 540) scale(\(facing) 1)\">"
        kind.figure.render(colours, into: &svg)
        svg += "</g>"

        if !forPixels { appendLabels(request, character: character, x: x, ink: theme.ink, to: &svg) }
        svg += "<g transform=\"translate(752 552)\"><circle r=\"30\" fill=\"\(theme.accent)\"/>"
        svg +=
            "<text y=\"9\" text-anchor=\"middle\" font-size=\"26\" font-weight=\"bold\" fill=\"#fff\">\(page)</text></g>"
        svg += "</svg>\n"
        return (svg, sceneName, kind.name)
    }

    /// The character's name under the figure, and on the first page the title banner.
    private func appendLabels(
        _ request: IllustrationRequest,
        character: String,
        x: Int,
        ink: String,
        to svg: inout String
    ) {
        let page = min(max(request.pageNumber, 0), 9_999)
        let label = Self.clipped(character, maxCharacters: 24)
        let width = min(340, 32 + label.count * 11)
        svg +=
            "<g transform=\"translate(\(x) 540)\"><rect x=\"\(-width / 2)\" y=\"12\" width=\"\(width)\" height=\"32\" "
        svg += "rx=\"16\" fill=\"#fff\" fill-opacity=\".9\"/><text y=\"35\" text-anchor=\"middle\" font-size=\"20\" "
        svg += "fill=\"\(ink)\">"
        Self.appendEscaped(label, maxCharacters: 24, to: &svg)
        svg += "</text></g>"

        if page == 1 {
            svg += "<rect x=\"80\" y=\"20\" width=\"640\" height=\"58\" rx=\"29\" fill=\"#fff\" fill-opacity=\".85\"/>"
            svg += "<text x=\"400\" y=\"58\" text-anchor=\"middle\" font-size=\"28\" fill=\"\(ink)\">"
            Self.appendEscaped(request.title, maxCharacters: 44, to: &svg)
            svg += "</text>"
        }
    }

    // MARK: - Choices

    /// The first of the theme's settings named in the page, else the previous page's scene, else
    /// the theme's default.
    private func scene(for request: IllustrationRequest, theme: IllustrationScenes.Theme) -> String {
        if let settings = theme.settings[request.language], !settings.isEmpty {
            let text = request.pageText.lowercased()
            if let match = settings.first(where: { text.contains($0.setting) }) { return match.scene }
        }
        if let previous = Self.previousScene(request.previousImage), theme.backdrops[previous] != nil {
            return previous
        }
        return theme.defaultScene
    }

    private func kind(of character: String) -> IllustrationScenes.Kind {
        let lowered = character.lowercased()
        return scenes.kinds.first { kind in kind.keywords.contains { lowered.contains($0) } } ?? scenes.kinds.last!
    }

    /// Whether `image` is a PNG page this illustrator drew (its `Software` text chunk says so).
    public static func drew(_ image: StoryImage) -> Bool {
        guard image.mediaType == "image/png" else { return false }
        return PNGEncoder.textEntries(Array(image.data.prefix(1_024))).contains {
            $0.keyword == "Software" && $0.value.hasPrefix(softwarePrefix)
        }
    }

    private static let softwarePrefix = "AstroSvitla built-in "

    /// The scene of a page this illustrator drew: a PNG's `scene` text chunk (before the pixels),
    /// or an SVG's `data-scene` (on the root element, near the start).
    private static func previousScene(_ image: StoryImage?) -> String? {
        guard let image else { return nil }
        if image.mediaType == "image/png" {
            return PNGEncoder.textEntries(Array(image.data.prefix(1_024))).first { $0.keyword == "scene" }?.value
        }
        guard image.mediaType == "image/svg+xml" else { return nil }
        let head = image.data.prefix(512)
        guard let start = head.range(of: Data("data-scene=\"".utf8))?.upperBound,
            let end = head[start...].firstIndex(of: UInt8(ascii: "\""))
        else { return nil }
        return String(decoding: head[start..<end], as: UTF8.self)
    }

    /// FNV-1a over the story id's bytes and the character's name: fixed for a story.
    private static func seed(storyID: UUID, character: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        withUnsafeBytes(of: storyID.uuid) { bytes in
            for byte in bytes {
                hash ^= UInt64(byte)
                hash = hash &* 0x0000_0100_0000_01b3
            }
        }
        for byte in character.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    // MARK: - Text and colour

    /// `text` cut to `maxCharacters` (the last one an ellipsis when cut).
    static func clipped(_ text: String, maxCharacters: Int) -> String {
        guard text.count > maxCharacters else { return text }
        return String(text.prefix(maxCharacters - 1)) + "…"
    }

    /// Appends `text` (clipped) as XML character data: `&<>"'` escaped, line breaks and other
    /// control characters as spaces, and the code points XML 1.0 forbids left out.
    static func appendEscaped(_ text: String, maxCharacters: Int, to output: inout String) {
        for scalar in clipped(text, maxCharacters: maxCharacters).unicodeScalars {
            switch scalar {
            case "&": output += "&amp;"
            case "<": output += "&lt;"
            case ">": output += "&gt;"
            case "\"": output += "&quot;"
            case "'": output += "&apos;"
            case "\u{0}"..."\u{1F}", "\u{7F}": output += " "
            case "\u{FFFE}", "\u{FFFF}": continue
            default: output.unicodeScalars.append(scalar)
            }
        }
    }

    /// `#rrggbb` of an HSL colour (hue in degrees, saturation and lightness 0…1).
    static func hex(hue: Double, saturation: Double, lightness: Double) -> String {
        let chroma = (1 - abs(2 * lightness - 1)) * saturation
        let sector = hue.truncatingRemainder(dividingBy: 360) / 60
        let second = chroma * (1 - abs(sector.truncatingRemainder(dividingBy: 2) - 1))
        let (r, g, b): (Double, Double, Double)
        switch sector {
        case ..<1: (r, g, b) = (chroma, second, 0)
        case ..<2: (r, g, b) = (second, chroma, 0)
        case ..<3: (r, g, b) = (0, chroma, second)
        case ..<4: (r, g, b) = (0, second, chroma)
        case ..<5: (r, g, b) = (second, 0, chroma)
        default: (r, g, b) = (chroma, 0, second)
        }
        let offset = lightness - chroma / 2
        let digits = Array("0123456789abcdef")
        var text = "#"
        for channel in [r, g, b] {
            let value = Int(((channel + offset) * 255).rounded()).clamped(to: 0...255)
            text.append(digits[value >> 4])
            text.append(digits[value & 15])
        }
        return text
    }
}

extension Int {
    fileprivate func clamped(to range: ClosedRange<Int>) -> Int {
        Swift.min(Swift.max(self, range.lowerBound), range.upperBound)
    }
}
