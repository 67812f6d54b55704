import AstroDomain
import Ephemeris
import Foundation

/// Where a return chart is cast: a place and the zone its local time is shown in.
public struct ChartPlace: Sendable, Hashable {
    public var latitude: Double
    public var longitude: Double
    public var locationName: String

    public init(latitude: Double, longitude: Double, locationName: String = "") {
        self.latitude = latitude
        self.longitude = longitude
        self.locationName = locationName
    }
}

extension ChartEngine {
    /// The days of a year of life in a secondary progression (the tropical year).
    public static let progressionYearDays = 365.242199

    /// The angle method of `progressed(for:target:)`, as `ProgressedChart.angleMethod` names it.
    public static let progressedAngleMethod = "progressed-instant-armc"

    /// The solar return of `year`: the instant near the birthday in that year when the Sun is back
    /// at its natal longitude (in the chart's zodiac), found by root-finding to about 10 ms, and
    /// a chart cast for it.
    /// - Parameters:
    ///   - birth: the birth data (its chart gives the natal Sun).
    ///   - year: 1900…2100.
    ///   - place: where the return chart is cast; `nil` is the birth place.
    /// - Returns: the return. Its chart's `birthDate`/`birthTime` are the UTC date and minute
    ///   (`timezone` "UTC"); `utc` and `julianDayUT` are the exact instant; element ids derive from
    ///   that minute's input.
    /// - Throws: `TransitError`: `transit-range-invalid` for a year outside 1900…2100, or the
    ///   chart's own errors (invalid birth data or place, ephemeris).
    public func solarReturn(
        for birth: BirthData,
        year: Int,
        place: ChartPlace? = nil,
        calculatedAt: Date = Date()
    ) async throws(TransitError) -> SolarReturn {
        guard (1900...2100).contains(year) else {
            throw .invalidRange(message: "the solar return year \(year) must be within 1900…2100")
        }
        let natal = try PreparedInput.transit(birth, timeZones: timeZones)
        let place =
            place
            ?? ChartPlace(
                latitude: natal.birth.latitude,
                longitude: natal.birth.longitude,
                locationName: natal.birth.locationName
            )
        let birthParts = Calendar.utc.dateComponents([.month, .day, .hour, .minute, .second], from: natal.instant.utc)
        var anniversary = DateComponents()
        anniversary.year = year
        anniversary.month = birthParts.month
        anniversary.day = birthParts.day
        anniversary.hour = birthParts.hour
        anniversary.minute = birthParts.minute
        anniversary.second = birthParts.second
        guard let around = Calendar.utc.date(from: anniversary) else {
            throw .invalidRange(message: "no anniversary date in \(year)")
        }
        let center = JulianDay.of(around)
        let input = natal
        let found: Result<(Double, Double, NatalChart), ChartError>
        do {
            found = try await ephemeris.batch(zodiac: input.zodiac) {
                (batch) throws(EphemerisError) -> Result<(Double, Double, NatalChart), ChartError> in
                let natalSun = try batch.position(of: .sun, julianDayUT: input.julianDayUT).longitude
                // The Sun comes back within two days of the anniversary; one crossing in ±5 days.
                let samples = try TransitSearch.samples(.sun, from: center - 5, to: center + 5, step: 1, batch)
                guard
                    let crossing = try TransitSearch.crossings(samples, target: natalSun, body: .sun, batch).first
                else {
                    return .failure(.calculationFailed(message: "no solar return found near \(around)"))
                }
                return Self.castChart(
                    input,
                    julianDayUT: crossing.jd,
                    place: place,
                    calculatedAt: calculatedAt,
                    batch
                ).map { (crossing.jd, natalSun, $0) }
            }
        } catch {
            throw .chart(ChartError(error))
        }
        switch found {
        case .success(let (jd, natalSun, chart)):
            return SolarReturn(year: year, instant: JulianDay.date(jd), natalSunLongitude: natalSun, chart: chart)
        case .failure(let error):
            throw .chart(error)
        }
    }

