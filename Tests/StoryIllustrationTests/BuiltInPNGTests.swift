import AstroDomain
import ByteCodecs
import Foundation
import Stories
import StoryIllustration
import TestProcesses
import Testing

@Suite("BuiltInIllustrator: the offline pages as PNG (the default)")
struct BuiltInPNGTests {
    let png: BuiltInIllustrator
    let svg: BuiltInIllustrator

    init() throws {
        png = try BuiltInIllustrator()
        svg = try BuiltInIllustrator(format: .svg)
    }

    /// The pixel at (x, y) of decoded RGB rows of the page's width.
    private func pixel(_ rgb: [UInt8], _ x: Int, _ y: Int) -> [UInt8] {
        let base = (y * BuiltInIllustrator.pngSize.width + x) * 3
        return Array(rgb[base..<(base + 3)])
    }

    private func colour(_ hex: String) -> [UInt8] {
        let digits = Array(hex.dropFirst())
        return stride(from: 0, to: 6, by: 2).map { UInt8(String(digits[$0...($0 + 1)]), radix: 16)! }
    }

    private func near(_ a: [UInt8], _ b: [UInt8], within tolerance: Int = 2) -> Bool {
        zip(a, b).allSatisfy { abs(Int($0) - Int($1)) <= tolerance }
    }

    @Test("the default is an 800×600 PNG that Python decodes, showing the SVG's sky, figure and badge")
    func aPNGOfTheSamePicture() throws {
        #expect(png.format == .png)
        let request = pageRequest(pageNumber: 3, pageText: "Bo walks in the forest.")
        let image = try png.render(request)
        #expect(image.fileExtension == "png")
        #expect(image.mediaType == "image/png")
        #expect(StoryImage.isPNG(image.data))
        #expect(image.data.count < 100_000, "\(image.data.count) bytes")
        #expect(BuiltInIllustrator.drew(image))
        let decoded = try PythonDecoder.decodePNG(Array(image.data))
        #expect(decoded.width == 800 && decoded.height == 600)

        // The same page as SVG says where things are and what colour they are.
        let text = String(decoding: try svg.render(request).data, as: UTF8.self)
        func attribute(_ name: String, after marker: String) throws -> String {
            let start = try #require(text.range(of: marker))
            let value = try #require(text[start.upperBound...].range(of: "\(name)=\""))
            return String(text[value.upperBound...].prefix { $0 != "\"" })
        }
        let sky1 = try attribute("stop-color", after: "<linearGradient")
        // The gradient runs down the page: the top row is within a step of its first stop.
        #expect(near(pixel(decoded.rgb, 400, 0), colour(sky1), within: 3), "\(pixel(decoded.rgb, 400, 0)) vs \(sky1)")
        // The figure's belly (the character's light colour) at its centre, 50 units above its feet.
        let place = try attribute("transform", after: "</desc>")
        let start = try #require(text.range(of: "<g transform=\"translate("))
        let x = try #require(Int(text[start.upperBound...].prefix { $0 != " " }))
        let belly = try attribute("fill", after: "<ellipse cy=\"-50\"")
        #expect(near(pixel(decoded.rgb, x, 540 - 50), colour(belly)), "belly at \(x): \(place)")
        // The page badge: the accent colour around a white "3" in the block font.
        let accent = try attribute("fill", after: "translate(752 552)\"><circle r=\"30\"")
        #expect(near(pixel(decoded.rgb, 752 - 22, 552), colour(accent)))
        #expect(near(pixel(decoded.rgb, 752, 552 + 6), [255, 255, 255]))
    }

    @Test("deterministic, and the scene carries over from a PNG page through its text chunk")
    func deterministicAndCarriedScene() throws {
        let request = pageRequest(pageNumber: 2, pageText: "The Windy Cliffs Above The Sea were loud.")
        let first = try png.render(request)
        #expect(first == (try BuiltInIllustrator().render(request)))
        #expect(PNGEncoder.textEntries(Array(first.data)).first { $0.keyword == "scene" }?.value == "sea")
        let next = try png.render(pageRequest(pageNumber: 3, pageText: "Bo walks on.", previousImage: first))
        #expect(PNGEncoder.textEntries(Array(next.data)).first { $0.keyword == "scene" }?.value == "sea")
        let svgPage = try svg.render(pageRequest(pageNumber: 3, pageText: "Bo walks on.", previousImage: first))
        #expect(String(decoding: svgPage.data, as: UTF8.self).contains("data-scene=\"sea\""))
    }

    /// Every theme, every scene a setting leads to, and every character kind, as whole pages (the
    /// SVG with its labels, and the PNG's): all within the rasterizer's subset, so that a data edit
    /// it cannot draw fails here. Also records the slowest page and the largest PNG.
    @Test("every page the data can give is within the rasterizer's subset, under 100 KB as PNG")
    func everyPageRasterizes() throws {
        let kinds = [
            "Bunny Bo", "Felix the Fox", "Ведмедик Тедді", "Zara", "Дракончик", "Owl Olly", "Kitty Kit", "Mousey Mo",
        ]
        var largest = 0
        var slowest = Duration.zero
        var pages = 0
        for language in ReportLanguage.allCases {
            let base = try StoryKnowledgeBase.load(language)
            for (theme, entry) in base.themes.sorted(by: { $0.key < $1.key }) {
                for (index, setting) in entry.settings.enumerated() {
                    let request = pageRequest(
                        theme: theme,
                        language: language,
                        mainCharacter: kinds[index % kinds.count],
                        pageNumber: index % 3 + 1,
                        pageText: "Here is \(setting)."
                    )
                    let text = String(decoding: try svg.render(request).data, as: UTF8.self)
                    try SVGRasterizer.check(text)
                    if language == .en && index < 3 {
                        let clock = ContinuousClock()
                        var image: StoryImage?
                        let elapsed = try clock.measure { image = try png.render(request) }
                        slowest = max(slowest, elapsed)
                        largest = max(largest, image?.data.count ?? 0)
                        #expect(image?.mediaType == "image/png")
                    }
                    pages += 1
                }
            }
        }
        #expect(pages > 40)
        #expect(largest < 100_000, "largest PNG page \(largest) bytes")
        print("BuiltInPNGTests: \(pages) pages checked; largest PNG \(largest) bytes; slowest PNG page \(slowest)")
    }

