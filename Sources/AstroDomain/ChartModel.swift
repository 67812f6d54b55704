import Foundation

/// The id of one element of a chart (a planet, point, house or aspect): a UUID derived from the
/// chart's content, so the same input always gives the same ids. Encoded as a lowercase string.
public struct ChartElementID: TypedID {
    public let uuid: UUID
    public init(_ uuid: UUID) { self.uuid = uuid }
}

/// A computed natal chart: the `birth_charts.chart_data` JSON of CONTRACT.md.
///
/// Keys and value types are the contract's. Beyond the seed model it carries `points` (only when
/// points were requested), `zodiac`, `dstPolicyApplied` (only when a DST policy resolved the local
/// time), `houseSystemRequested` (only when it differs from `houseSystem`), `engineVersion` and
/// `ephemerisVersion`. Dates are ISO 8601 strings in UTC whatever the encoder's date strategy;
/// `jsonBytes()` / `jsonData()` write the sorted, stable form of `JSONCoding.encoder` fast.
public struct NatalChart: Sendable, Hashable, Codable {
    /// Local birth date as given, `yyyy-MM-dd`.
    public var birthDate: String
    /// Local birth time as given, `HH:mm`.
    public var birthTime: String
    /// IANA time zone of the birthplace, as given.
    public var timezone: String
    /// The birth instant.
    public var utc: Date
    /// `swe_julday` of the UTC date and time (UTC taken as UT).
    public var julianDayUT: Double
    public var latitude: Double
    public var longitude: Double
    public var locationName: String
    /// The system whose cusps are in `houses`.
    public var houseSystem: ChartHouseSystem
    /// The system asked for, present only when it differs from `houseSystem` (polar fallback).
    public var houseSystemRequested: ChartHouseSystem?
    /// What the reader should know about this chart; empty when nothing.
    public var warnings: [Warning]
    /// The ten planets, Sun first.
    public var planets: [Planet]
    /// The requested optional points, in `ChartPoint` order; `nil` (no key) when none requested.
    public var points: [Point]?
    /// The twelve houses, 1 first.
    public var houses: [House]
    /// Aspects between the ten planets, in planet order of the pair.
    public var aspects: [Aspect]
    /// Ecliptic longitude of the ascendant.
    public var ascendant: Double
    /// Ecliptic longitude of the midheaven.
    public var midheaven: Double
    /// Tropical or sidereal (`"tropical"`, `"sidereal:lahiri"`).
    public var zodiac: ZodiacSystem
    /// The policy that resolved a local time in a DST gap or overlap; `nil` (no key) otherwise.
    public var dstPolicyApplied: DSTPolicy?
    /// The chart engine that computed this chart, e.g. `chart-engine/1`.
    public var engineVersion: String
    /// The ephemeris library, e.g. `swisseph/2.10.03`.
    public var ephemerisVersion: String
    /// When the chart was computed.
    public var calculatedAt: Date

    public init(
        birthDate: String,
        birthTime: String,
        timezone: String,
        utc: Date,
        julianDayUT: Double,
        latitude: Double,
        longitude: Double,
        locationName: String,
        houseSystem: ChartHouseSystem,
        houseSystemRequested: ChartHouseSystem? = nil,
        warnings: [Warning] = [],
        planets: [Planet],
        points: [Point]? = nil,
        houses: [House],
        aspects: [Aspect],
        ascendant: Double,
        midheaven: Double,
        zodiac: ZodiacSystem = .tropical,
        dstPolicyApplied: DSTPolicy? = nil,
        engineVersion: String,
        ephemerisVersion: String,
        calculatedAt: Date
    ) {
        self.birthDate = birthDate
        self.birthTime = birthTime
        self.timezone = timezone
        self.utc = utc
        self.julianDayUT = julianDayUT
        self.latitude = latitude
        self.longitude = longitude
        self.locationName = locationName
        self.houseSystem = houseSystem
        self.houseSystemRequested = houseSystemRequested
        self.warnings = warnings
        self.planets = planets
        self.points = points
        self.houses = houses
        self.aspects = aspects
        self.ascendant = ascendant
        self.midheaven = midheaven
        self.zodiac = zodiac
        self.dstPolicyApplied = dstPolicyApplied
        self.engineVersion = engineVersion
        self.ephemerisVersion = ephemerisVersion
        self.calculatedAt = calculatedAt
    }

