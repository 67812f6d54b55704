import CSwissEph

/// One validated chart request.
struct ChartRequest: Sendable {
    var julianDayUT: Double
    var latitude: Double
    var longitude: Double
    var bodies: [CelestialBody]
    var houseSystem: HouseSystem
    var zodiac: Zodiac

    /// Checks the ranges the contract allows.
    /// - Throws: `EphemerisError` of kind `.invalidInput` naming the bad value.
    init(
        julianDayUT: Double,
        latitude: Double,
        longitude: Double,
        bodies: [CelestialBody],
        houseSystem: HouseSystem,
        zodiac: Zodiac
    ) throws(EphemerisError) {
        guard julianDayUT.isFinite else {
            throw EphemerisError(
                kind: .invalidInput,
                message: "Julian day \(julianDayUT) is not a finite number; pass swe_julday of a UTC instant"
            )
        }
        guard latitude.isFinite, (-90.0...90.0).contains(latitude) else {
            throw EphemerisError(
                kind: .invalidInput,
                message: "latitude \(latitude) is outside -90...90 degrees (north positive)"
            )
        }
        guard longitude.isFinite, (-180.0...180.0).contains(longitude) else {
            throw EphemerisError(
                kind: .invalidInput,
                message: "longitude \(longitude) is outside -180...180 degrees (east positive)"
            )
        }
        self.julianDayUT = julianDayUT
        self.latitude = latitude
        self.longitude = longitude
        self.bodies = bodies
        self.houseSystem = houseSystem
        self.zodiac = zodiac
    }
}

/// The calls into libswe for one configuration. A value type with no C state: every method works on the
/// calling thread's libswe state, which it configures first (`SwissEphThreadState`).
///
/// - Important: Each method must run entirely on one thread, because libswe's state is per thread.
struct SwissEphCalculator: Sendable {
    let path: String
    let allowMoshierFallback: Bool

    init(configuration: EphemerisConfiguration) {
        self.path = configuration.path
        self.allowMoshierFallback = configuration.allowMoshierFallback
    }

    /// Configures the calling thread and proves the Swiss Ephemeris files are used there: computes the Sun
    /// and the Moon at J2000 and checks that libswe reports `SEFLG_SWIEPH`.
    /// - Throws: `.moshierFallback` naming the path (unless allowed), `.filesMissing` or `.calculationFailed`.
    func verifyFiles() throws(EphemerisError) {
        let state = SwissEphThreadState.current
        state.use(path: path)
        state.use(zodiac: .tropical)
        let j2000 = 2_451_545.0
        for body in [CelestialBody.sun, .moon] {
            _ = try position(of: body, julianDayUT: j2000, sidereal: false)
        }
    }

    /// Computes the bodies and houses of `request` on the calling thread.
    /// - Throws: `EphemerisError` for a libswe error, a missing file or an unallowed Moshier fallback.
    func chart(_ request: ChartRequest) throws(EphemerisError) -> ChartPositions {
        let state = SwissEphThreadState.current
        state.use(path: path)
        state.use(zodiac: request.zodiac)
        let sidereal = request.zodiac != .tropical
        var bodies: [BodyPosition] = []
        bodies.reserveCapacity(request.bodies.count)
        for body in request.bodies {
            bodies.append(try position(of: body, julianDayUT: request.julianDayUT, sidereal: sidereal))
        }
        let houses = try houses(request, sidereal: sidereal)
        return ChartPositions(julianDayUT: request.julianDayUT, bodies: bodies, houses: houses, zodiac: request.zodiac)
    }

