import CivilCalendar
import Foundation
import Synchronization

/// Planet positions and houses from the Swiss Ephemeris (libswe), computed on dedicated threads.
///
/// ```swift
/// let ephemeris = try Ephemeris(configuration: .init(threads: 2))
/// let jd = Ephemeris.julianDayUT(year: 1990, month: 10, day: 7, hour: 12)
/// let chart = try await ephemeris.positions(julianDayUT: jd, latitude: 50.45, longitude: 30.52)
/// ```
///
/// - Important: libswe keeps its state (ephemeris path, open files, sidereal mode) per thread in Debian's
///   build, so every computation runs in one synchronous call on a thread this type has configured: one of
///   its pinned threads (`positions`), or the caller's own (`positionsOnCurrentThread`). Never on the Swift
///   concurrency pool, where a blocking call would stall every task. On macOS libswe's state is global:
///   use one thread there and do not mix in `positionsOnCurrentThread`.
public final class Ephemeris: Sendable {
    /// The configuration this instance was created with.
    public let configuration: EphemerisConfiguration
    let calculator: SwissEphCalculator
    let workers: [PinnedThread]
    private let nextWorker = Atomic<Int>(0)

    /// Starts `configuration.threads` dedicated threads, sets the ephemeris path on each, and proves that the
    /// Swiss Ephemeris files are in use: computes the Sun and the Moon at J2000 on each thread and checks that
    /// libswe reports `SEFLG_SWIEPH`.
    ///
    /// - Parameter configuration: The data path, whether the Moshier fallback is acceptable, the thread count.
    /// - Throws: `EphemerisError` of kind `.filesMissing` when the data directory does not exist,
    ///   `.moshierFallback` (naming the path) when libswe fell back to the Moshier ephemeris and
    ///   `allowMoshierFallback` is false, `.invalidInput` for a thread count below 1 or an unusable path.
    /// - Important: Blocks the calling thread for a few milliseconds while the threads open the files: create
    ///   one instance at startup and share it.
    public init(configuration: EphemerisConfiguration = .init()) throws(EphemerisError) {
        try Self.validate(configuration)
        let calculator = SwissEphCalculator(configuration: configuration)
        let workers = (0..<configuration.threads).map { PinnedThread(name: "swe-\($0)") }
        for worker in workers {
            let outcome = worker.runAndWait { () -> Result<Void, EphemerisError> in
                Result { () throws(EphemerisError) in try calculator.verifyFiles() }
            }
            do {
                try (outcome ?? .failure(Self.shutDownError)).get()
            } catch {
                for worker in workers { worker.stop() }
                throw error
            }
        }
        self.configuration = configuration
        self.calculator = calculator
        self.workers = workers
    }

    deinit {
        shutdown()
    }

    /// The Julian day (UT) of a UTC date and time: `swe_julday(year, month, day, hour, SE_GREG_CAL)`.
    ///
    /// UTC is taken as UT, as astrology software does (UT1 − UTC is under a second).
    /// - Parameters:
    ///   - year: The Gregorian year.
    ///   - month: 1…12.
    ///   - day: 1…31.
    ///   - hour: The hour of the day in UTC with its fraction (`hour + minute / 60 + second / 3600`).
    /// - Returns: The Julian day number, for example 2451545.0 for 2000-01-01 12:00 UTC.
    /// - Important: Pure: callable on any thread.
    public static func julianDayUT(year: Int, month: Int, day: Int, hour: Double) -> Double {
        swissEphJulianDay(year: year, month: month, day: day, hour: hour)
    }

    /// The Julian day (UT) of an instant, through its UTC calendar date and time (see
    /// `julianDayUT(year:month:day:hour:)`).
    /// - Parameter date: The instant.
    /// - Returns: The Julian day number.
    /// - Important: Pure: callable on any thread.
    public static func julianDayUT(_ date: Date) -> Double {
        let parts = UTCParts(secondsSince1970: date.timeIntervalSince1970)
        return julianDayUT(year: parts.year, month: parts.month, day: parts.day, hour: parts.hour)
    }

    /// The upstream Swiss Ephemeris version of the linked libswe, for example "2.10.03": `swe_version` without
    /// a distribution suffix (Debian's build reports "2.10.03-deb1"; see `libraryBuildVersion`).
    public static var libraryVersion: String {
        let full = swissEphVersion()
        return full.split(separator: "-", maxSplits: 1).first.map(String.init) ?? full
    }

    /// The version string exactly as `swe_version` reports it, for example "2.10.03-deb1".
    public static var libraryBuildVersion: String {
        swissEphVersion()
    }