    /// The secondary progression for `target`: the chart of the instant
    /// birth + (target − birth) / 365.242199 days, at the birth place. Angles and cusps are cast
    /// for that instant too (the ARMC advances with the progressed clock, about 0.986° of right
    /// ascension a year): `angleMethod` "progressed-instant-armc".
    /// - Parameters:
    ///   - birth: the birth data.
    ///   - target: the date of life the progression is for (1900…2100, before or after the birth).
    /// - Returns: the progressed chart; its `utc`/`julianDayUT` are the progressed instant.
    /// - Throws: `TransitError`: `transit-range-invalid` for a target outside 1900…2100, or the
    ///   chart's own errors.
    public func progressed(
        for birth: BirthData,
        target: Date,
        calculatedAt: Date = Date()
    ) async throws(TransitError) -> ProgressedChart {
        let targetJD = JulianDay.of(target)
        guard targetJD.isFinite, targetJD >= JulianDay.earliest, targetJD < JulianDay.latest else {
            throw .invalidRange(message: "the progression target must lie within 1900-01-01 … 2101-01-01 (UTC)")
        }
        let input = try PreparedInput.transit(birth, timeZones: timeZones)
        let progressedJD = input.julianDayUT + (targetJD - input.julianDayUT) / Self.progressionYearDays
        let place = ChartPlace(
            latitude: input.birth.latitude,
            longitude: input.birth.longitude,
            locationName: input.birth.locationName
        )
        let chart: Result<NatalChart, ChartError>
        do {
            chart = try await ephemeris.batch(zodiac: input.zodiac) { (batch) throws(EphemerisError) in
                Self.castChart(input, julianDayUT: progressedJD, place: place, calculatedAt: calculatedAt, batch)
            }
        } catch {
            throw .chart(ChartError(error))
        }
        switch chart {
        case .success(let chart):
            return ProgressedChart(
                target: target,
                progressedInstant: JulianDay.date(progressedJD),
                angleMethod: Self.progressedAngleMethod,
                chart: chart
            )
        case .failure(let error): throw .chart(error)
        }
    }

    /// A NatalChart-shaped chart of an exact instant and place, with the birth data's house
    /// system, points and zodiac.
    static func castChart(
        _ natal: PreparedInput,
        julianDayUT: Double,
        place: ChartPlace,
        calculatedAt: Date,
        _ batch: borrowing EphemerisBatch
    ) -> Result<NatalChart, ChartError> {
        let instant = JulianDay.date(julianDayUT)
        let parts = Calendar.utc.dateComponents([.year, .month, .day, .hour, .minute], from: instant)
        var birth = natal.birth
        birth.birthDate = String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
        birth.birthTime = String(format: "%02d:%02d", parts.hour ?? 0, parts.minute ?? 0)
        birth.timezone = "UTC"
        birth.latitude = place.latitude
        birth.longitude = place.longitude
        birth.locationName = place.locationName
        birth.dstPolicy = nil
        do {
            var input = try PreparedInput(birth, timeZones: FoundationTimeZones())
            input.julianDayUT = julianDayUT
            input.instant.utc = instant
            let positions = try batch.chart(
                julianDayUT: julianDayUT,
                latitude: place.latitude,
                longitude: place.longitude,
                bodies: input.bodies,
                houseSystem: input.houseSystem
            )
            return .success(try assemble(input, positions: positions, calculatedAt: calculatedAt))
        } catch let error as ChartError {
            return .failure(error)
        } catch let error as EphemerisError {
            return .failure(ChartError(error))
        } catch {
            return .failure(.calculationFailed(message: "\(error)"))
        }
    }
}

extension PreparedInput {
    static func transit(_ birth: BirthData, timeZones: some TimeZoneRulesProvider) throws(TransitError) -> PreparedInput
    {
        do {
            return try PreparedInput(birth, timeZones: timeZones)
        } catch {
            throw .chart(error)
        }
    }
}

extension Calendar {
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()
}
