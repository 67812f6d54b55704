import AstroDomain
import Ephemeris
import Foundation

/// Why a transit, return or progression could not be computed.
public enum TransitError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `transit-range-invalid`: `to` is not after `from`, or a date lies outside 1900…2100.
    case invalidRange(message: String)
    /// `transit-range-too-long`: the range is longer than `ChartEngine.maxTransitRangeDays`.
    case rangeTooLong(days: Double)
    /// `transit-orb-invalid`: a fixed orb outside (0, 10] degrees.
    case invalidOrb(Double)
    /// The chart engine or the ephemeris failed (its own code).
    case chart(ChartError)

    /// The stable code.
    public var code: String {
        switch self {
        case .invalidRange: ErrorCode.transitRangeInvalid.rawValue
        case .rangeTooLong: ErrorCode.transitRangeTooLong.rawValue
        case .invalidOrb: ErrorCode.transitOrbInvalid.rawValue
        case .chart(let error): error.code
        }
    }

    /// Whether the same input fails again (everything but a missing ephemeris).
    public var isPermanent: Bool {
        if case .chart(let error) = self { return error.isPermanent }
        return true
    }

    public var message: String {
        switch self {
        case .invalidRange(let message): message
        case .rangeTooLong(let days):
            "the range is \(days) days long; at most \(ChartEngine.maxTransitRangeDays) days per request"
        case .invalidOrb(let orb): "the transit orb \(orb) must be greater than 0 and at most 10 degrees"
        case .chart(let error): error.message
        }
    }

    public var description: String { "\(code): \(message)" }
}

/// The orb of a transit's window.
public enum TransitOrb: Sendable, Hashable {
    /// Each aspect type's `maxOrb` (8 / 7 / 7 / 6 / 8 degrees).
    case seed
    /// The same orb, in degrees (0, 10], for every aspect type.
    case fixed(Double)

    func degrees(_ type: AspectType) -> Double {
        switch self {
        case .seed: type.maxOrb
        case .fixed(let orb): orb
        }
    }

    var rule: String {
        switch self {
        case .seed: "seed"
        case .fixed(let orb): orb.description
        }
    }
}

extension ChartEngine {
    /// The longest transit range one request may ask for, in days (a leap year).
    public static let maxTransitRangeDays = 366.0

    /// Every exact transit of Sun…Pluto to the natal planets, ASC and MC in `[from, to)`, with orb
    /// windows, and the sign and natal-house ingresses; the whole search runs on one ephemeris
    /// thread (one suspension).
    /// - Parameters:
    ///   - natal: the natal chart (its zodiac is the transits' zodiac).
    ///   - from: the range's start (inclusive), 1900-01-01 or later.
    ///   - to: the range's end (exclusive), at most `maxTransitRangeDays` after `from`, before 2101.
    ///   - orb: the orb rule of the windows.
    /// - Returns: the report.
    /// - Throws: `TransitError`: `transit-range-invalid`, `transit-range-too-long`,
    ///   `transit-orb-invalid`, or the ephemeris' `ChartError`.
    public func transits(
        for natal: NatalChart,
        from: Date,
        to: Date,
        orb: TransitOrb = .seed
    ) async throws(TransitError) -> TransitReport {
        let search = try TransitSearch(natal: natal, from: from, to: to, orb: orb)
        do {
            return try await ephemeris.batch(zodiac: search.zodiac) { (batch) throws(EphemerisError) in
                try search.run(batch)
            }
        } catch {
            throw .chart(ChartError(error))
        }
    }

    /// As `transits(for:from:to:orb:)`, synchronously on the calling thread (benchmarks).
    /// - Throws: as `transits(for:from:to:orb:)`.
    /// - Important: blocks the calling thread; never call it on the Swift concurrency pool.
    public func transitsOnCurrentThread(
        for natal: NatalChart,
        from: Date,
        to: Date,
        orb: TransitOrb = .seed
    ) throws(TransitError) -> TransitReport {
        let search = try TransitSearch(natal: natal, from: from, to: to, orb: orb)
        do {
            return try ephemeris.batchOnCurrentThread(zodiac: search.zodiac) { (batch) throws(EphemerisError) in
                try search.run(batch)
            }
        } catch {
            throw .chart(ChartError(error))
        }
    }
}