    /// Something the reader of a chart should know: `{"code", "message"}`.
    public struct Warning: Sendable, Hashable, Codable {
        /// Stable machine-readable code, e.g. `house-system-fallback`.
        public var code: String
        /// What happened, for people.
        public var message: String

        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }

        /// The house system asked for is undefined here; `houseSystem` names the one used.
        public static let houseSystemFallback = "house-system-fallback"
        /// The local birth time was in a DST gap or overlap and the request's `dstPolicy` chose
        /// the instant in `utc`.
        public static let dstPolicyApplied = "dst-policy-applied"
    }

    /// A body's place in the chart; the same shape for planets and optional points.
    public struct Placement<Name>: Sendable, Hashable, Codable
    where Name: Sendable & Hashable & Codable {
        public var id: ChartElementID
        public var name: Name
        /// Ecliptic longitude in [0, 360).
        public var longitude: Double
        /// Ecliptic latitude.
        public var latitude: Double
        public var sign: ZodiacSign
        /// The house (1…12) holding `longitude`.
        public var house: Int
        /// Whether the body moves backwards along the ecliptic (`speed` < 0).
        public var isRetrograde: Bool
        /// Longitude speed in degrees per day.
        public var speed: Double

        public init(
            id: ChartElementID,
            name: Name,
            longitude: Double,
            latitude: Double,
            sign: ZodiacSign,
            house: Int,
            isRetrograde: Bool,
            speed: Double
        ) {
            self.id = id
            self.name = name
            self.longitude = longitude
            self.latitude = latitude
            self.sign = sign
            self.house = house
            self.isRetrograde = isRetrograde
            self.speed = speed
        }
    }

    /// One of the ten planets in the chart.
    public typealias Planet = Placement<PlanetName>
    /// A requested optional point in the chart.
    public typealias Point = Placement<ChartPoint>

    /// A house cusp.
    public struct House: Sendable, Hashable, Codable {
        public var id: ChartElementID
        /// 1…12.
        public var number: Int
        /// Ecliptic longitude of the cusp, in [0, 360).
        public var cusp: Double
        public var sign: ZodiacSign

        public init(id: ChartElementID, number: Int, cusp: Double, sign: ZodiacSign) {
            self.id = id
            self.number = number
            self.cusp = cusp
            self.sign = sign
        }
    }

    /// An aspect between two planets; `planet1` comes before `planet2` in `PlanetName` order.
    public struct Aspect: Sendable, Hashable, Codable {
        public var id: ChartElementID
        public var planet1: PlanetName
        public var planet2: PlanetName
        public var type: AspectType
        /// |separation − aspect angle| in degrees.
        public var orb: Double
        /// Whether the orb is shrinking (see `ChartMath.aspect(between:and:)`).
        public var isApplying: Bool

        public init(
            id: ChartElementID,
            planet1: PlanetName,
            planet2: PlanetName,
            type: AspectType,
            orb: Double,
            isApplying: Bool
        ) {
            self.id = id
            self.planet1 = planet1
            self.planet2 = planet2
            self.type = type
            self.orb = orb
            self.isApplying = isApplying
        }
    }

    /// The planet of that name, when the chart has it.
    public func planet(_ name: PlanetName) -> Planet? { planets.first { $0.name == name } }

    /// The chart without its computation time, for comparing two computations of one input.
    public var ignoringCalculatedAt: NatalChart {
        var copy = self
        copy.calculatedAt = Date(timeIntervalSince1970: 0)
        return copy
    }

    private enum CodingKeys: String, CodingKey {
        case birthDate, birthTime, timezone, utc, julianDayUT, latitude, longitude, locationName
        case houseSystem, houseSystemRequested, warnings, planets, points, houses, aspects
        case ascendant, midheaven, zodiac, dstPolicyApplied, engineVersion, ephemerisVersion, calculatedAt
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        birthDate = try container.decode(String.self, forKey: .birthDate)
        birthTime = try container.decode(String.self, forKey: .birthTime)
        timezone = try container.decode(String.self, forKey: .timezone)
        utc = try Self.decodeDate(container, .utc)
        julianDayUT = try container.decode(Double.self, forKey: .julianDayUT)
        latitude = try container.decode(Double.self, forKey: .latitude)
        longitude = try container.decode(Double.self, forKey: .longitude)
        locationName = try container.decode(String.self, forKey: .locationName)
        houseSystem = try container.decode(ChartHouseSystem.self, forKey: .houseSystem)
        houseSystemRequested = try container.decodeIfPresent(ChartHouseSystem.self, forKey: .houseSystemRequested)
        warnings = try container.decode([Warning].self, forKey: .warnings)
        planets = try container.decode([Planet].self, forKey: .planets)
        points = try container.decodeIfPresent([Point].self, forKey: .points)
        houses = try container.decode([House].self, forKey: .houses)
        aspects = try container.decode([Aspect].self, forKey: .aspects)
        ascendant = try container.decode(Double.self, forKey: .ascendant)
        midheaven = try container.decode(Double.self, forKey: .midheaven)
        // Charts stored before these keys existed are tropical charts of an unnamed engine.
        zodiac = try container.decodeIfPresent(ZodiacSystem.self, forKey: .zodiac) ?? .tropical
        dstPolicyApplied = try container.decodeIfPresent(DSTPolicy.self, forKey: .dstPolicyApplied)
        engineVersion = try container.decodeIfPresent(String.self, forKey: .engineVersion) ?? ""
        ephemerisVersion = try container.decodeIfPresent(String.self, forKey: .ephemerisVersion) ?? ""
        calculatedAt = try Self.decodeDate(container, .calculatedAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(birthDate, forKey: .birthDate)
        try container.encode(birthTime, forKey: .birthTime)
        try container.encode(timezone, forKey: .timezone)
        try container.encode(ISO8601.string(from: utc), forKey: .utc)
        try container.encode(julianDayUT, forKey: .julianDayUT)
        try container.encode(latitude, forKey: .latitude)
        try container.encode(longitude, forKey: .longitude)
        try container.encode(locationName, forKey: .locationName)
        try container.encode(houseSystem, forKey: .houseSystem)
        try container.encodeIfPresent(houseSystemRequested, forKey: .houseSystemRequested)
        try container.encode(warnings, forKey: .warnings)
        try container.encode(planets, forKey: .planets)
        try container.encodeIfPresent(points, forKey: .points)
        try container.encode(houses, forKey: .houses)
        try container.encode(aspects, forKey: .aspects)
        try container.encode(ascendant, forKey: .ascendant)
        try container.encode(midheaven, forKey: .midheaven)
        try container.encode(zodiac, forKey: .zodiac)
        try container.encodeIfPresent(dstPolicyApplied, forKey: .dstPolicyApplied)
        try container.encode(engineVersion, forKey: .engineVersion)
        try container.encode(ephemerisVersion, forKey: .ephemerisVersion)
        try container.encode(ISO8601.string(from: calculatedAt), forKey: .calculatedAt)
    }

    /// The JSON of the chart as stored and printed: sorted keys, ISO 8601 dates; the bytes of
    /// `jsonBytes()`, identical to `JSONCoding.encoder.encode(self)`.
    /// - Throws: `EncodingError.invalidValue` for a NaN or infinite number.
    public func jsonData() throws -> Data { Data(try jsonBytes()) }

    private static func decodeDate(_ container: KeyedDecodingContainer<CodingKeys>, _ key: CodingKeys) throws -> Date {
        let text = try container.decode(String.self, forKey: key)
        guard let date = ISO8601.date(from: text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key,
                in: container,
                debugDescription: "expected an ISO 8601 date, got \(InputQuote.short(text))"
            )
        }
        return date
    }
}
