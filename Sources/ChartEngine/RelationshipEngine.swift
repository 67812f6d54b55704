import AstroDomain
import Ephemeris
import Foundation

// Charts for two people on the natal engine: synastry (pure geometry of two NatalCharts), the
// composite chart (midpoints, houses cast from the composite MC) and the Davison chart (a real
// chart of the midpoint in time and space). The rules are CONTRACT.md's "Charts for two".

extension ChartEngine {
    // MARK: Synastry

    /// The synastry of two charts: every aspect between a planet or angle of `a` and one of `b`,
    /// and each chart's planets and angles in the other's houses.
    ///
    /// Orbs are the seed's (`AspectType.maxOrb`), or `options.angleMaxOrb` (capped by the type's
    /// own) for aspects involving ASC or MC. Applying uses both points' longitude speeds with
    /// `ChartMath.aspect`'s rule; a NatalChart carries no speed for its angles, so angles count as
    /// fixed (speed 0), and two angles are never applying.
    /// - Throws: `RelationshipChartError` `.zodiacMismatch` when the zodiacs differ,
    ///   `.invalidOption` for an `angleMaxOrb` outside 0…8, `.invalidChart` without 12 cusps.
    public static func synastry(
        _ a: NatalChart,
        _ b: NatalChart,
        options: SynastryOptions = .init()
    ) throws(RelationshipChartError) -> Synastry {
        guard a.zodiac == b.zodiac else {
            throw .zodiacMismatch("chart A is \(a.zodiac.rawValue) and chart B is \(b.zodiac.rawValue)")
        }
        if let limit = options.angleMaxOrb {
            guard limit.isFinite, SynastryOptions.angleMaxOrbRange.contains(limit) else {
                throw .invalidOption("angleMaxOrb \(limit) is outside 0…8 degrees")
            }
        }
        let pointsA = try RelationshipPoints(a, side: .a)
        let pointsB = try RelationshipPoints(b, side: .b)

        var aspects: [InterAspect] = []
        for first in pointsA.points {
            for second in pointsB.points {
                let involvesAngle = first.point.isAngle || second.point.isAngle
                guard
                    let match = aspect(
                        between: (first.longitude, first.speed),
                        and: (second.longitude, second.speed),
                        maxOrb: { options.maxOrb($0, involvesAngle: involvesAngle) }
                    )
                else { continue }
                aspects.append(
                    InterAspect(
                        a: first.reference,
                        b: second.reference,
                        type: match.type,
                        orb: match.orb,
                        maxOrb: options.maxOrb(match.type, involvesAngle: involvesAngle),
                        isApplying: match.isApplying
                    )
                )
            }
        }
        return Synastry(
            options: options,
            aspects: aspects,
            overlaysAInB: pointsA.points.map {
                HouseOverlay(point: $0.reference, houseChart: .b, house: pointsB.cusps.house(ofLongitude: $0.longitude))
            },
            overlaysBInA: pointsB.points.map {
                HouseOverlay(point: $0.reference, houseChart: .a, house: pointsA.cusps.house(ofLongitude: $0.longitude))
            },
            houseSystemA: a.houseSystem,
            houseSystemB: b.houseSystem,
            engineVersion: version
        )
    }

    /// `ChartMath.aspect(between:and:)` with a maximum orb per type.
    static func aspect(
        between first: (longitude: Double, speed: Double),
        and second: (longitude: Double, speed: Double),
        maxOrb: (AspectType) -> Double
    ) -> (type: AspectType, orb: Double, isApplying: Bool)? {
        let delta = ChartMath.signedSeparation(from: first.longitude, to: second.longitude)
        let separation = abs(delta)
        var best: (type: AspectType, orb: Double)?
        for type in AspectType.allCases {
            let orb = abs(separation - type.angle)
            guard orb <= maxOrb(type) else { continue }
            if best == nil || orb < best!.orb { best = (type, orb) }
        }
        guard let best else { return nil }
        // Same rate as ChartMath.aspect: the sign of d(orb)/dt; negative is applying.
        let rate = signum(separation - best.type.angle) * signum(delta) * (second.speed - first.speed)
        return (best.type, best.orb, rate < 0)
    }

