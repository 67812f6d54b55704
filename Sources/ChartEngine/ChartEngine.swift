import AstroDomain
import Ephemeris
import Foundation
import ZoneInfo

/// Turns birth data into the NatalChart of CONTRACT.md.
///
/// Steps: validate the birth data; read the local birth time in its time zone (historical
/// offsets, DST gaps and overlaps resolved only by `dstPolicy`); compute the Julian day of the
/// UTC instant; ask the ephemeris for the ten planets, the requested points and the houses;
/// place each body in a sign and a house (by longitude between cusps); find the aspects between
/// the ten planets. Identical input gives identical charts apart from `calculatedAt`: element ids
/// are derived from the SHA-256 of the input that `inputDigest(_:)` prints.
public struct ChartEngine: Sendable {
    /// The version of the chart rules, in every chart (`engineVersion`) and in every input digest.
    public static let version = "chart-engine/1"

    /// The ephemeris library's version as charts record it (`ephemerisVersion`); read from libswe
    /// once, as every chart and every digest needs it.
    public static let ephemerisVersion: String = "swisseph/" + Ephemeris.libraryVersion

    /// The ephemeris the engine computes with.
    public let ephemeris: Ephemeris

    /// Where the birth time zones' rules come from.
    public let timeZones: any TimeZoneRulesProvider

    /// - Parameters:
    ///   - ephemeris: a shared ephemeris (create one at startup).
    ///   - timeZones: where time zones come from. The default, `SystemTimeZones.shared`, reads
    ///     the system database (`/usr/share/zoneinfo`, with pre-1970 history such as Amsterdam
    ///     Mean Time) and falls back to Foundation's `TimeZone` for zones without a file there
    ///     (macOS, containers without `tzdata`); `FoundationTimeZones()` uses Foundation only.
    public init(ephemeris: Ephemeris, timeZones: any TimeZoneRulesProvider = SystemTimeZones.shared) {
        self.ephemeris = ephemeris
        self.timeZones = timeZones
    }

    /// Computes a natal chart; the ephemeris work runs on the ephemeris' own threads.
    /// - Parameters:
    ///   - birth: the birth data (validated here again).
    ///   - calculatedAt: the chart's `calculatedAt`.
    /// - Returns: the chart.
    /// - Throws: `ChartError`: a validation code, `nonexistent-local-time` / `ambiguous-local-time`
    ///   (no `dstPolicy`), `ephemeris-unavailable` or `calculation-failed`.
    public func chart(for birth: BirthData, calculatedAt: Date = Date()) async throws(ChartError) -> NatalChart {
        try await chartWithInputDigest(for: birth, calculatedAt: calculatedAt).chart
    }

    /// Computes a natal chart, as `chart(for:calculatedAt:)`, and gives the input digest its ids
    /// were derived from — what `inputDigest(_:)` returns for the same birth data — without
    /// hashing the input a second time.
    /// - Returns: the chart and its input digest (64 lowercase hex digits).
    /// - Throws: as `chart(for:calculatedAt:)`.
    public func chartWithInputDigest(
        for birth: BirthData,
        calculatedAt: Date = Date()
    ) async throws(ChartError) -> (chart: NatalChart, inputDigest: String) {
        let input = try PreparedInput(birth, timeZones: timeZones)
        let positions: ChartPositions
        do {
            positions = try await ephemeris.positions(
                julianDayUT: input.julianDayUT,
                latitude: input.birth.latitude,
                longitude: input.birth.longitude,
                bodies: input.bodies,
                houseSystem: input.houseSystem,
                zodiac: input.zodiac
            )
        } catch {
            throw ChartError(error)
        }
        let chart = try Self.assemble(input, positions: positions, calculatedAt: calculatedAt)
        return (chart, SHA256.hex(input.digest))
    }

    /// Computes a natal chart synchronously on the calling thread (benchmarks, dedicated threads).
    /// - Parameters: as `chart(for:calculatedAt:)`.
    /// - Returns: the chart.
    /// - Throws: as `chart(for:calculatedAt:)`.
    /// - Important: blocks the calling thread for the ephemeris computation: never call it from
    ///   a task on the Swift concurrency pool (see `Ephemeris.positionsOnCurrentThread`).
    public func chartOnCurrentThread(for birth: BirthData, calculatedAt: Date = Date()) throws(ChartError) -> NatalChart
    {
        let input = try PreparedInput(birth, timeZones: timeZones)
        let positions: ChartPositions
        do {
            positions = try ephemeris.positionsOnCurrentThread(
                julianDayUT: input.julianDayUT,
                latitude: input.birth.latitude,
                longitude: input.birth.longitude,
                bodies: input.bodies,
                houseSystem: input.houseSystem,
                zodiac: input.zodiac
            )
        } catch {
            throw ChartError(error)
        }
        return try Self.assemble(input, positions: positions, calculatedAt: calculatedAt)
    }

