import Foundation

/// The stored form of a transit result (issue 29, F7): the same `TransitReport` in about a fifth
/// of the bytes. The API serves the full document (`expandedJSON`); only `chart_results` holds
/// this form.
///
/// A year of transits is ~1,600 transits and ~400 ingresses, mostly the Moon's; as objects with
/// named members and ISO 8601 instants that is ~412 KB of JSON. Here each transit and ingress is
/// an array of numbers in a fixed order: names as their index in this format's own tables
/// (`points`, `aspects`, `signs`: written here, not taken from the enums' order, so that a new
/// case cannot change what a stored number means), instants as whole milliseconds after `from`
/// (the full form's precision, so expanding gives back exactly the document the engine's report
/// encodes to):
///
/// ```json
/// {"format": "transits/compact-1", "from": "…", "to": "…", "orbRule": "seed",
///  "engineVersion": "…", "ephemerisVersion": "…",
///  "transits": [[transiting, natal, aspect, angle, orb, entersOrb|null, leavesOrb|null,
///                [exact, …], retrograde bit mask of the hits], …],
///  "ingresses": [[planet, sign, house (0: a sign ingress), instant, retrograde 0|1], …]}
/// ```
extension TransitReport {
    /// The `format` member that marks the compact form.
    public static let compactFormat = "transits/compact-1"

    /// The compact form's names, by index: Sun…Pluto, ASC, MC.
    static let compactPoints = [
        "Sun", "Moon", "Mercury", "Venus", "Mars", "Jupiter", "Saturn", "Uranus", "Neptune", "Pluto", "ASC", "MC",
    ]
    /// The compact form's aspects, by index.
    static let compactAspects = ["Conjunction", "Opposition", "Trine", "Square", "Sextile"]
    /// The compact form's signs, by index, Aries first.
    static let compactSigns = [
        "Aries", "Taurus", "Gemini", "Cancer", "Leo", "Virgo", "Libra", "Scorpio", "Sagittarius", "Capricorn",
        "Aquarius", "Pisces",
    ]
    /// The most hits one transit may have in the compact form (the bit mask's width).
    static let maxCompactHits = 52

    /// Why a report or a stored document has no compact form.
    public struct CompactFormError: Error, Sendable, Hashable, CustomStringConvertible {
        /// What was wrong, with the member's path.
        public var message: String
        public var description: String { message }
    }

    /// The report in the compact stored form.
    /// - Throws: `CompactFormError` for a name outside the format's tables or a transit with more
    ///   than 52 hits (the engine gives neither).
    public func compactJSON() throws(CompactFormError) -> JSONValue {
        let base = Self.milliseconds(from)
        func offset(_ date: Date?) -> JSONValue {
            guard let date else { return .null }
            return .number(Double(Self.milliseconds(date) - base))
        }
        func index(_ name: String, in table: [String]) throws(CompactFormError) -> JSONValue {
            guard let index = table.firstIndex(of: name) else {
                throw CompactFormError(message: "\(InputQuote.short(name)) has no index in the compact form")
            }
            return .number(Double(index))
        }
        var transits: [JSONValue] = []
        transits.reserveCapacity(self.transits.count)
        for transit in self.transits {
            guard transit.hits.count <= Self.maxCompactHits else {
                throw CompactFormError(message: "a transit has \(transit.hits.count) hits, more than the form holds")
            }
            var mask: Int64 = 0
            for (position, hit) in transit.hits.enumerated() where hit.isRetrograde { mask |= 1 << Int64(position) }
            transits.append(
                .array([
                    try index(transit.transiting.rawValue, in: Self.compactPoints),
                    try index(transit.natal.description, in: Self.compactPoints),
                    try index(transit.aspect.rawValue, in: Self.compactAspects), .number(transit.angle),
                    .number(transit.orb), offset(transit.entersOrb), offset(transit.leavesOrb),
                    .array(transit.hits.map { offset($0.exact) }), .number(Double(mask)),
                ])
            )
        }
        var ingresses: [JSONValue] = []
        ingresses.reserveCapacity(self.ingresses.count)
        for ingress in self.ingresses {
            ingresses.append(
                .array([
                    try index(ingress.planet.rawValue, in: Self.compactPoints),
                    try index(ingress.sign.rawValue, in: Self.compactSigns),
                    .number(Double(ingress.kind == .house ? ingress.house ?? 0 : 0)), offset(ingress.instant),
                    .number(ingress.isRetrograde ? 1 : 0),
                ])
            )
        }
        return .object([
            "format": .string(Self.compactFormat),
            "from": .string(ISO8601.string(from: from)),
            "to": .string(ISO8601.string(from: to)),
            "orbRule": .string(orbRule),
            "engineVersion": .string(engineVersion),
            "ephemerisVersion": .string(ephemerisVersion),
            "transits": .array(transits),
            "ingresses": .array(ingresses),
        ])
    }

    /// Whether a stored document is in the compact form (older rows hold the full one).
    public static func isCompact(_ value: JSONValue) -> Bool {
        value["format"]?.stringValue == compactFormat
    }

