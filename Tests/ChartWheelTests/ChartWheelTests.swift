import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import Testing

@testable import ChartWheel

#if canImport(FoundationXML)
import FoundationXML
#endif

/// One ephemeris for the whole test process.
private let engine: ChartEngine = {
    do {
        return ChartEngine(ephemeris: try Ephemeris())
    } catch {
        fatalError("the Swiss Ephemeris files are needed for these tests: \(error)")
    }
}()

private func chart(
    _ date: String,
    _ time: String,
    _ timezone: String,
    _ latitude: Double,
    _ longitude: Double,
    location: String = "Somewhere",
    houseSystem: ChartHouseSystem = .placidus,
    points: [ChartPoint] = []
) throws -> NatalChart {
    try engine.chartOnCurrentThread(
        for: BirthData(
            name: "Test",
            birthDate: date,
            birthTime: time,
            timezone: timezone,
            latitude: latitude,
            longitude: longitude,
            locationName: location,
            houseSystem: houseSystem,
            points: points
        ),
        calculatedAt: Date(timeIntervalSince1970: 0)
    )
}

/// Real charts: an ordinary one, two real stelliums, a polar one.
private func kyiv() throws -> NatalChart {
    try chart("1990-10-07", "15:00", "Europe/Kyiv", 50.4501, 30.5234, location: "Kyiv", points: ChartPoint.allCases)
}
/// 1962-02-05: Sun, Moon, Mercury, Venus, Mars, Jupiter and Saturn in Aquarius, six within 16°.
private func aquariusStellium() throws -> NatalChart {
    try chart("1962-02-05", "07:30", "Asia/Kolkata", 28.6139, 77.2090, location: "New Delhi")
}
/// 2020-01-12: Sun, Mercury, Saturn and Pluto within 2° in Capricorn, near the midheaven at Berlin noon.
private func capricornStellium() throws -> NatalChart {
    try chart("2020-01-12", "12:30", "Europe/Berlin", 52.52, 13.405, location: "Berlin", points: ChartPoint.allCases)
}
private func polar() throws -> NatalChart {
    try chart("1985-06-21", "12:00", "Europe/Oslo", 69.6492, 18.9553, location: "Tromsø")
}

/// The glyph and label boxes of one layout that overlap, by body name.
private func overlaps(_ layout: WheelLayout) -> [String] {
    var found: [String] = []
    let boxes = layout.bodies.flatMap { body in
        [
            ("\(body.ring) \(body.body.name) glyph", body.glyphBox),
            ("\(body.ring) \(body.body.name) label", body.labelBox),
        ]
    }
    for i in boxes.indices {
        for j in boxes.indices where j > i && boxes[i].1.overlaps(boxes[j].1) {
            found.append("\(boxes[i].0) × \(boxes[j].0)")
        }
    }
    return found
}

/// The largest number of ring bodies within any `width`-degree arc.
private func densest(_ longitudes: [Double], width: Double) -> Int {
    longitudes.map { start in
        longitudes.filter { ChartMath.normalizedDegrees($0 - start) <= width }.count
    }.max() ?? 0
}

/// Parses the SVG with Foundation's XML parser; returns the elements with their attributes
/// and the text of `<title>` and `<desc>`.
private final class SVGReader: NSObject, XMLParserDelegate {
    var elements: [(name: String, attributes: [String: String])] = []
    var texts: [String: String] = [:]
    private var current: String?

    func parser(
        _ parser: XMLParser,
        didStartElement elementName: String,
        namespaceURI: String?,
        qualifiedName qName: String?,
        attributes attributeDict: [String: String] = [:]
    ) {
        elements.append((elementName, attributeDict))
        current = elementName
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if let current, elements.count <= 4 { texts[current, default: ""] += string }
    }

    func parser(
        _ parser: XMLParser,
        didEndElement elementName: String,
        namespaceURI: String?,
        qualifiedName qName: String?
    ) {
        current = nil
    }

    static func read(_ svg: String) -> SVGReader? {
        let reader = SVGReader()
        let parser = XMLParser(data: Data(svg.utf8))
        parser.delegate = reader
        return parser.parse() ? reader : nil
    }
}

@Suite struct ChartWheelTests {
    @Test func sameInputGivesTheSameBytes() throws {
        let a = try ChartWheel.svg(.natal(try kyiv(), name: "Olena"))
        var later = try kyiv()
        later.calculatedAt = Date(timeIntervalSince1970: 1_800_000_000)
        let b = try ChartWheel.svg(.natal(later, name: "Olena"))
        #expect(a == b)
        let bi1 = try ChartWheel.svg(.biWheel(inner: try kyiv(), innerName: "A", outer: try polar(), outerName: "B"))
        let bi2 = try ChartWheel.svg(.biWheel(inner: try kyiv(), innerName: "A", outer: try polar(), outerName: "B"))
        #expect(bi1 == bi2)
        // A different chart gives different bytes (the test could fail).
        #expect(a != (try ChartWheel.svg(.natal(try polar(), name: "Olena"))))
    }