    /// A stable hex digest (SHA-256) of everything a chart depends on: the engine version, the
    /// ephemeris version and the normalized birth data (date, time, zone, coordinates, location
    /// name, house system, DST policy, points, zodiac; not the person's name, which no chart
    /// holds). Two inputs with the same digest give the same chart apart from `calculatedAt`, so
    /// a recomputation with an unchanged digest changes nothing.
    /// - Parameter birth: the birth data; normalized first when valid (name and location trimmed,
    ///   points in canonical order), used as given otherwise.
    /// - Returns: 64 lowercase hex digits.
    public static func inputDigest(_ birth: BirthData) -> String {
        SHA256.hex(SHA256.hash(canonicalInputBytes((try? birth.validated()) ?? birth)))
    }

    /// The text the input digest hashes: one `key:length:value` line per field, so no value can
    /// imitate another field.
    static func canonicalInput(_ birth: BirthData) -> String {
        String(decoding: canonicalInputBytes(birth), as: UTF8.self)
    }

    /// The UTF-8 bytes of `canonicalInput(_:)`, built without intermediate strings.
    static func canonicalInputBytes(_ birth: BirthData) -> [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(256 + birth.locationName.utf8.count)
        func field(_ key: StaticString, _ value: String) {
            key.withUTF8Buffer { text.append(contentsOf: $0) }
            text.append(UInt8(ascii: ":"))
            appendDecimal(value.utf8.count, to: &text)
            text.append(UInt8(ascii: ":"))
            text.append(contentsOf: value.utf8)
            text.append(UInt8(ascii: "\n"))
        }
        field("engine", version)
        field("ephemeris", ephemerisVersion)
        field("birthDate", birth.birthDate)
        field("birthTime", birth.birthTime)
        field("timezone", birth.timezone)
        // Adding 0 turns −0.0 into 0.0; `description` is the shortest exact decimal.
        field("latitude", (birth.latitude + 0).description)
        field("longitude", (birth.longitude + 0).description)
        field("locationName", birth.locationName)
        field("houseSystem", birth.houseSystem.rawValue)
        field("dstPolicy", birth.dstPolicy?.rawValue ?? "")
        field("points", birth.points.map(\.rawValue).joined(separator: ","))
        field("zodiac", birth.zodiac.rawValue)
        return text
    }

    /// Appends the decimal digits of a non-negative number.
    private static func appendDecimal(_ value: Int, to text: inout [UInt8]) {
        if value >= 10 { appendDecimal(value / 10, to: &text) }
        text.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value % 10))
    }

    /// Builds the chart from validated input and the ephemeris' positions.
    static func assemble(
        _ input: PreparedInput,
        positions: ChartPositions,
        calculatedAt: Date
    ) throws(ChartError) -> NatalChart {
        let birth = input.birth
        let houses = positions.houses
        guard houses.cusps.count == 12 else {
            throw .calculationFailed(
                message: "the ephemeris returned \(houses.cusps.count) house cusps instead of 12"
            )
        }
        let cusps = houses.cusps.map(ChartMath.normalizedDegrees)
        // Checked above: there are twelve cusps.
        let houseCusps = ChartMath.HouseCusps(cusps)!
        let ids = input.ids

        typealias BodyName = RawRepresentable<String> & Sendable & Hashable & Codable
        func placement<Name: BodyName>(
            _ name: Name,
            of body: CelestialBody,
            id: ElementIDSeed.Tag
        ) throws(ChartError)
            -> NatalChart.Placement<Name>
        {
            guard let position = positions[body] else {
                throw .calculationFailed(
                    message: "the ephemeris returned no position for \(body.rawValue)"
                )
            }
            let longitude = ChartMath.normalizedDegrees(position.longitude)
            return NatalChart.Placement(
                id: ids.id(id),
                name: name,
                longitude: longitude,
                latitude: position.latitude,
                sign: ZodiacSign(longitude: longitude),
                house: houseCusps.house(ofLongitude: longitude),
                isRetrograde: position.longitudeSpeed < 0,
                speed: position.longitudeSpeed
            )
        }

        var planets: [NatalChart.Planet] = []
        planets.reserveCapacity(PlanetName.allCases.count)
        for name in PlanetName.allCases {
            planets.append(try placement(name, of: name.celestialBody, id: .planet(name)))
        }
        var points: [NatalChart.Point] = []
        points.reserveCapacity(birth.points.count)
        for point in birth.points { points.append(try placement(point, of: point.celestialBody, id: .point(point))) }

        let chartHouses = cusps.enumerated().map { index, cusp in
            NatalChart.House(
                id: ids.id(.house(index + 1)),
                number: index + 1,
                cusp: cusp,
                sign: ZodiacSign(longitude: cusp)
            )
        }

        var aspects: [NatalChart.Aspect] = []
        aspects.reserveCapacity(planets.count * (planets.count - 1) / 2)
        for (firstIndex, first) in planets.enumerated() {
            for second in planets[(firstIndex + 1)...] {
                guard
                    let match = ChartMath.aspect(
                        between: (first.longitude, first.speed),
                        and: (second.longitude, second.speed)
                    )
                else { continue }
                aspects.append(
                    NatalChart.Aspect(
                        id: ids.id(.aspect(first.name, second.name)),
                        planet1: first.name,
                        planet2: second.name,
                        type: match.type,
                        orb: match.orb,
                        isApplying: match.isApplying
                    )
                )
            }
        }

        var warnings: [NatalChart.Warning] = []
        if let note = input.instant.note {
            warnings.append(NatalChart.Warning(code: NatalChart.Warning.dstPolicyApplied, message: note))
        }
        let used = ChartHouseSystem(houses.system)
        var requested: ChartHouseSystem?
        if used != birth.houseSystem {
            requested = birth.houseSystem
            let reason =
                birth.houseSystem.isUndefinedInsidePolarCircles && abs(birth.latitude) >= 66
                ? "is undefined at latitude \(birth.latitude) (inside the polar circles)"
                : "could not be computed here"
            var message = "\(birth.houseSystem.displayName) \(reason); \(used.displayName) cusps are used instead"
            if let detail = houses.fallbackReason, !detail.isEmpty { message += " (\(detail))" }
            warnings.append(NatalChart.Warning(code: NatalChart.Warning.houseSystemFallback, message: message))
        }

        return NatalChart(
            birthDate: birth.birthDate,
            birthTime: birth.birthTime,
            timezone: birth.timezone,
            utc: input.instant.utc,
            julianDayUT: input.julianDayUT,
            latitude: birth.latitude,
            longitude: birth.longitude,
            locationName: birth.locationName,
            houseSystem: used,
            houseSystemRequested: requested,
            warnings: warnings,
            planets: planets,
            points: birth.points.isEmpty ? nil : points,
            houses: chartHouses,
            aspects: aspects,
            ascendant: ChartMath.normalizedDegrees(houses.ascendant),
            midheaven: ChartMath.normalizedDegrees(houses.midheaven),
            zodiac: birth.zodiac,
            dstPolicyApplied: input.instant.dstPolicyApplied,
            engineVersion: version,
            ephemerisVersion: ephemerisVersion,
            calculatedAt: calculatedAt
        )
    }
}