    /// Computes the bodies and houses of one instant and place on one of the pinned threads.
    ///
    /// Each call sets the sidereal mode it needs on that thread first (or resets it to tropical), so calls
    /// never leak state into each other.
    /// - Parameters:
    ///   - julianDayUT: The instant (see `julianDayUT(_:)`).
    ///   - latitude: Geographic latitude in degrees, −90…90, north positive.
    ///   - longitude: Geographic longitude in degrees, −180…180, east positive.
    ///   - bodies: The bodies to compute, returned in this order.
    ///   - houseSystem: The house system; Placidus and Koch fall back to Porphyry inside the polar circles
    ///     (see `Houses.system`).
    ///   - zodiac: Tropical or sidereal with an ayanamsa.
    /// - Returns: The positions and houses.
    /// - Throws: `EphemerisError`: `.invalidInput` for out-of-range arguments; `.calculationFailed` when libswe
    ///   reports an error (its message included) or after `shutdown()`; `.moshierFallback` when libswe did not
    ///   use the files and the configuration does not allow it; `.filesMissing` when a file a body needs is
    ///   missing (for example `seas_18.se1` for Chiron).
    /// - Important: Runs on a pinned thread and suspends the caller meanwhile; cancellation is not observed
    ///   (a chart takes well under a millisecond).
    public func positions(
        julianDayUT: Double,
        latitude: Double,
        longitude: Double,
        bodies: [CelestialBody] = CelestialBody.planets,
        houseSystem: HouseSystem = .placidus,
        zodiac: Zodiac = .tropical
    ) async throws(EphemerisError) -> ChartPositions {
        let request = try ChartRequest(
            julianDayUT: julianDayUT,
            latitude: latitude,
            longitude: longitude,
            bodies: bodies,
            houseSystem: houseSystem,
            zodiac: zodiac
        )
        let calculator = self.calculator
        let worker = leastBusyWorker()
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<ChartPositions, EphemerisError>, Never>) in
            let accepted = worker.submit {
                continuation.resume(returning: Result { () throws(EphemerisError) in try calculator.chart(request) })
            }
            if !accepted {
                continuation.resume(returning: .failure(Self.shutDownError))
            }
        }
        return try result.get()
    }

    /// Computes the bodies and houses of one instant and place synchronously, on the calling thread.
    ///
    /// For benchmarks that manage their own threads and for callers already on a dedicated thread. The first
    /// call on a thread sets the ephemeris path there (remembered in thread-local state, and closed when the
    /// thread exits); each call sets the sidereal mode it needs.
    /// - Parameters: As `positions(julianDayUT:latitude:longitude:bodies:houseSystem:zodiac:)`.
    /// - Returns: The positions and houses.
    /// - Throws: As `positions(julianDayUT:latitude:longitude:bodies:houseSystem:zodiac:)`, except that it
    ///   works after `shutdown()` too.
    /// - Important: Blocks the calling thread for the computation (tens of microseconds; the first call on a
    ///   thread opens the files): never call it from a task on the Swift concurrency pool. The caller's thread
    ///   keeps libswe file handles open until it exits.
    public func positionsOnCurrentThread(
        julianDayUT: Double,
        latitude: Double,
        longitude: Double,
        bodies: [CelestialBody] = CelestialBody.planets,
        houseSystem: HouseSystem = .placidus,
        zodiac: Zodiac = .tropical
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

    /// Stops the pinned threads after the jobs already queued; later `positions` calls fail with
    /// `.calculationFailed`. Idempotent; `deinit` calls it too.
    /// - Important: Does not wait for the threads to exit.
    public func shutdown() {
        for worker in workers { worker.stop() }
    }

    /// The pinned thread with the fewest queued or running jobs, searched from a rotating start so that
    /// ties spread evenly.
    func leastBusyWorker() -> PinnedThread {
        let count = workers.count
        if count == 1 { return workers[0] }
        let start = nextWorker.wrappingAdd(1, ordering: .relaxed).oldValue & Int.max
        var best = workers[start % count]
        var bestLoad = best.load
        var offset = 1
        while bestLoad > 0 && offset < count {
            let candidate = workers[(start + offset) % count]
            let load = candidate.load
            if load < bestLoad {
                best = candidate
                bestLoad = load
            }
            offset += 1
        }
        return best
    }

    static var shutDownError: EphemerisError {
        EphemerisError(
            kind: .calculationFailed,
            message: "the Ephemeris was shut down; create a new one (or stop calling it once shutdown() ran)"
        )
    }

    private static func validate(_ configuration: EphemerisConfiguration) throws(EphemerisError) {
        guard configuration.threads >= 1 else {
            throw EphemerisError(
                kind: .invalidInput,
                message: "EphemerisConfiguration.threads is \(configuration.threads); it must be at least 1"
            )
        }
        // libswe silently ignores a path of 255 bytes or more and uses its built-in default instead.
        guard !configuration.path.isEmpty, configuration.path.utf8.count < 255 else {
            throw EphemerisError(
                kind: .invalidInput,
                message: "ephemeris path '\(configuration.path)' must be 1 to 254 bytes long (libswe's limit)"
            )
        }
        let directories = configuration.path.split(separator: ":").map(String.init)
        let anyExists = directories.contains { directory in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) && isDirectory.boolValue
        }
        guard anyExists else {
            throw EphemerisError(
                kind: .filesMissing,
                message: "the Swiss Ephemeris data directory '\(configuration.path)' does not exist; install "
                    + "Debian's swe-standard-data (/usr/share/libswe/ephe) or set SE_EPHE_PATH or "
                    + "EphemerisConfiguration.path to the directory holding sepl_*.se1, semo_*.se1 and seas_*.se1"
            )
        }
    }
}

/// The UTC calendar date and hour of an instant, without Calendar (proleptic Gregorian).
struct UTCParts: Equatable {
    var year: Int
    var month: Int
    var day: Int
    /// `hour + minute / 60 + second / 3600`, evaluated in that order (as the reference generator does).
    var hour: Double

    init(secondsSince1970 seconds: Double) {
        let days = (seconds / 86_400).rounded(.down)
        let secondsOfDay = seconds - days * 86_400
        let whole = secondsOfDay.rounded(.down)
        let fraction = secondsOfDay - whole
        let wholeSeconds = Int(whole)
        let hours = wholeSeconds / 3600
        let minutes = (wholeSeconds % 3600) / 60
        let secs = Double(wholeSeconds % 60) + fraction
        self.hour = Double(hours) + Double(minutes) / 60 + secs / 3600

        let date = Gregorian.date(daysSince1970: Int(days))
        self.year = date.year
        self.month = date.month
        self.day = date.day
    }
}