    @Test(arguments: WheelTheme.allCases)
    func wellFormedWithTitleDescriptionAndRole(theme: WheelTheme) throws {
        let inputs: [WheelInput] = [
            .natal(try kyiv(), name: "Olena", theme: theme),
            .natal(try aquariusStellium(), name: "Stellium", theme: theme),
            .natal(try polar(), name: "Polar", theme: theme),
            .biWheel(
                inner: try kyiv(),
                innerName: "Olena",
                outer: try capricornStellium(),
                outerName: "Sky",
                theme: theme
            ),
        ]
        for input in inputs {
            let svg = try ChartWheel.svg(input)
            let reader = try #require(SVGReader.read(svg), "not well-formed XML")
            let root = try #require(reader.elements.first)
            #expect(root.name == "svg")
            #expect(root.attributes["role"] == "img")
            #expect(root.attributes["aria-labelledby"] == "wheel-title wheel-desc")
            #expect(reader.elements[1].name == "title" && reader.elements[1].attributes["id"] == "wheel-title")
            #expect(reader.elements[2].name == "desc" && reader.elements[2].attributes["id"] == "wheel-desc")
            #expect(reader.texts["title"] == input.title)
            let desc = try #require(reader.texts["desc"])
            // The description lists every placement, the angles and the aspects.
            for body in input.inner.bodies { #expect(desc.contains(body.name + " ")) }
            #expect(desc.contains("Ascendant ") && desc.contains("Midheaven "))
            for aspect in input.aspects.prefix(3) { #expect(desc.contains(aspect.type.rawValue.lowercased())) }
            #expect(svg.utf8.count < ChartWheel.maxBytes)
        }
    }

    @Test func everyTextBoxIsInsideTheViewBox() throws {
        let inputs: [WheelInput] = [
            .natal(try kyiv(), name: "Olena"), .natal(try aquariusStellium(), name: "S"),
            .natal(try capricornStellium(), name: "C"), .natal(try polar(), name: "P"),
            .biWheel(inner: try kyiv(), innerName: "A", outer: try aquariusStellium(), outerName: "B"),
            .biWheel(inner: try capricornStellium(), innerName: "A", outer: try polar(), outerName: "B"),
            .natal(try kyiv(), name: String(repeating: "W", count: 500)),
        ]
        for input in inputs {
            let layout = try ChartWheel.layout(input)
            #expect(layout.textBoxes.count >= 12 + 2 * input.inner.bodies.count)
            for box in layout.textBoxes {
                #expect(
                    box.minX >= 0 && box.minY >= 0 && box.maxX <= layout.width && box.maxY <= layout.height,
                    "\(box)"
                )
            }
        }
    }

    @Test func realStelliumsHaveNoOverlappingLabels() throws {
        let aquarius = try aquariusStellium()
        let capricorn = try capricornStellium()
        // The premise: these are real stelliums.
        #expect(densest(aquarius.planets.map(\.longitude), width: 16) >= 6)
        #expect(densest(aquarius.planets.map(\.longitude), width: 10) >= 5)
        #expect(densest(capricorn.planets.map(\.longitude), width: 10) >= 4)
        for chart in [aquarius, capricorn, try kyiv(), try polar()] {
            let layout = try ChartWheel.layout(.natal(chart, name: "X"))
            #expect(overlaps(layout) == [])
        }
        // The crowd really was moved apart (drawn at their true places, the labels would collide).
        let moved = try ChartWheel.layout(.natal(aquarius, name: "X")).bodies.filter {
            abs(ChartMath.signedSeparation(from: $0.longitude, to: $0.displayLongitude)) > 1
        }
        #expect(moved.count >= 4)
        let bi = try ChartWheel.layout(.biWheel(inner: aquarius, innerName: "A", outer: capricorn, outerName: "C"))
        #expect(overlaps(bi) == [])
    }

    /// Six bodies within 10° and four more within 3° of each other, turned through every part
    /// of the wheel (beside the horizon the boxes stack, near the meridian they sit side by side).
    @Test func denseClustersAnywhereOnTheWheelStayApart() throws {
        let base = try kyiv()
        for ring in [false, true] {
            for turn in stride(from: 0.0, to: 360, by: 7.5) {
                let offsets = [0.0, 1.5, 3, 5, 7.5, 10, 40, 41, 42, 43]
                let bodies = offsets.enumerated().map { index, offset in
                    WheelBody(
                        key: "b\(index)",
                        name: "Body \(index)",
                        glyph: WheelGlyphs.planet(PlanetName.allCases[index]),
                        longitude: turn + offset,
                        isRetrograde: index % 3 == 0
                    )
                }
                let crowded = WheelRing(label: "crowd", bodies: bodies)
                let input =
                    ring
                    ? WheelInput(
                        title: "t",
                        subtitle: "s",
                        inner: WheelRing(chart: base, label: "base"),
                        aspects: [],
                        outer: crowded
                    )
                    : WheelInput(
                        title: "t",
                        subtitle: "s",
                        inner: WheelRing(
                            label: "crowd",
                            bodies: bodies,
                            cusps: base.houses.map(\.cusp),
                            ascendant: base.ascendant,
                            midheaven: base.midheaven
                        ),
                        aspects: []
                    )
                let layout = try ChartWheel.layout(input)
                #expect(overlaps(layout) == [], "turn \(turn), outer \(ring)")
                for box in layout.textBoxes {
                    #expect(box.minX >= 0 && box.minY >= 0 && box.maxX <= layout.width && box.maxY <= layout.height)
                }
                // Spreading keeps the order of the signs: no body jumps over its neighbour.
                let placed = layout.bodies.filter { $0.ring == (ring ? .outer : .inner) }
                let start = placed[0].displayLongitude
                let shown = placed.map { ChartMath.normalizedDegrees($0.displayLongitude - start) }
                #expect(shown == shown.sorted(), "turn \(turn)")
            }
        }
    }

    @Test func aLoneBodyStaysAtItsPlace() {
        let shown = WheelLayoutEngine.spread([10, 100, 250]) { _ in 5 }
        #expect(shown == [10, 100, 250])
        let crowd = WheelLayoutEngine.spread([358, 0, 2]) { _ in 5 }
        // A crowd across 0° is spread around its mean (0°) and keeps its order.
        #expect(abs(ChartMath.signedSeparation(from: 355, to: crowd[0])) < 1e-9)
        #expect(abs(ChartMath.signedSeparation(from: 0, to: crowd[1])) < 1e-9)
        #expect(abs(ChartMath.signedSeparation(from: 5, to: crowd[2])) < 1e-9)
    }

    @Test func hostileTextIsEscapedAndBounded() throws {
        var chart = try kyiv()
        chart.locationName =
            "</desc><script>alert('x')</script>&amp;\u{0}\u{1B}" + String(repeating: "Київ ", count: 5000)
        let svg = try ChartWheel.svg(.natal(chart, name: "<b>\"Olena\"</b>"))
        #expect(!svg.contains("<script"))
        #expect(!svg.contains("<b>"))
        #expect(svg.contains("&lt;script&gt;alert(&apos;x&apos;)&lt;/script&gt;&amp;amp;"))
        #expect(svg.contains("&lt;b&gt;&quot;Olena&quot;&lt;/b&gt;"))
        #expect(!svg.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" })
        let reader = try #require(SVGReader.read(svg))
        #expect(reader.elements.filter { $0.name == "script" }.isEmpty)
        // 25 000 characters of place name do not make a 25 000-character drawing.
        #expect(svg.utf8.count < 40_000)
    }

    @Test func biWheelHasBothRingsAndCrossAspects() throws {
        let inner = try kyiv()
        let outer = try aquariusStellium()
        let input = WheelInput.biWheel(inner: inner, innerName: "Olena", outer: outer, outerName: "Marco")
        let layout = try ChartWheel.layout(input)
        #expect(layout.bodies.filter { $0.ring == .inner }.count == inner.planets.count + (inner.points?.count ?? 0))
        #expect(layout.bodies.filter { $0.ring == .outer }.count == outer.planets.count)
        // Outer bodies are drawn outside the zodiac, inner ones inside.
        for body in layout.bodies {
            let cx = layout.width / 2
            let cy = 56 + layout.width / 2
            let x = (body.glyphBox.minX + body.glyphBox.maxX) / 2 - cx
            let y = (body.glyphBox.minY + body.glyphBox.maxY) / 2 - cy
            let radius = (x * x + y * y).squareRoot()
            #expect(body.ring == .outer ? radius > 370 : radius < 320)
        }
        // The fallback cross aspects: each pair within the seed's orb of an aspect angle.
        #expect(!input.crossAspects.isEmpty)
        for aspect in input.crossAspects {
            let a = try #require(
                inner.planets.first { $0.name.rawValue == aspect.first }?.longitude
                    ?? inner.points?.first { $0.name.rawValue == aspect.first }?.longitude
            )
            let b = try #require(outer.planets.first { $0.name.rawValue == aspect.second }?.longitude)
            let separation = abs(ChartMath.signedSeparation(from: a, to: b))
            #expect(abs(abs(separation - aspect.type.angle) - aspect.orb) < 1e-9)
            #expect(aspect.orb <= aspect.type.maxOrb)
        }
        let svg = try ChartWheel.svg(input)
        let reader = try #require(SVGReader.read(svg))
        let desc = try #require(reader.texts["desc"])
        #expect(desc.contains("Inner ring, Olena:") && desc.contains("Outer ring, Marco:"))
        #expect(desc.contains("Aspects between the rings:"))
        #expect(svg.contains("r=\"452\""))  // the outer band
    }

