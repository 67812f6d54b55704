import Synchronization

/// Runs actions at their deadlines from one timer task shared by every request.
///
/// The obvious way to bound a wait, racing it against `Task.sleep`, costs memory that outlives
/// the request: a cancelled sleep keeps its timer, and the task behind it, until the deadline it
/// was given. At thousands of requests per second with 10–30 s deadlines that is tens of
/// thousands of dead timers, which was most of the gateway's resident memory under load
/// (issue 16's memory goal). Here a request registers an action and removes it when done; one
/// task, running only while something is registered, wakes every `resolution` and fires what is
/// due. An action may fire up to `resolution` late, never early.
final class Deadlines: Sendable {
    /// A registration, to cancel it once what it guards is done.
    struct Token: Sendable, Hashable {
        fileprivate let id: UInt64
    }

    private struct Entry {
        let deadline: ContinuousClock.Instant
        let action: @Sendable () -> Void
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var nextID: UInt64 = 0
        var timerRunning = false
    }

    private let state = Mutex(State())
    private let resolution: Duration

    /// - Parameter resolution: how often the timer looks for due actions while any is registered.
    init(resolution: Duration = .milliseconds(100)) {
        self.resolution = resolution
    }

    /// Registers `action` to run once `delay` from now, unless cancelled first. The action runs on
    /// the timer's task, so it must be quick (resume a continuation, cancel a task).
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> Token {
        let deadline = ContinuousClock.now.advanced(by: delay)
        let (id, startTimer) = state.withLock { state -> (UInt64, Bool) in
            state.nextID += 1
            state.entries[state.nextID] = Entry(deadline: deadline, action: action)
            let start = !state.timerRunning
            state.timerRunning = true
            return (state.nextID, start)
        }
        if startTimer { Task { await self.run() } }
        return Token(id: id)
    }

    /// Removes a registration; its action will not run (it may already have run).
    func cancel(_ token: Token) {
        _ = state.withLock { $0.entries.removeValue(forKey: token.id) }
    }

    /// Actions registered and not yet fired or cancelled (for tests and metrics).
    var pending: Int { state.withLock { $0.entries.count } }

    private func run() async {
        while true {
            // Never cancelled: each sleep ends at its own deadline, so no timer outlives it.
            try? await Task.sleep(for: resolution)
            let now = ContinuousClock.now
            let (due, more) = state.withLock { state -> ([Entry], Bool) in
                var due: [Entry] = []
                for (id, entry) in state.entries where entry.deadline <= now {
                    due.append(entry)
                    state.entries[id] = nil
                }
                if state.entries.isEmpty { state.timerRunning = false }
                return (due, !state.entries.isEmpty)
            }
            for entry in due { entry.action() }
            if !more { return }
        }
    }
}