/// Julian day (UT) ↔ Date, without a calendar.
enum JulianDay {
    static let unixEpoch = 2_440_587.5
    static func date(_ jd: Double) -> Date { Date(timeIntervalSince1970: (jd - unixEpoch) * 86_400) }
    static func of(_ date: Date) -> Double { Ephemeris.julianDayUT(date) }
    static let earliest = Ephemeris.julianDayUT(year: 1900, month: 1, day: 1, hour: 0)
    static let latest = Ephemeris.julianDayUT(year: 2101, month: 1, day: 1, hour: 0)
}

/// One sampled position of a transiting body.
struct TransitSample {
    var jd: Double
    var longitude: Double
    var speed: Double
}

/// A root of `longitude − target` (wrapped to ±180°): its instant and the direction of motion.
struct Crossing {
    var jd: Double
    var forward: Bool
}

/// The search behind `ChartEngine.transits`: bracket every zero of the signed angular
/// difference on a grid suited to the body's speed, split at stations (so each grid interval is
/// monotonic and holds at most one zero per target), then refine each bracket.
struct TransitSearch: Sendable {
    let natal: NatalChart
    let fromJD: Double
    let toJD: Double
    let orb: TransitOrb
    let zodiac: Zodiac
    let fromDate: Date
    let toDate: Date

    /// The exact angles (transiting − natal) and their aspect types; the two sides of a
    /// sextile, square and trine are separate targets.
    static let angles: [(Double, AspectType)] = [
        (0, .conjunction), (60, .sextile), (90, .square), (120, .trine), (180, .opposition),
        (240, .trine), (270, .square), (300, .sextile),
    ]

    init(natal: NatalChart, from: Date, to: Date, orb: TransitOrb) throws(TransitError) {
        if case .fixed(let degrees) = orb, !(degrees > 0 && degrees <= 10) { throw .invalidOrb(degrees) }
        let fromJD = JulianDay.of(from)
        let toJD = JulianDay.of(to)
        guard fromJD.isFinite, toJD.isFinite, toJD > fromJD else {
            throw .invalidRange(message: "the range's end must be after its start")
        }
        guard fromJD >= JulianDay.earliest, toJD <= JulianDay.latest else {
            throw .invalidRange(message: "the range must lie within 1900-01-01 … 2101-01-01 (UTC)")
        }
        guard toJD - fromJD <= ChartEngine.maxTransitRangeDays + 1e-9 else { throw .rangeTooLong(days: toJD - fromJD) }
        self.natal = natal
        self.fromJD = fromJD
        self.toJD = toJD
        self.orb = orb
        self.zodiac = Zodiac(natal.zodiac)
        self.fromDate = from
        self.toDate = to
    }

    /// Grid step (days) and orb-window margin beyond the range (days) of each body: the step
    /// keeps each interval far below 180° of motion and shorter than any retrograde loop; the
    /// margin bounds how far an orb window is followed outside the range.
    static func grid(_ planet: PlanetName) -> (step: Double, margin: Double) {
        switch planet {
        case .moon: (0.5, 3)
        case .sun: (1, 12)
        case .mercury: (1, 80)
        case .venus: (1, 120)
        case .mars: (2, 200)
        case .jupiter: (4, 400)
        case .saturn, .uranus, .neptune, .pluto: (5, 400)
        }
    }

