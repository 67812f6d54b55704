import CSwissEph
import Foundation

extension Ephemeris {
    /// Tropical house cusps cast from a given midheaven rather than from an instant and a place: what a
    /// composite chart needs, whose MC is a midpoint and belongs to no moment.
    ///
    /// Method: the mean obliquity ε of `julianDayUT` (`swe_calc_ut` with `SE_ECL_NUT`, its second value); the
    /// ARMC is the right ascension of the MC's ecliptic point, `atan2(sin MC · cos ε, cos MC)`; the cusps are
    /// `swe_houses_armc_ex2(ARMC, latitude, ε, system)`. Placidus and Koch fall back to Porphyry inside the
    /// polar circles, as `positions` does (`Houses.system` then says `.porphyry`).
    /// - Parameters:
    ///   - midheaven: the MC in tropical degrees (any finite angle).
    ///   - latitude: the geographic latitude to cast the houses at, −90…90.
    ///   - julianDayUT: the instant whose mean obliquity is used.
    ///   - houseSystem: the house system.
    /// - Returns: the houses (`armc` the derived ARMC; `vertex` as libswe gives it for that ARMC).
    /// - Throws: `EphemerisError` `.invalidInput` for a non-finite or out-of-range argument,
    ///   `.calculationFailed` when libswe fails (or after `shutdown()`).
    /// - Important: Runs on a pinned thread and suspends the caller meanwhile.
    public func housesFromMidheaven(
        midheaven: Double,
        latitude: Double,
        julianDayUT: Double,
        houseSystem: HouseSystem
    ) async throws(EphemerisError) -> Houses {
        try Self.validateMidheavenInput(midheaven: midheaven, latitude: latitude, julianDayUT: julianDayUT)
        let calculator = self.calculator
        let worker = leastBusyWorker()
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Houses, EphemerisError>, Never>) in
            let accepted = worker.submit {
                continuation.resume(
                    returning: Result { () throws(EphemerisError) in
                        try calculator.housesFromMidheaven(
                            midheaven: midheaven,
                            latitude: latitude,
                            julianDayUT: julianDayUT,
                            houseSystem: houseSystem
                        )
                    }
                )
            }
            if !accepted { continuation.resume(returning: .failure(Self.shutDownError)) }
        }
        return try result.get()
    }

    /// `housesFromMidheaven(midheaven:latitude:julianDayUT:houseSystem:)` on the calling thread.
    /// - Throws: as the async form.
    /// - Important: Blocks the calling thread (microseconds): never call it from a task on the Swift concurrency
    ///   pool (see `positionsOnCurrentThread`).
    public func housesFromMidheavenOnCurrentThread(
        midheaven: Double,
        latitude: Double,
        julianDayUT: Double,
        houseSystem: HouseSystem
    ) throws(EphemerisError) -> Houses {
        try Self.validateMidheavenInput(midheaven: midheaven, latitude: latitude, julianDayUT: julianDayUT)
        return try calculator.housesFromMidheaven(
            midheaven: midheaven,
            latitude: latitude,
            julianDayUT: julianDayUT,
            houseSystem: houseSystem
        )
    }

    private static func validateMidheavenInput(
        midheaven: Double,
        latitude: Double,
        julianDayUT: Double
    ) throws(EphemerisError) {
        guard midheaven.isFinite, julianDayUT.isFinite else {
            throw EphemerisError(
                kind: .invalidInput,
                message: "midheaven \(midheaven) and Julian day \(julianDayUT) must be finite numbers"
            )
        }
        guard latitude.isFinite, (-90.0...90.0).contains(latitude) else {
            throw EphemerisError(
                kind: .invalidInput,
                message: "latitude \(latitude) is outside -90...90 degrees (north positive)"
            )
        }
    }
}