    private static func signum(_ value: Double) -> Double { value > 0 ? 1 : (value < 0 ? -1 : 0) }

    // MARK: Composite

    /// The midpoint of two longitudes along the shorter arc, in [0, 360). Exactly opposite
    /// longitudes have two midpoints; the one 90° ahead of `a` (in the order of the signs) is taken.
    public static func midpoint(_ a: Double, _ b: Double) -> Double {
        ChartMath.normalizedDegrees(a + ChartMath.signedSeparation(from: a, to: b) / 2)
    }

    /// The composite chart of two charts, NatalChart-shaped (see CONTRACT.md "Charts for two").
    ///
    /// Each planet (and each optional point both charts have) is the shorter-arc midpoint of its
    /// two positions (`midpoint(_:_:)`), with the mean latitude and mean speed (so retrograde
    /// means the mean speed is negative). The MC is the midpoint of the two MCs; the houses are
    /// cast from it at the mean of the two birth latitudes with the mean obliquity of the mean
    /// instant (`Ephemeris.housesFromMidheaven`), in A's requested house system (Placidus and Koch
    /// fall back to Porphyry inside the polar circles, with the natal warning); the ascendant is
    /// those houses' ascendant. Aspects among the composite planets follow the natal rules.
    /// - Throws: `RelationshipChartError`: `.zodiacMismatch`, `.unsupportedZodiac` (sidereal),
    ///   `.invalidChart`, `.chart` when the ephemeris fails.
    public func composite(
        _ a: NatalChart,
        _ b: NatalChart,
        calculatedAt: Date = Date()
    ) async throws(RelationshipChartError) -> NatalChart {
        let frame = try CompositeFrame(a, b)
        let houses: Houses
        do {
            houses = try await ephemeris.housesFromMidheaven(
                midheaven: frame.midheaven,
                latitude: frame.latitude,
                julianDayUT: frame.julianDayUT,
                houseSystem: frame.houseSystem
            )
        } catch {
            throw .chart(ChartError(error))
        }
        return try frame.chart(houses: houses, calculatedAt: calculatedAt)
    }

    /// `composite(_:_:calculatedAt:)` on the calling thread (benchmarks, dedicated threads).
    /// - Throws: as `composite(_:_:calculatedAt:)`.
    /// - Important: Blocks the calling thread: never call it from the Swift concurrency pool.
    public func compositeOnCurrentThread(
        _ a: NatalChart,
        _ b: NatalChart,
        calculatedAt: Date = Date()
    ) throws(RelationshipChartError) -> NatalChart {
        let frame = try CompositeFrame(a, b)
        let houses: Houses
        do {
            houses = try ephemeris.housesFromMidheavenOnCurrentThread(
                midheaven: frame.midheaven,
                latitude: frame.latitude,
                julianDayUT: frame.julianDayUT,
                houseSystem: frame.houseSystem
            )
        } catch {
            throw .chart(ChartError(error))
        }
        return try frame.chart(houses: houses, calculatedAt: calculatedAt)
    }

    // MARK: Davison

    /// The great-circle midpoint of two places: the normalized sum of their unit vectors.
    /// - Returns: latitude in −90…90 and longitude in −180…180; `nil` for antipodes.
    public static func greatCircleMidpoint(
        _ first: (latitude: Double, longitude: Double),
        _ second: (latitude: Double, longitude: Double)
    ) -> (latitude: Double, longitude: Double)? {
        let radians = Double.pi / 180
        func vector(_ place: (latitude: Double, longitude: Double)) -> (Double, Double, Double) {
            let phi = place.latitude * radians
            let lambda = place.longitude * radians
            return (cos(phi) * cos(lambda), cos(phi) * sin(lambda), sin(phi))
        }
        let p = vector(first)
        let q = vector(second)
        let x = p.0 + q.0
        let y = p.1 + q.1
        let z = p.2 + q.2
        let horizontal = (x * x + y * y).squareRoot()
        guard (horizontal * horizontal + z * z).squareRoot() > 1e-9 else { return nil }
        let latitude = atan2(z, horizontal) / radians
        // At a pole the longitude is arbitrary; 0 keeps the answer deterministic.
        let longitude = horizontal < 1e-15 ? 0 : atan2(y, x) / radians
        return (max(-90, min(90, latitude)), max(-180, min(180, longitude)))
    }