    @Test func glyphsAskForTextPresentation() {
        for sign in ZodiacSign.allCases { #expect(WheelGlyphs.sign(sign).unicodeScalars.last == "\u{FE0E}") }
        for planet in PlanetName.allCases { #expect(WheelGlyphs.planet(planet).unicodeScalars.last == "\u{FE0E}") }
        #expect(WheelGlyphs.sign(.aries).unicodeScalars.first == "\u{2648}")
        #expect(WheelGlyphs.sign(.pisces).unicodeScalars.first == "\u{2653}")
    }

    @Test func inputOutsideItsBoundsIsRefused() throws {
        let base = try kyiv()
        var ring = WheelRing(chart: base, label: "x")
        let many = (0..<25).map {
            WheelBody(key: "k\($0)", name: "n", glyph: "x", longitude: Double($0), isRetrograde: false)
        }
        func code(_ input: WheelInput) -> String? {
            do {
                _ = try ChartWheel.svg(input)
                return nil
            } catch { return error.code }
        }
        #expect(
            code(WheelInput(title: "t", subtitle: "s", inner: WheelRing(label: "x", bodies: many), aspects: []))
                == "wheel-too-many-bodies"
        )
        ring.bodies[0].longitude = .nan
        #expect(code(WheelInput(title: "t", subtitle: "s", inner: ring, aspects: [])) == "wheel-bad-number")
        ring = WheelRing(chart: base, label: "x")
        ring.cusps = [1, 2, 3]
        #expect(code(WheelInput(title: "t", subtitle: "s", inner: ring, aspects: [])) == "wheel-bad-cusps")
        ring = WheelRing(chart: base, label: "x")
        let stray = WheelAspect(first: "Sun", second: "Vulcan", type: .trine, orb: 1)
        #expect(code(WheelInput(title: "t", subtitle: "s", inner: ring, aspects: [stray])) == "wheel-unknown-body")
        #expect(
            code(WheelInput(title: "t", subtitle: "s", inner: ring, aspects: [], crossAspects: [stray]))
                == "wheel-unknown-body"
        )
        ring.bodies[1].key = "Sun"
        #expect(code(WheelInput(title: "t", subtitle: "s", inner: ring, aspects: [])) == "wheel-duplicate-key")
        ring = WheelRing(chart: base, label: "x")
        let aspects = [WheelAspect](
            repeating: WheelAspect(first: "Sun", second: "Moon", type: .trine, orb: 1),
            count: 301
        )
        #expect(code(WheelInput(title: "t", subtitle: "s", inner: ring, aspects: aspects)) == "wheel-too-many-aspects")
    }

