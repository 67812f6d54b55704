import CSwissEph

/// A handle for many libswe evaluations in a row on one configured thread: what a search doing
/// thousands of positions (transits, returns) uses instead of one `await` per position.
///
/// Only valid inside the closure given to `Ephemeris.batch(_:)` or `batchOnCurrentThread(_:)`:
/// it is not `Sendable` and must not escape, because libswe's state belongs to the thread.
public struct EphemerisBatch: ~Copyable {
    let calculator: SwissEphCalculator
    let sidereal: Bool
    /// The zodiac every longitude is measured in.
    public let zodiac: Zodiac

    init(calculator: SwissEphCalculator, zodiac: Zodiac) {
        self.calculator = calculator
        self.zodiac = zodiac
        self.sidereal = zodiac != .tropical
        let state = SwissEphThreadState.current
        state.use(path: calculator.path)
        state.use(zodiac: zodiac)
    }

    /// `swe_calc_ut` of one body at one instant (longitude, latitude, distance and their speeds).
    /// - Throws: `EphemerisError` as `Ephemeris.positions` (a non-finite instant is `.invalidInput`).
    public func position(of body: CelestialBody, julianDayUT: Double) throws(EphemerisError) -> BodyPosition {
        guard julianDayUT.isFinite else {
            throw EphemerisError(kind: .invalidInput, message: "Julian day \(julianDayUT) is not a finite number")
        }
        return try calculator.position(of: body, julianDayUT: julianDayUT, sidereal: sidereal)
    }

    /// The bodies and houses of one instant and place, as `Ephemeris.positions` computes them.
    /// - Throws: `EphemerisError` as `Ephemeris.positions`.
    public func chart(
        julianDayUT: Double,
        latitude: Double,
        longitude: Double,
        bodies: [CelestialBody] = CelestialBody.planets,
        houseSystem: HouseSystem = .placidus
    ) throws(EphemerisError) -> ChartPositions {
        let request = try ChartRequest(
            julianDayUT: julianDayUT,
            latitude: latitude,
            longitude: longitude,
            bodies: bodies,
            houseSystem: houseSystem,
            zodiac: zodiac
        )
        return try calculator.chart(request)
    }
}

extension Ephemeris {
    /// Runs `work` — a whole search — on one of the pinned threads and suspends the caller once,
    /// instead of once per position.
    /// - Parameters:
    ///   - zodiac: the zodiac of every longitude `work` asks for.
    ///   - work: the computation; it gets a batch handle valid for its duration only.
    /// - Returns: what `work` returned.
    /// - Throws: what `work` threw, or `.calculationFailed` after `shutdown()`.
    /// - Important: `work` blocks its pinned thread meanwhile (a year of transits takes
    ///   milliseconds); cancellation is not observed.
    public func batch<T: Sendable>(
        zodiac: Zodiac = .tropical,
        _ work: @escaping @Sendable (borrowing EphemerisBatch) throws(EphemerisError) -> T
    ) async throws(EphemerisError) -> T {
        let calculator = self.calculator
        let worker = leastBusyWorker()
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<T, EphemerisError>, Never>) in
            let accepted = worker.submit {
                let batch = EphemerisBatch(calculator: calculator, zodiac: zodiac)
                continuation.resume(returning: Result { () throws(EphemerisError) in try work(batch) })
            }
            if !accepted {
                continuation.resume(returning: .failure(Self.shutDownError))
            }
        }
        return try result.get()
    }

    /// Runs `work` synchronously on the calling thread (benchmarks, dedicated threads).
    /// - Throws: what `work` threw.
    /// - Important: blocks the calling thread: never call it from a task on the Swift
    ///   concurrency pool (see `positionsOnCurrentThread`).
    public func batchOnCurrentThread<T>(
        zodiac: Zodiac = .tropical,
        _ work: (borrowing EphemerisBatch) throws(EphemerisError) -> T
    ) throws(EphemerisError) -> T {
        let batch = EphemerisBatch(calculator: calculator, zodiac: zodiac)
        return try work(batch)
    }
}