    /// The Davison chart of two charts: a real chart cast for the midpoint of the two UT instants
    /// (the mean Julian day) at the great-circle midpoint of the two birthplaces, with A's
    /// requested house system, the charts' zodiac and the optional points both charts have.
    /// `birthDate`/`birthTime` are the UTC date and minute of the midpoint (`timezone` `UTC`);
    /// `utc` and `julianDayUT` are exact.
    /// - Throws: `RelationshipChartError`: `.zodiacMismatch`, `.antipodalPlaces`, `.invalidChart`,
    ///   `.chart` when the ephemeris fails.
    public func davison(
        _ a: NatalChart,
        _ b: NatalChart,
        calculatedAt: Date = Date()
    ) async throws(RelationshipChartError) -> NatalChart {
        let frame = try DavisonFrame(a, b)
        let positions: ChartPositions
        do {
            positions = try await ephemeris.positions(
                julianDayUT: frame.julianDayUT,
                latitude: frame.latitude,
                longitude: frame.longitude,
                bodies: frame.bodies,
                houseSystem: HouseSystem(frame.houseSystem),
                zodiac: Zodiac(a.zodiac)
            )
        } catch {
            throw .chart(ChartError(error))
        }
        return try frame.chart(positions: positions, calculatedAt: calculatedAt)
    }

    /// `davison(_:_:calculatedAt:)` on the calling thread.
    /// - Throws: as `davison(_:_:calculatedAt:)`.
    /// - Important: Blocks the calling thread: never call it from the Swift concurrency pool.
    public func davisonOnCurrentThread(
        _ a: NatalChart,
        _ b: NatalChart,
        calculatedAt: Date = Date()
    ) throws(RelationshipChartError) -> NatalChart {
        let frame = try DavisonFrame(a, b)
        let positions: ChartPositions
        do {
            positions = try ephemeris.positionsOnCurrentThread(
                julianDayUT: frame.julianDayUT,
                latitude: frame.latitude,
                longitude: frame.longitude,
                bodies: frame.bodies,
                houseSystem: HouseSystem(frame.houseSystem),
                zodiac: Zodiac(a.zodiac)
            )
        } catch {
            throw .chart(ChartError(error))
        }
        return try frame.chart(positions: positions, calculatedAt: calculatedAt)
    }
}

/// The planets and angles of one chart, with speeds (angles 0) and its cusps.
struct RelationshipPoints {
    struct Entry {
        var point: RelationshipPoint
        var longitude: Double
        var speed: Double
        var reference: SynastryPointReference
    }

    var points: [Entry]
    var cusps: ChartMath.HouseCusps

    init(_ chart: NatalChart, side: SynastrySide) throws(RelationshipChartError) {
        guard let cusps = ChartMath.HouseCusps(chart.houses.map(\.cusp)) else {
            throw .invalidChart("chart \(side.rawValue) has \(chart.houses.count) house cusps instead of 12")
        }
        var points: [Entry] = []
        points.reserveCapacity(12)
        for name in PlanetName.allCases {
            guard let planet = chart.planet(name) else {
                throw .invalidChart("chart \(side.rawValue) has no \(name.rawValue)")
            }
            points.append(Self.entry(.planet(name), planet.longitude, planet.speed, side))
        }
        points.append(Self.entry(.ascendant, chart.ascendant, 0, side))
        points.append(Self.entry(.midheaven, chart.midheaven, 0, side))
        self.points = points
        self.cusps = cusps
    }

    private static func entry(
        _ point: RelationshipPoint,
        _ longitude: Double,
        _ speed: Double,
        _ side: SynastrySide
    )
        -> Entry
    {
        let longitude = ChartMath.normalizedDegrees(longitude)
        return Entry(
            point: point,
            longitude: longitude,
            speed: speed,
            reference: SynastryPointReference(chart: side, point: point, longitude: longitude)
        )
    }
}

