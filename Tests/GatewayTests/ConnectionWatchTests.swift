import Foundation
import Synchronization
import Testing

@testable import Gateway

/// What an event stream registers to learn that its client closed the connection: the action runs
/// once, at the close, or at once when the connection is already closed or gone; never for another
/// connection, nor after its registration was cancelled; nothing is kept once a connection ended.
@Suite("Connection watch")
struct ConnectionWatchTests {
    final class Counter: Sendable {
        let value = Mutex(0)
        func add() { value.withLock { $0 += 1 } }
        var count: Int { value.withLock { $0 } }
    }

    @Test func theActionRunsOnceWhenItsConnectionsInputCloses() {
        let watch = ConnectionWatch()
        let mine = watch.opened()
        let other = watch.opened()
        #expect(mine != other)
        let counter = Counter()
        let registration = watch.onInputClosed(header: String(mine)) { counter.add() }
        #expect(registration != nil)
        watch.inputClosed(other)
        #expect(counter.count == 0)
        watch.inputClosed(mine)
        #expect(counter.count == 1)
        watch.inputClosed(mine)
        watch.inputClosed(mine, ended: true)
        #expect(counter.count == 1)
        #expect(watch.count == 1)
        watch.inputClosed(other, ended: true)
        #expect(watch.count == 0)
    }

    @Test func aClosedOrEndedConnectionRunsTheActionAtOnce() {
        let watch = ConnectionWatch()
        let closed = watch.opened()
        watch.inputClosed(closed)
        let ended = watch.opened()
        watch.inputClosed(ended, ended: true)
        let counter = Counter()
        #expect(watch.onInputClosed(header: String(closed)) { counter.add() } == nil)
        #expect(counter.count == 1)
        #expect(watch.onInputClosed(header: String(ended)) { counter.add() } == nil)
        #expect(counter.count == 2)
    }

    @Test func aCancelledRegistrationNeverRuns() {
        let watch = ConnectionWatch()
        let id = watch.opened()
        let counter = Counter()
        let registration = watch.onInputClosed(header: String(id)) { counter.add() }
        watch.cancel(registration)
        watch.inputClosed(id, ended: true)
        #expect(counter.count == 0)
        #expect(watch.count == 0)
    }

    /// No handler in the pipeline (no header) or a header that is not an id: nothing to watch.
    @Test(arguments: [nil, "", "abc", "-1", "1.5", String(repeating: "9", count: 21)])
    func withoutAUsableHeaderNothingIsRegistered(header: String?) {
        let watch = ConnectionWatch()
        let counter = Counter()
        #expect(watch.onInputClosed(header: header) { counter.add() } == nil)
        #expect(counter.count == 0)
    }
}