    func run(_ batch: borrowing EphemerisBatch) throws(EphemerisError) -> TransitReport {
        var transits: [Transit] = []
        var ingresses: [TransitIngress] = []
        let cusps = natal.houses.map(\.cusp)
        for planet in PlanetName.allCases {
            let body = planet.celestialBody
            let (step, margin) = Self.grid(planet)
            let samples = try Self.samples(
                body,
                from: max(fromJD - margin, JulianDay.earliest - 30),
                to: min(toJD + margin, JulianDay.latest + 30),
                step: step,
                batch
            )
            for point in NatalTransitPoint.all {
                let natalLongitude = longitude(of: point)
                for (angle, type) in Self.angles {
                    let orbDegrees = orb.degrees(type)
                    let found = try window(
                        samples,
                        target: natalLongitude + angle,
                        orb: orbDegrees,
                        body: body,
                        batch
                    )
                    for (enters, leaves, hits) in found {
                        transits.append(
                            Transit(
                                transiting: planet,
                                natal: point,
                                aspect: type,
                                angle: angle,
                                orb: orbDegrees,
                                entersOrb: enters.map(JulianDay.date),
                                leavesOrb: leaves.map(JulianDay.date),
                                hits: hits
                            )
                        )
                    }
                }
            }
            for sign in 0..<12 {
                for crossing in try Self.crossings(samples, target: Double(sign * 30), body: body, batch)
                where crossing.jd >= fromJD && crossing.jd < toJD {
                    let entered = crossing.forward ? sign : (sign + 11) % 12
                    ingresses.append(
                        TransitIngress(
                            planet: planet,
                            kind: .sign,
                            instant: JulianDay.date(crossing.jd),
                            sign: ZodiacSign.allCases[entered],
                            house: nil,
                            isRetrograde: !crossing.forward
                        )
                    )
                }
            }
            for (index, cusp) in cusps.enumerated() {
                for crossing in try Self.crossings(samples, target: cusp, body: body, batch)
                where crossing.jd >= fromJD && crossing.jd < toJD {
                    let entered = crossing.forward ? index + 1 : (index + 11) % 12 + 1
                    ingresses.append(
                        TransitIngress(
                            planet: planet,
                            kind: .house,
                            instant: JulianDay.date(crossing.jd),
                            sign: ZodiacSign(longitude: ChartMath.normalizedDegrees(cusp)),
                            house: entered,
                            isRetrograde: !crossing.forward
                        )
                    )
                }
            }
        }
        transits.sort {
            ($0.hits[0].exact, $0.transiting, $0.natal.description) < (
                $1.hits[0].exact, $1.transiting, $1.natal.description
            )
        }
        ingresses.sort { ($0.instant, $0.planet) < ($1.instant, $1.planet) }
        return TransitReport(
            from: fromDate,
            to: toDate,
            orbRule: orb.rule,
            transits: transits,
            ingresses: ingresses,
            engineVersion: ChartEngine.version,
            ephemerisVersion: ChartEngine.ephemerisVersion
        )
    }

    func longitude(of point: NatalTransitPoint) -> Double {
        switch point {
        case .planet(let name): natal.planets.first { $0.name == name }?.longitude ?? 0
        case .ascendant: natal.ascendant
        case .midheaven: natal.midheaven
        }
    }

    /// The orb windows of one target that hold an exact hit in the range: entering instant (nil
    /// when already in orb at the margin's start), leaving instant (nil when still in orb at its
    /// end) and the hits.
    func window(
        _ samples: [TransitSample],
        target: Double,
        orb: Double,
        body: CelestialBody,
        _ batch: borrowing EphemerisBatch
    ) throws(EphemerisError) -> [(Double?, Double?, [TransitHit])] {
        enum Event {
            case exact(Crossing)
            case enter(Double)
            case leave(Double)
        }
        var events: [(Double, Event)] = []
        for crossing in try Self.crossings(samples, target: target, body: body, batch) {
            events.append((crossing.jd, .exact(crossing)))
        }
        // Skip the boundary searches when the target is never approached.
        if events.isEmpty
            && samples.allSatisfy({ abs(ChartMath.signedSeparation(from: target, to: $0.longitude)) > orb })
        {
            return []
        }
        for crossing in try Self.crossings(samples, target: target + orb, body: body, batch) {
            events.append((crossing.jd, crossing.forward ? .leave(crossing.jd) : .enter(crossing.jd)))
        }
        for crossing in try Self.crossings(samples, target: target - orb, body: body, batch) {
            events.append((crossing.jd, crossing.forward ? .enter(crossing.jd) : .leave(crossing.jd)))
        }
        events.sort { $0.0 < $1.0 }
        var result: [(Double?, Double?, [TransitHit])] = []
        var open = abs(ChartMath.signedSeparation(from: target, to: samples[0].longitude)) < orb
        var enters: Double? = nil
        var hits: [TransitHit] = []
        for (_, event) in events {
            switch event {
            case .enter(let jd):
                if !open {
                    open = true
                    enters = jd
                    hits = []
                }
            case .leave(let jd):
                if open, !hits.isEmpty { result.append((enters, jd, hits)) }
                open = false
                enters = nil
                hits = []
            case .exact(let crossing):
                if !open {
                    open = true
                    enters = nil
                    hits = []
                }
                if crossing.jd >= fromJD && crossing.jd < toJD {
                    hits.append(TransitHit(exact: JulianDay.date(crossing.jd), isRetrograde: !crossing.forward))
                }
            }
        }
        if open, !hits.isEmpty { result.append((enters, nil, hits)) }
        return result
    }