/// Element ids of a chart for two: seeded by a digest of its kind and both input charts.
private func relationshipIDs(_ kind: String, _ a: NatalChart, _ b: NatalChart) -> ElementIDSeed {
    var bytes = Array("\(ChartEngine.version)\n\(kind)\n".utf8)
    for chart in [a, b] {
        let json = (try? chart.ignoringCalculatedAt.jsonBytes()) ?? []
        bytes.append(contentsOf: Array("\(json.count):".utf8))
        bytes.append(contentsOf: json)
    }
    return ElementIDSeed(digest: SHA256.hash(bytes))
}

private func checkSameZodiac(_ a: NatalChart, _ b: NatalChart) throws(RelationshipChartError) {
    guard a.zodiac == b.zodiac else {
        throw .zodiacMismatch("chart A is \(a.zodiac.rawValue) and chart B is \(b.zodiac.rawValue)")
    }
}

private func requireCharts(_ a: NatalChart, _ b: NatalChart) throws(RelationshipChartError) {
    for (side, chart) in [("A", a), ("B", b)] {
        for name in PlanetName.allCases where chart.planet(name) == nil {
            throw .invalidChart("chart \(side) has no \(name.rawValue)")
        }
    }
}

/// The UTC date (`yyyy-MM-dd`) and minute (`HH:mm`) of an instant, proleptic Gregorian.
private func utcDateAndMinute(_ date: Date) -> (date: String, time: String) {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: date)
    func pad(_ value: Int?, _ width: Int) -> String {
        let text = String(value ?? 0)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    return (
        "\(pad(parts.year, 4))-\(pad(parts.month, 2))-\(pad(parts.day, 2))",
        "\(pad(parts.hour, 2)):\(pad(parts.minute, 2))"
    )
}

/// The house system a chart was asked for (the one it fell back from, if any).
private func requestedSystem(_ chart: NatalChart) -> ChartHouseSystem {
    chart.houseSystemRequested ?? chart.houseSystem
}