    /// The report a compact document holds.
    /// - Throws: `CompactFormError` naming the first member that is not as `compactJSON` writes it.
    public init(compactJSON value: JSONValue) throws(CompactFormError) {
        func fail(_ path: String, _ what: String) -> CompactFormError {
            CompactFormError(message: "\(path): \(what)")
        }
        func text(_ value: JSONValue?, _ path: String) throws(CompactFormError) -> String {
            guard let text = value?.stringValue else { throw fail(path, "expected a string") }
            return text
        }
        func instant(_ value: JSONValue?, _ path: String) throws(CompactFormError) -> Date {
            guard let text = value?.stringValue, let date = ISO8601.date(from: text) else {
                throw fail(path, "expected an ISO 8601 instant")
            }
            return date
        }
        func whole(_ value: JSONValue?, _ path: String, _ range: ClosedRange<Double>) throws(CompactFormError) -> Int64
        {
            guard case .number(let number)? = value, number.rounded() == number, range.contains(number) else {
                throw fail(path, "expected a whole number in \(Int64(range.lowerBound))…\(Int64(range.upperBound))")
            }
            return Int64(number)
        }
        func number(_ value: JSONValue?, _ path: String) throws(CompactFormError) -> Double {
            guard case .number(let number)? = value, number.isFinite else { throw fail(path, "expected a number") }
            return number
        }
        func array(_ value: JSONValue?, _ path: String, count: Int? = nil) throws(CompactFormError) -> [JSONValue] {
            guard let items = value?.arrayValue, count.map({ items.count == $0 }) ?? true else {
                throw fail(path, count.map { "expected an array of \($0)" } ?? "expected an array")
            }
            return items
        }
        func name(_ value: JSONValue, _ path: String, in table: [String]) throws(CompactFormError) -> String {
            table[Int(try whole(value, path, 0...Double(table.count - 1)))]
        }
        guard Self.isCompact(value) else { throw fail("format", "expected \(Self.compactFormat)") }
        let from = try instant(value["from"], "from")
        let base = Self.milliseconds(from)
        // A century of milliseconds either way: anything else is not a stored instant.
        let span = 4e12
        func offset(_ value: JSONValue, _ path: String) throws(CompactFormError) -> Date? {
            if value == .null { return nil }
            return Date(timeIntervalSince1970: Double(base + (try whole(value, path, -span...span))) / 1000)
        }
        var transits: [Transit] = []
        for (position, item) in try array(value["transits"], "transits").enumerated() {
            let path = "transits[\(position)]"
            let fields = try array(item, path, count: 9)
            guard let transiting = PlanetName(rawValue: try name(fields[0], path + "[0]", in: Self.compactPoints))
            else { throw fail(path + "[0]", "expected a planet") }
            guard let natal = NatalTransitPoint(name: try name(fields[1], path + "[1]", in: Self.compactPoints)),
                let aspect = AspectType(rawValue: try name(fields[2], path + "[2]", in: Self.compactAspects))
            else { throw fail(path, "unknown natal point or aspect") }
            let exacts = try array(fields[7], path + "[7]")
            guard exacts.count <= Self.maxCompactHits else { throw fail(path + "[7]", "too many hits") }
            let mask = try whole(fields[8], path + "[8]", 0...Double(1 << Self.maxCompactHits))
            var hits: [TransitHit] = []
            for (index, exact) in exacts.enumerated() {
                guard let date = try offset(exact, path + "[7][\(index)]") else {
                    throw fail(path + "[7][\(index)]", "expected an instant")
                }
                hits.append(TransitHit(exact: date, isRetrograde: mask & (1 << Int64(index)) != 0))
            }
            transits.append(
                Transit(
                    transiting: transiting,
                    natal: natal,
                    aspect: aspect,
                    angle: try number(fields[3], path + "[3]"),
                    orb: try number(fields[4], path + "[4]"),
                    entersOrb: try offset(fields[5], path + "[5]"),
                    leavesOrb: try offset(fields[6], path + "[6]"),
                    hits: hits
                )
            )
        }
        var ingresses: [TransitIngress] = []
        for (position, item) in try array(value["ingresses"], "ingresses").enumerated() {
            let path = "ingresses[\(position)]"
            let fields = try array(item, path, count: 5)
            guard let planet = PlanetName(rawValue: try name(fields[0], path + "[0]", in: Self.compactPoints)) else {
                throw fail(path + "[0]", "expected a planet")
            }
            guard let sign = ZodiacSign(rawValue: try name(fields[1], path + "[1]", in: Self.compactSigns)) else {
                throw fail(path + "[1]", "expected a sign")
            }
            let house = Int(try whole(fields[2], path + "[2]", 0...12))
            guard let instant = try offset(fields[3], path + "[3]") else {
                throw fail(path + "[3]", "expected an instant")
            }
            ingresses.append(
                TransitIngress(
                    planet: planet,
                    kind: house == 0 ? .sign : .house,
                    instant: instant,
                    sign: sign,
                    house: house == 0 ? nil : house,
                    isRetrograde: try whole(fields[4], path + "[4]", 0...1) == 1
                )
            )
        }
        self.init(
            from: from,
            to: try instant(value["to"], "to"),
            orbRule: try text(value["orbRule"], "orbRule"),
            transits: transits,
            ingresses: ingresses,
            engineVersion: try text(value["engineVersion"], "engineVersion"),
            ephemerisVersion: try text(value["ephemerisVersion"], "ephemerisVersion")
        )
    }

    /// A stored transit result as the API serves it: a compact document expanded to the full
    /// `TransitReport` JSON; anything else (a row stored before the compact form) unchanged.
    /// - Parameter stored: the stored document's JSON text.
    /// - Returns: the full document's JSON text.
    /// - Throws: `CompactFormError` for a compact document that cannot be read.
    public static func expandedJSON(stored: String) throws(CompactFormError) -> String {
        // The compact form names itself in a member no full document has.
        guard stored.contains(compactFormat) else { return stored }
        guard let value = try? JSONValue.parse(Data(stored.utf8)), isCompact(value) else { return stored }
        let report = try TransitReport(compactJSON: value)
        guard let data = try? JSONCoding.encoder.encode(report) else {
            throw CompactFormError(message: "the report could not be encoded")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// Whole milliseconds since 1970, as `ISO8601.string(from:)` rounds them.
    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }
}