    /// The largest input accepted stays under `maxBytes`.
    @Test func theLargestWheelIsBounded() throws {
        let long = String(repeating: "Ж<&", count: 400)
        let bodies = (0..<WheelInput.maxBodiesPerRing).map {
            WheelBody(key: "k\($0)", name: long, glyph: long, longitude: Double($0) * 15 + 0.5, isRetrograde: true)
        }
        var aspects: [WheelAspect] = []
        for i in 0..<WheelInput.maxBodiesPerRing {
            for j in 0..<WheelInput.maxBodiesPerRing where aspects.count < WheelInput.maxAspects {
                aspects.append(WheelAspect(first: "k\(i)", second: "k\(j)", type: .square, orb: 1))
            }
        }
        let ring = WheelRing(
            label: long,
            bodies: bodies,
            cusps: (0..<12).map { Double($0) * 30 },
            ascendant: 0,
            midheaven: 270
        )
        let input = WheelInput(
            title: long,
            subtitle: long,
            inner: ring,
            aspects: Array(aspects.prefix(150)),
            outer: ring,
            crossAspects: Array(aspects.prefix(150))
        )
        let svg = try ChartWheel.svg(input)
        #expect(svg.utf8.count < ChartWheel.maxBytes)
        #expect(SVGReader.read(svg) != nil)
        #expect(overlaps(try ChartWheel.layout(input)) == [])
    }
}