/// Aspects among ten placed planets, by the natal rules.
private func planetAspects(_ planets: [NatalChart.Planet], ids: ElementIDSeed) -> [NatalChart.Aspect] {
    var aspects: [NatalChart.Aspect] = []
    for (index, first) in planets.enumerated() {
        for second in planets[(index + 1)...] {
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
    return aspects
}

private func fallbackWarning(
    requested: ChartHouseSystem,
    used: ChartHouseSystem,
    latitude: Double,
    detail: String?
)
    -> NatalChart.Warning?
{
    guard used != requested else { return nil }
    var message =
        "\(requested.displayName) is undefined at latitude \(latitude) (inside the polar circles); "
        + "\(used.displayName) cusps are used instead"
    if let detail, !detail.isEmpty { message += " (\(detail))" }
    return NatalChart.Warning(code: NatalChart.Warning.houseSystemFallback, message: message)
}

/// Everything a composite needs before its houses are cast.
struct CompositeFrame {
    var a: NatalChart
    var b: NatalChart
    var midheaven: Double
    var latitude: Double
    var julianDayUT: Double
    var houseSystem: HouseSystem

    init(_ a: NatalChart, _ b: NatalChart) throws(RelationshipChartError) {
        try checkSameZodiac(a, b)
        guard a.zodiac == .tropical else {
            throw .unsupportedZodiac(
                "composite houses are cast in the tropical zodiac only; these charts are \(a.zodiac.rawValue)"
            )
        }
        try requireCharts(a, b)
        self.a = a
        self.b = b
        midheaven = ChartEngine.midpoint(a.midheaven, b.midheaven)
        latitude = (a.latitude + b.latitude) / 2
        julianDayUT = (a.julianDayUT + b.julianDayUT) / 2
        houseSystem = HouseSystem(requestedSystem(a))
    }

    func chart(houses: Houses, calculatedAt: Date) throws(RelationshipChartError) -> NatalChart {
        guard houses.cusps.count == 12, let cusps = ChartMath.HouseCusps(houses.cusps) else {
            throw .chart(.calculationFailed(message: "the ephemeris returned \(houses.cusps.count) cusps, not 12"))
        }
        let ids = relationshipIDs("composite", a, b)
        func place<Name>(
            _ name: Name,
            _ first: NatalChart.Placement<Name>,
            _ second: NatalChart.Placement<Name>,
            id: ElementIDSeed.Tag
        )
            -> NatalChart.Placement<Name>
        {
            let longitude = ChartEngine.midpoint(first.longitude, second.longitude)
            let speed = (first.speed + second.speed) / 2
            return NatalChart.Placement(
                id: ids.id(id),
                name: name,
                longitude: longitude,
                latitude: (first.latitude + second.latitude) / 2,
                sign: ZodiacSign(longitude: longitude),
                house: cusps.house(ofLongitude: longitude),
                isRetrograde: speed < 0,
                speed: speed
            )
        }
        let planets = PlanetName.allCases.map { name in
            place(name, a.planet(name)!, b.planet(name)!, id: .planet(name))
        }
        let pointsA = a.points ?? []
        let pointsB = b.points ?? []
        let points: [NatalChart.Point] = ChartPoint.allCases.compactMap { name in
            guard let first = pointsA.first(where: { $0.name == name }),
                let second = pointsB.first(where: { $0.name == name })
            else { return nil }
            return place(name, first, second, id: .point(name))
        }
        let used = ChartHouseSystem(houses.system)
        let requested = ChartHouseSystem(houses.requested)
        var warnings = [
            NatalChart.Warning(
                code: NatalChart.Warning.compositeChart,
                message: "composite chart: midpoints of two charts; houses cast from the composite MC at latitude "
                    + "\(latitude) (the mean) with the mean obliquity of the mean instant"
            )
        ]
        if let warning = fallbackWarning(
            requested: requested,
            used: used,
            latitude: latitude,
            detail: houses.fallbackReason
        ) {
            warnings.append(warning)
        }
        let utc = Date(timeIntervalSince1970: (a.utc.timeIntervalSince1970 + b.utc.timeIntervalSince1970) / 2)
        let stamp = utcDateAndMinute(utc)
        let place = DavisonFrame.place(a, b)
        return NatalChart(
            birthDate: stamp.date,
            birthTime: stamp.time,
            timezone: "UTC",
            utc: utc,
            julianDayUT: julianDayUT,
            latitude: latitude,
            longitude: place?.longitude ?? a.longitude,
            locationName: "Composite",
            houseSystem: used,
            houseSystemRequested: used == requested ? nil : requested,
            warnings: warnings,
            planets: planets,
            points: points.isEmpty ? nil : points,
            houses: houses.cusps.enumerated().map { index, cusp in
                NatalChart.House(
                    id: ids.id(.house(index + 1)),
                    number: index + 1,
                    cusp: ChartMath.normalizedDegrees(cusp),
                    sign: ZodiacSign(longitude: cusp)
                )
            },
            aspects: planetAspects(planets, ids: ids),
            ascendant: ChartMath.normalizedDegrees(houses.ascendant),
            midheaven: midheaven,
            zodiac: a.zodiac,
            engineVersion: ChartEngine.version,
            ephemerisVersion: ChartEngine.ephemerisVersion,
            calculatedAt: calculatedAt
        )
    }
}

/// Everything a Davison chart needs before the ephemeris is asked.
struct DavisonFrame {
    var a: NatalChart
    var b: NatalChart
    var julianDayUT: Double
    var utc: Date
    var latitude: Double
    var longitude: Double
    var houseSystem: ChartHouseSystem
    var points: [ChartPoint]
    var bodies: [CelestialBody]

    static func place(_ a: NatalChart, _ b: NatalChart) -> (latitude: Double, longitude: Double)? {
        ChartEngine.greatCircleMidpoint((a.latitude, a.longitude), (b.latitude, b.longitude))
    }

    init(_ a: NatalChart, _ b: NatalChart) throws(RelationshipChartError) {
        try checkSameZodiac(a, b)
        guard let place = Self.place(a, b) else {
            throw .antipodalPlaces(
                "(\(a.latitude), \(a.longitude)) and (\(b.latitude), \(b.longitude)) are antipodes: every great "
                    + "circle through them has two midpoints"
            )
        }
        self.a = a
        self.b = b
        julianDayUT = (a.julianDayUT + b.julianDayUT) / 2
        utc = Date(timeIntervalSince1970: (a.utc.timeIntervalSince1970 + b.utc.timeIntervalSince1970) / 2)
        latitude = place.latitude
        longitude = place.longitude
        houseSystem = requestedSystem(a)
        let namesB = Set((b.points ?? []).map(\.name))
        points = (a.points ?? []).map(\.name).filter { namesB.contains($0) }.sorted()
        bodies = PlanetName.allCases.map(\.celestialBody) + points.map(\.celestialBody)
    }

    func chart(positions: ChartPositions, calculatedAt: Date) throws(RelationshipChartError) -> NatalChart {
        let houses = positions.houses
        guard houses.cusps.count == 12, let cusps = ChartMath.HouseCusps(houses.cusps) else {
            throw .chart(.calculationFailed(message: "the ephemeris returned \(houses.cusps.count) cusps, not 12"))
        }
        let ids = relationshipIDs("davison", a, b)
        func place<Name>(
            _ name: Name,
            _ body: CelestialBody,
            id: ElementIDSeed.Tag
        ) throws(RelationshipChartError)
            -> NatalChart.Placement<Name>
        {
            guard let position = positions[body] else {
                throw .chart(.calculationFailed(message: "the ephemeris returned no position for \(body.rawValue)"))
            }
            let longitude = ChartMath.normalizedDegrees(position.longitude)
            return NatalChart.Placement(
                id: ids.id(id),
                name: name,
                longitude: longitude,
                latitude: position.latitude,
                sign: ZodiacSign(longitude: longitude),
                house: cusps.house(ofLongitude: longitude),
                isRetrograde: position.longitudeSpeed < 0,
                speed: position.longitudeSpeed
            )
        }
        var planets: [NatalChart.Planet] = []
        for name in PlanetName.allCases { planets.append(try place(name, name.celestialBody, id: .planet(name))) }
        var points: [NatalChart.Point] = []
        for name in self.points { points.append(try place(name, name.celestialBody, id: .point(name))) }
        let used = ChartHouseSystem(houses.system)
        var warnings = [
            NatalChart.Warning(
                code: NatalChart.Warning.davisonChart,
                message: "Davison chart: the midpoint in time (UT) and on the sphere of two births"
            )
        ]
        if let warning = fallbackWarning(
            requested: houseSystem,
            used: used,
            latitude: latitude,
            detail: houses.fallbackReason
        ) {
            warnings.append(warning)
        }
        let stamp = utcDateAndMinute(utc)
        return NatalChart(
            birthDate: stamp.date,
            birthTime: stamp.time,
            timezone: "UTC",
            utc: utc,
            julianDayUT: julianDayUT,
            latitude: latitude,
            longitude: longitude,
            locationName: "Davison",
            houseSystem: used,
            houseSystemRequested: used == houseSystem ? nil : houseSystem,
            warnings: warnings,
            planets: planets,
            points: points.isEmpty ? nil : points,
            houses: houses.cusps.enumerated().map { index, cusp in
                NatalChart.House(
                    id: ids.id(.house(index + 1)),
                    number: index + 1,
                    cusp: ChartMath.normalizedDegrees(cusp),
                    sign: ZodiacSign(longitude: cusp)
                )
            },
            aspects: planetAspects(planets, ids: ids),
            ascendant: ChartMath.normalizedDegrees(houses.ascendant),
            midheaven: ChartMath.normalizedDegrees(houses.midheaven),
            zodiac: a.zodiac,
            engineVersion: ChartEngine.version,
            ephemerisVersion: ChartEngine.ephemerisVersion,
            calculatedAt: calculatedAt
        )
    }
}
