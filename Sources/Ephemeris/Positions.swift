/// The position of one body at one instant, as libswe returns it.
///
/// Apparent geocentric ecliptic coordinates of the date (tropical or sidereal, as requested), with speeds
/// (`SEFLG_SPEED`).
public struct BodyPosition: Sendable, Hashable {
    /// The body.
    public var body: CelestialBody
    /// Ecliptic longitude in degrees, in [0, 360).
    public var longitude: Double
    /// Ecliptic latitude in degrees.
    public var latitude: Double
    /// Distance from the Earth in astronomical units.
    public var distance: Double
    /// Speed in longitude in degrees per day; negative while the body is retrograde.
    public var longitudeSpeed: Double
    /// Speed in latitude in degrees per day.
    public var latitudeSpeed: Double
    /// Speed in distance in astronomical units per day.
    public var distanceSpeed: Double

    /// Creates a position from its parts.
    public init(
        body: CelestialBody,
        longitude: Double,
        latitude: Double,
        distance: Double,
        longitudeSpeed: Double,
        latitudeSpeed: Double,
        distanceSpeed: Double
    ) {
        self.body = body
        self.longitude = longitude
        self.latitude = latitude
        self.distance = distance
        self.longitudeSpeed = longitudeSpeed
        self.latitudeSpeed = latitudeSpeed
        self.distanceSpeed = distanceSpeed
    }

    /// Whether the body moves backwards in longitude (`longitudeSpeed < 0`).
    public var isRetrograde: Bool { longitudeSpeed < 0 }
}

/// House cusps and angles for one instant and place.
public struct Houses: Sendable, Hashable {
    /// The house system that was asked for.
    public var requested: HouseSystem
    /// The house system whose cusps these are: `requested`, or `.porphyry` when Placidus or Koch is undefined
    /// (inside the polar circles).
    public var system: HouseSystem
    /// Twelve cusps, house 1 to house 12, in degrees in [0, 360).
    public var cusps: [Double]
    /// The ascendant in degrees.
    public var ascendant: Double
    /// The midheaven (MC) in degrees.
    public var midheaven: Double
    /// The right ascension of the MC (ARMC) in degrees.
    public var armc: Double
    /// The vertex in degrees.
    public var vertex: Double
    /// Why `system` differs from `requested`; `nil` when they are the same.
    public var fallbackReason: String?

    /// Creates houses from their parts.
    public init(
        requested: HouseSystem,
        system: HouseSystem,
        cusps: [Double],
        ascendant: Double,
        midheaven: Double,
        armc: Double,
        vertex: Double,
        fallbackReason: String? = nil
    ) {
        self.requested = requested
        self.system = system
        self.cusps = cusps
        self.ascendant = ascendant
        self.midheaven = midheaven
        self.armc = armc
        self.vertex = vertex
        self.fallbackReason = fallbackReason
    }

    /// Whether a fallback system was used (`system != requested`).
    public var didFallBack: Bool { system != requested }
}

/// Everything `Ephemeris` computes for one chart.
public struct ChartPositions: Sendable, Hashable {
    /// The instant, as a Julian day in Universal Time.
    public var julianDayUT: Double
    /// One position per requested body, in the order requested.
    public var bodies: [BodyPosition]
    /// The houses.
    public var houses: Houses
    /// The zodiac of every longitude in `bodies` and `houses`.
    public var zodiac: Zodiac

    /// Creates a chart from its parts.
    public init(julianDayUT: Double, bodies: [BodyPosition], houses: Houses, zodiac: Zodiac) {
        self.julianDayUT = julianDayUT
        self.bodies = bodies
        self.houses = houses
        self.zodiac = zodiac
    }

    /// The position of `body`, if it was requested.
    public subscript(body: CelestialBody) -> BodyPosition? {
        bodies.first { $0.body == body }
    }
}