    @Test("the rasterizer refuses markup outside its subset, naming it")
    func unsupportedMarkup() {
        let open = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 800 600\">"
        let cases: [(String, String)] = [
            ("<polygon points=\"0 0 1 1 2 0\"/>", "<polygon>"),
            ("<rect width=\"10\" height=\"10\" stroke-linejoin=\"round\"/>", "stroke-linejoin"),
            ("<g transform=\"skewX(10)\"><circle r=\"3\"/></g>", "skewX"),
            ("<path d=\"M0 0 L10 10 B3 4\"/>", "path command B"),
            ("<rect width=\"10\" height=\"10\" fill=\"red\"/>", "fill=\"red\""),
            ("<rect width=\"10\" height=\"10\" stroke=\"#fff\" stroke-linecap=\"square\"/>", "stroke-linecap"),
            ("<rect width=\"10\" height=\"10\" fill=\"url(#nothing)\"/>", "url(#nothing)"),
            ("<g><circle r=\"3\"/>", "closes <g>"),
            ("<!-- a comment --><circle r=\"3\"/>", "unsupported markup"),
        ]
        for (body, named) in cases {
            do {
                try SVGRasterizer.check(open + body + "</svg>")
                Issue.record("accepted \(body)")
            } catch {
                #expect(error.message.contains(named), "\(body): \(error.message)")
            }
        }
    }

    @Test("shapes: fills, anti-aliased edges, even-odd holes, strokes, arcs, rotation, gradient")
    func shapes() throws {
        func draw(_ body: String) throws -> [UInt8] {
            try SVGRasterizer.render(
                "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 40 20\">" + body + "</svg>",
                width: 40,
                height: 20
            )
        }
        func at(_ rgb: [UInt8], _ x: Int, _ y: Int) -> [UInt8] {
            Array(rgb[((y * 40 + x) * 3)..<((y * 40 + x) * 3 + 3)])
        }
        // A rect on whole pixels is exact; half a pixel's edge is half blended.
        let rect = try draw("<rect x=\"2\" y=\"2\" width=\"10.5\" height=\"6\" fill=\"#f00\"/>")
        #expect(at(rect, 5, 5) == [255, 0, 0])
        #expect(at(rect, 1, 5) == [255, 255, 255])
        #expect(near(at(rect, 12, 5), [255, 128, 128], within: 2))
        // Even-odd: the inner square is a hole; nonzero (same direction) fills it.
        let square = "M0 0 H20 V20 H0Z M5 5 H15 V15 H5Z"
        let hole = try draw("<path d=\"\(square)\" fill=\"#00f\" fill-rule=\"evenodd\"/>")
        #expect(at(hole, 10, 10) == [255, 255, 255])
        #expect(at(hole, 2, 10) == [0, 0, 255])
        #expect(at(try draw("<path d=\"\(square)\" fill=\"#00f\"/>"), 10, 10) == [0, 0, 255])
        // A round-capped stroke covers its caps; a butt one ends at the point.
        let line = "<path d=\"M10 10 H30\" stroke=\"#000\" stroke-width=\"4\""
        #expect(at(try draw(line + " stroke-linecap=\"round\"/>"), 9, 10) == [0, 0, 0])
        #expect(at(try draw(line + "/>"), 9, 10) == [255, 255, 255])
        #expect(at(try draw(line + " fill=\"none\"/>"), 20, 10) == [0, 0, 0])
        // A half-circle arc (sweep up) from (5,15) to (35,15): its top at y = 0 (radius 15).
        let arc = try draw("<path d=\"M5 15 A15 15 0 0 1 35 15 Z\" fill=\"#0f0\"/>")
        #expect(at(arc, 20, 2) == [0, 255, 0])
        #expect(at(arc, 20, 17) == [255, 255, 255])
        #expect(at(arc, 3, 2) == [255, 255, 255])
        // rotate(90 20 10) turns a wide bar upright.
        let bar = try draw(
            "<rect x=\"10\" y=\"9\" width=\"20\" height=\"2\" fill=\"#000\" transform=\"rotate(90 20 10)\"/>"
        )
        #expect(at(bar, 20, 2) == [0, 0, 0])
        #expect(at(bar, 12, 10) == [255, 255, 255])
        // A vertical gradient from black to white; group opacity and translate.
        let gradient = try draw(
            "<defs><linearGradient id=\"g\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\"><stop offset=\"0\" stop-color=\"#000\"/>"
                + "<stop offset=\"1\" stop-color=\"#fff\"/></linearGradient></defs>"
                + "<rect width=\"20\" height=\"20\" fill=\"url(#g)\"/>"
                + "<g transform=\"translate(30 10)\" opacity=\".5\"><circle r=\"6\" fill=\"#000\"/></g>"
        )
        #expect(at(gradient, 5, 0)[0] < 20)
        #expect(at(gradient, 5, 19)[0] > 235)
        #expect(near(at(gradient, 5, 10), [134, 134, 134], within: 8))
        #expect(near(at(gradient, 30, 10), [128, 128, 128], within: 1))
    }
}