/// Birth data validated and read as an instant: everything the ephemeris call needs.
struct PreparedInput: Sendable {
    var birth: BirthData
    var instant: BirthInstant
    var julianDayUT: Double
    /// The SHA-256 of `ChartEngine.canonicalInput(_:)`: the input digest.
    var digest: [UInt8]
    /// Seeds the element ids: derived from `digest`.
    var ids: ElementIDSeed
    var bodies: [CelestialBody]
    var houseSystem: HouseSystem
    var zodiac: Zodiac

    /// The bodies of the ten planets, Sun first (built once, not per chart).
    private static let planetBodies = PlanetName.allCases.map(\.celestialBody)

    init(_ birth: BirthData, timeZones: some TimeZoneRulesProvider) throws(ChartError) {
        do {
            self.birth = try birth.validated(timeZones: timeZones)
            self.instant = try self.birth.resolveInstant(timeZones: timeZones)
        } catch {
            throw ChartError.invalidInput(error)
        }
        julianDayUT = Ephemeris.julianDayUT(instant.utc)
        digest = SHA256.hash(ChartEngine.canonicalInputBytes(self.birth))
        ids = ElementIDSeed(digest: digest)
        bodies =
            self.birth.points.isEmpty
            ? Self.planetBodies : Self.planetBodies + self.birth.points.map(\.celestialBody)
        houseSystem = HouseSystem(self.birth.houseSystem)
        zodiac = Zodiac(self.birth.zodiac)
    }
}

extension PlanetName {
    /// The ephemeris body of this planet.
    var celestialBody: CelestialBody {
        switch self {
        case .sun: .sun
        case .moon: .moon
        case .mercury: .mercury
        case .venus: .venus
        case .mars: .mars
        case .jupiter: .jupiter
        case .saturn: .saturn
        case .uranus: .uranus
        case .neptune: .neptune
        case .pluto: .pluto
        }
    }
}

extension ChartPoint {
    /// The ephemeris body of this point.
    var celestialBody: CelestialBody {
        switch self {
        case .meanNode: .meanNode
        case .trueNode: .trueNode
        case .chiron: .chiron
        case .meanLilith: .meanLilith
        }
    }
}

extension HouseSystem {
    init(_ system: ChartHouseSystem) {
        switch system {
        case .placidus: self = .placidus
        case .koch: self = .koch
        case .porphyry: self = .porphyry
        case .regiomontanus: self = .regiomontanus
        case .campanus: self = .campanus
        case .equal: self = .equal
        case .wholeSign: self = .wholeSign
        }
    }
}

extension ChartHouseSystem {
    init(_ system: HouseSystem) {
        switch system {
        case .placidus: self = .placidus
        case .koch: self = .koch
        case .porphyry: self = .porphyry
        case .regiomontanus: self = .regiomontanus
        case .campanus: self = .campanus
        case .equal: self = .equal
        case .wholeSign: self = .wholeSign
        }
    }
}

extension Zodiac {
    init(_ zodiac: ZodiacSystem) {
        switch zodiac {
        case .tropical: self = .tropical
        case .sidereal(.lahiri): self = .sidereal(.lahiri)
        case .sidereal(.faganBradley): self = .sidereal(.faganBradley)
        case .sidereal(.raman): self = .sidereal(.raman)
        }
    }
}