extension SwissEphCalculator {
    /// The mean obliquity of the ecliptic at `julianDayUT`, in degrees (`SE_ECL_NUT`, second value).
    func meanObliquity(julianDayUT: Double) throws(EphemerisError) -> Double {
        let state = SwissEphThreadState.current
        state.use(path: path)
        state.use(zodiac: .tropical)
        var xx: (Double, Double, Double, Double, Double, Double) = (0, 0, 0, 0, 0, 0)
        var returned: Int32 = 0
        // SE_ECL_NUT is −1 in swephexp.h: "planet" number of the obliquity and nutation.
        let eclipticAndNutation: Int32 = -1
        let serr = withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(cswisseph_max_chars)) { buffer in
            buffer[0] = 0
            returned = withUnsafeMutableBytes(of: &xx) { raw in
                swe_calc_ut(
                    julianDayUT,
                    eclipticAndNutation,
                    0,
                    raw.baseAddress!.assumingMemoryBound(to: Double.self),
                    buffer.baseAddress!
                )
            }
            return buffer[0] == 0 ? "" : String(cString: buffer.baseAddress!)
        }
        guard returned >= 0, xx.1.isFinite else {
            throw EphemerisError(
                kind: .calculationFailed,
                message: "swe_calc_ut(SE_ECL_NUT) failed at Julian day \(julianDayUT) (UT): "
                    + (serr.isEmpty ? "no message" : serr)
            )
        }
        return xx.1
    }

    /// See `Ephemeris.housesFromMidheaven(midheaven:latitude:julianDayUT:houseSystem:)`.
    func housesFromMidheaven(
        midheaven: Double,
        latitude: Double,
        julianDayUT: Double,
        houseSystem: HouseSystem
    ) throws(EphemerisError) -> Houses {
        let obliquity = try meanObliquity(julianDayUT: julianDayUT)
        let radians = Double.pi / 180
        let mc = normalizedDegrees(midheaven) * radians
        let armc = normalizedDegrees(atan2(sin(mc) * cos(obliquity * radians), cos(mc)) / radians)

        func cast(_ system: HouseSystem) -> (returned: Int32, values: [Double], message: String) {
            var returned: Int32 = 0
            var values: [Double] = []
            let message = withUnsafeTemporaryAllocation(of: Double.self, capacity: 23) { numbers in
                numbers.initialize(repeating: 0)
                let text = withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(cswisseph_max_chars)) {
                    buffer in
                    buffer[0] = 0
                    returned = swe_houses_armc_ex2(
                        armc,
                        latitude,
                        obliquity,
                        system.sweLetter,
                        numbers.baseAddress!,
                        numbers.baseAddress! + 13,
                        nil,
                        nil,
                        buffer.baseAddress!
                    )
                    return buffer[0] == 0 ? "" : String(cString: buffer.baseAddress!)
                }
                values = Array(numbers)
                return text
            }
            return (returned, values, message)
        }

        var system = houseSystem
        var outcome = cast(system)
        var reason: String?
        if outcome.returned < 0 {
            guard houseSystem != .porphyry else {
                throw EphemerisError(
                    kind: .calculationFailed,
                    message: "swe_houses_armc_ex2 failed for porphyry at ARMC \(armc), latitude \(latitude): "
                        + (outcome.message.isEmpty ? "no message" : outcome.message)
                )
            }
            // Cast Porphyry explicitly rather than trusting the cusps libswe left behind.
            reason =
                outcome.message.isEmpty
                ? "\(houseSystem.rawValue) houses are undefined at latitude \(latitude); porphyry cusps were used"
                : outcome.message
            system = .porphyry
            outcome = cast(.porphyry)
            guard outcome.returned >= 0 else {
                throw EphemerisError(
                    kind: .calculationFailed,
                    message: "swe_houses_armc_ex2 failed for porphyry at ARMC \(armc), latitude \(latitude): "
                        + (outcome.message.isEmpty ? "no message" : outcome.message)
                )
            }
        }
        let values = outcome.values
        return Houses(
            requested: houseSystem,
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