    /// `swe_calc_ut` for one body, with every result checked.
    func position(
        of body: CelestialBody,
        julianDayUT: Double,
        sidereal: Bool
    ) throws(EphemerisError)
        -> BodyPosition
    {
        var flags = cswisseph_flag_swieph | cswisseph_flag_speed
        if sidereal { flags |= cswisseph_flag_sidereal }
        var xx: (Double, Double, Double, Double, Double, Double) = (0, 0, 0, 0, 0, 0)
        var returned: Int32 = 0
        let serr = withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(cswisseph_max_chars)) { buffer in
            buffer[0] = 0
            returned = withUnsafeMutableBytes(of: &xx) { raw in
                swe_calc_ut(
                    julianDayUT,
                    body.sweNumber,
                    flags,
                    raw.baseAddress!.assumingMemoryBound(to: Double.self),
                    buffer.baseAddress!
                )
            }
            return buffer[0] == 0 ? "" : String(cString: buffer.baseAddress!)
        }
        if returned < 0 {
            if serr.contains("not found") {
                throw EphemerisError(
                    kind: .filesMissing,
                    message: "a Swiss Ephemeris data file for \(body.rawValue) at Julian day \(julianDayUT) (UT) "
                        + "is missing: \(serr). Install Debian's swe-standard-data or point "
                        + "EphemerisConfiguration.path / SE_EPHE_PATH (now '\(path)') at a directory with the file"
                )
            }
            throw EphemerisError(
                kind: .calculationFailed,
                message: "swe_calc_ut failed for \(body.rawValue) at Julian day \(julianDayUT) (UT): "
                    + (serr.isEmpty ? "no message" : serr)
            )
        }
        if returned & cswisseph_flag_swieph == 0 && !allowMoshierFallback {
            let detail = serr.isEmpty ? "" : " (\(serr))"
            throw EphemerisError(
                kind: .moshierFallback,
                message: "libswe computed \(body.rawValue) at Julian day \(julianDayUT) (UT) with the Moshier "
                    + "ephemeris, not the Swiss Ephemeris files in '\(path)'\(detail). Put sepl_*.se1 and "
                    + "semo_*.se1 covering this date there (Debian: swe-standard-data), or set "
                    + "allowMoshierFallback to accept the lower precision"
            )
        }
        return BodyPosition(
            body: body,
            longitude: normalizedDegrees(xx.0),
            latitude: xx.1,
            distance: xx.2,
            longitudeSpeed: xx.3,
            latitudeSpeed: xx.4,
            distanceSpeed: xx.5
        )
    }

    /// `swe_houses_ex2`, turning the polar-circle error of Placidus and Koch into a Porphyry fallback.
    private func houses(_ request: ChartRequest, sidereal: Bool) throws(EphemerisError) -> Houses {
        // cusps[1...12] at 1...12 ([0] unused), then ascmc[0...9] at 13...22.
        var returned: Int32 = 0
        var values: [Double] = []
        let serr = withUnsafeTemporaryAllocation(of: Double.self, capacity: 23) { numbers in
            numbers.initialize(repeating: 0)
            let message = withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(cswisseph_max_chars)) {
                buffer in
                buffer[0] = 0
                returned = swe_houses_ex2(
                    request.julianDayUT,
                    sidereal ? cswisseph_flag_sidereal : 0,
                    request.latitude,
                    request.longitude,
                    request.houseSystem.sweLetter,
                    numbers.baseAddress!,
                    numbers.baseAddress! + 13,
                    nil,
                    nil,
                    buffer.baseAddress!
                )
                return buffer[0] == 0 ? "" : String(cString: buffer.baseAddress!)
            }
            values = Array(numbers)
            return message
        }
        var system = request.houseSystem
        var reason: String?
        if returned < 0 {
            // libswe fills in Porphyry cusps when the requested system is undefined (Placidus and Koch
            // inside the polar circles); there is nothing to fall back to when Porphyry itself failed.
            guard request.houseSystem != .porphyry else {
                throw EphemerisError(
                    kind: .calculationFailed,
                    message: "swe_houses_ex2 failed for porphyry at Julian day \(request.julianDayUT) (UT), "
                        + "latitude \(request.latitude), longitude \(request.longitude): "
                        + (serr.isEmpty ? "no message" : serr)
                )
            }
            system = .porphyry
            reason =
                serr.isEmpty
                ? "\(request.houseSystem.rawValue) houses are undefined at latitude \(request.latitude) "
                    + "(inside the polar circle); porphyry cusps were used instead"
                : serr
        }
        return Houses(
            requested: request.houseSystem,
            system: system,
            cusps: values[1...12].map(normalizedDegrees),
            ascendant: normalizedDegrees(values[13]),
            midheaven: normalizedDegrees(values[14]),
            armc: normalizedDegrees(values[15]),
            vertex: normalizedDegrees(values[16]),
            fallbackReason: reason
        )
    }
}

/// The libswe version string (`swe_version`), for example "2.10.03".
func swissEphVersion() -> String {
    withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(cswisseph_max_chars)) { buffer in
        buffer[0] = 0
        return String(cString: swe_version(buffer.baseAddress!))
    }
}

/// `swe_julday` in the Gregorian calendar. Pure: touches no libswe state.
func swissEphJulianDay(year: Int, month: Int, day: Int, hour: Double) -> Double {
    swe_julday(Int32(clamping: year), Int32(clamping: month), Int32(clamping: day), hour, cswisseph_greg_cal)
}

/// Maps an angle into [0, 360); values already in range are returned unchanged (bit for bit).
func normalizedDegrees(_ degrees: Double) -> Double {
    guard degrees.isFinite, degrees < 0 || degrees >= 360 else { return degrees }
    let reduced = degrees.truncatingRemainder(dividingBy: 360)
    let positive = reduced < 0 ? reduced + 360 : reduced
    return positive >= 360 ? 0 : positive
}

extension CelestialBody {
    /// The libswe body number (`SE_SUN`…).
    var sweNumber: Int32 {
        switch self {
        case .sun: Int32(SE_SUN)
        case .moon: Int32(SE_MOON)
        case .mercury: Int32(SE_MERCURY)
        case .venus: Int32(SE_VENUS)
        case .mars: Int32(SE_MARS)
        case .jupiter: Int32(SE_JUPITER)
        case .saturn: Int32(SE_SATURN)
        case .uranus: Int32(SE_URANUS)
        case .neptune: Int32(SE_NEPTUNE)
        case .pluto: Int32(SE_PLUTO)
        case .meanNode: Int32(SE_MEAN_NODE)
        case .trueNode: Int32(SE_TRUE_NODE)
        case .chiron: Int32(SE_CHIRON)
        case .meanLilith: Int32(SE_MEAN_APOG)
        }
    }
}

extension HouseSystem {
    /// The libswe house-system letter, as the `int hsys` argument.
    var sweLetter: Int32 {
        let letter: Character =
            switch self {
            case .placidus: "P"
            case .koch: "K"
            case .porphyry: "O"
            case .regiomontanus: "R"
            case .campanus: "C"
            case .equal: "E"
            case .wholeSign: "W"
            }
        return Int32(letter.asciiValue!)
    }
}

extension Ayanamsa {
    /// The libswe sidereal mode (`SE_SIDM_…`).
    var siderealMode: Int32 {
        switch self {
        case .lahiri: Int32(SE_SIDM_LAHIRI)
        case .faganBradley: Int32(SE_SIDM_FAGAN_BRADLEY)
        case .raman: Int32(SE_SIDM_RAMAN)
        }
    }
}
