import CSwissEph
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What this module has set in libswe's state on the current thread.
///
/// Debian's libswe keeps its whole state (ephemeris path, open files, sidereal mode, caches) in thread-local
/// storage, so each thread must be configured before its first computation; this object remembers what was
/// set so that it is set once per thread, not once per call.
///
/// - Important: Reached only through `current`, so only by the thread it belongs to; never shared. On macOS
///   libswe's state is process-global instead, and two threads must not compute at the same time there.
final class SwissEphThreadState {
    /// The sidereal mode libswe has on this thread, as far as this module knows.
    enum SiderealMode: Equatable {
        /// Not set by this module yet (or lost by a path change): set it before the next computation.
        case unknown
        /// The library default (Fagan/Bradley, unused by tropical computations).
        case tropical
        /// `swe_set_sid_mode(mode, 0, 0)`.
        case sidereal(Int32)
    }

    /// The ephemeris path given to `swe_set_ephe_path` on this thread, if any.
    private(set) var path: String?
    /// The sidereal mode set on this thread.
    private var siderealMode: SiderealMode = .unknown

    /// The state of the calling thread, created on first use and released when the thread exits.
    static var current: SwissEphThreadState {
        if let pointer = pthread_getspecific(threadStateKey) {
            return Unmanaged<SwissEphThreadState>.fromOpaque(pointer).takeUnretainedValue()
        }
        let state = SwissEphThreadState()
        let rc = pthread_setspecific(threadStateKey, Unmanaged.passRetained(state).toOpaque())
        precondition(rc == 0, "pthread_setspecific failed: \(rc)")
        return state
    }

    /// Sets the ephemeris path on this thread unless it is already set to `path`.
    ///
    /// `swe_set_ephe_path` closes the open files and clears libswe's caches, so it runs only when the path
    /// changes (a new thread, or another `Ephemeris` with another path on the same thread).
    func use(path: String) {
        guard self.path != path else { return }
        path.withCString { swe_set_ephe_path($0) }
        self.path = path
        siderealMode = .unknown
    }

    /// Sets the sidereal mode `zodiac` needs on this thread, when it differs from the current one.
    func use(zodiac: Zodiac) {
        let wanted: SiderealMode
        switch zodiac {
        case .tropical: wanted = .tropical
        case .sidereal(let ayanamsa): wanted = .sidereal(ayanamsa.siderealMode)
        }
        guard wanted != siderealMode else { return }
        switch wanted {
        case .sidereal(let mode): swe_set_sid_mode(mode, 0, 0)
        case .tropical, .unknown: swe_set_sid_mode(Int32(SE_SIDM_FAGAN_BRADLEY), 0, 0)
        }
        siderealMode = wanted
    }

    /// Closes libswe's files on this thread (`swe_close`) and forgets what was set.
    func close() {
        #if !canImport(Darwin)
        // On macOS the state is process-global and other threads may still use the files.
        if path != nil {
            swe_close()
        }
        #endif
        path = nil
        siderealMode = .unknown
    }
}

/// The thread-local slot of `SwissEphThreadState`; its destructor closes the thread's files and releases
/// the state when a thread that used libswe exits.
private let threadStateKey: pthread_key_t = {
    var key = pthread_key_t()
    let rc = pthread_key_create(&key, releaseThreadState)
    precondition(rc == 0, "pthread_key_create failed: \(rc)")
    return key
}()

#if canImport(Darwin)
private func releaseThreadState(_ pointer: UnsafeMutableRawPointer) {
    // libswe's state is global on macOS: closing it here would pull files from under other threads.
    Unmanaged<SwissEphThreadState>.fromOpaque(pointer).release()
}
#else
private func releaseThreadState(_ pointer: UnsafeMutableRawPointer?) {
    guard let pointer else { return }
    let state = Unmanaged<SwissEphThreadState>.fromOpaque(pointer)
    // Runs on the exiting thread, whose libswe thread-local state is still valid here.
    state.takeUnretainedValue().close()
    state.release()
}
#endif