    /// Positions on a grid of `step` days over `[from, to]`, with each station (a sign change
    /// of the speed between two samples) found to about a second and inserted, so that the
    /// longitude is monotonic between consecutive samples.
    static func samples(
        _ body: CelestialBody,
        from: Double,
        to: Double,
        step: Double,
        _ batch: borrowing EphemerisBatch
    ) throws(EphemerisError) -> [TransitSample] {
        func sample(_ jd: Double) throws(EphemerisError) -> TransitSample {
            let position = try batch.position(of: body, julianDayUT: jd)
            return TransitSample(jd: jd, longitude: position.longitude, speed: position.longitudeSpeed)
        }
        let count = Int(((to - from) / step).rounded(.up))
        var samples: [TransitSample] = []
        samples.reserveCapacity(count + 8)
        var previous = try sample(from)
        samples.append(previous)
        for index in 1...max(count, 1) {
            let next = try sample(index == count ? to : min(from + Double(index) * step, to))
            if (previous.speed < 0) != (next.speed < 0) {
                var low = previous
                var high = next
                while high.jd - low.jd > 1e-5 {
                    let middle = try sample((low.jd + high.jd) / 2)
                    if (middle.speed < 0) == (low.speed < 0) { low = middle } else { high = middle }
                }
                samples.append(low)
                if high.jd < next.jd { samples.append(high) }
            }
            samples.append(next)
            previous = next
        }
        return samples
    }

    /// Every zero of `longitude − target` (wrapped) between consecutive samples, refined by
    /// false position (Illinois) to 1e-7° or 0.1 s of bracket. Each interval is monotonic and moves
    /// far less than 180°, so the unwrapped difference can only cross 0, never ±180.
    static func crossings(
        _ samples: [TransitSample],
        target: Double,
        body: CelestialBody,
        _ batch: borrowing EphemerisBatch
    ) throws(EphemerisError) -> [Crossing] {
        var found: [Crossing] = []
        guard samples.count > 1 else { return found }
        var first = samples[0]
        var firstDifference = ChartMath.signedSeparation(from: target, to: first.longitude)
        for index in 1..<samples.count {
            let second = samples[index]
            let move = ChartMath.signedSeparation(from: first.longitude, to: second.longitude)
            let secondDifference = firstDifference + move
            if (firstDifference < 0) != (secondDifference < 0) {
                let jd = try refine(first, firstDifference, second, secondDifference, body: body, batch)
                found.append(Crossing(jd: jd, forward: move > 0))
            }
            first = second
            // Re-wrapping here keeps rounding from accumulating along the grid.
            firstDifference = ChartMath.signedSeparation(from: target, to: second.longitude)
        }
        return found
    }

    static func refine(
        _ a: TransitSample,
        _ differenceA: Double,
        _ b: TransitSample,
        _ differenceB: Double,
        body: CelestialBody,
        _ batch: borrowing EphemerisBatch
    ) throws(EphemerisError) -> Double {
        var low = a.jd
        var high = b.jd
        var valueLow = differenceA
        var valueHigh = differenceB
        var side = 0
        for _ in 0..<80 {
            var jd = low - valueLow * (high - low) / (valueHigh - valueLow)
            if !(jd > low && jd < high) { jd = (low + high) / 2 }
            let position = try batch.position(of: body, julianDayUT: jd)
            let value = differenceA + ChartMath.signedSeparation(from: a.longitude, to: position.longitude)
            if value == 0 || high - low < 1e-6 { return jd }
            if (value < 0) == (valueLow < 0) {
                low = jd
                valueLow = value
                if side == -1 { valueHigh /= 2 }
                side = -1
            } else {
                high = jd
                valueHigh = value
                if side == 1 { valueLow /= 2 }
                side = 1
            }
            // 1e-7° is under 10 s even for Pluto near a station (0.001°/day), 0.1 ms for the Moon.
            if abs(value) < 1e-7 { return jd }
        }
        return (low + high) / 2
    }
}
