import CRabbitMQ
import Foundation
import Logging

/// The log metadata keys of the whole package, one type: this module's own (`amqp.*`) here, the
/// worker runtime's (`job.*`, `error.*`) in an extension in WorkerRuntime, which imports this
/// module anyway. The broker wrapper stays a leaf (no dependency on the runtime or on a shared
/// target) and never names the runtime's keys, yet both log the queue under the same `amqp.queue`.
/// `package`, not `public`: the keys are this package's log schema, not part of the wrapper's API.
package enum LogKey {
    package static let url = "amqp.url"
    package static let role = "amqp.role"
    package static let generation = "amqp.generation"
    package static let queue = "amqp.queue"
    package static let queues = "amqp.queues"
    package static let error = "amqp.error"
    /// The number of a connection attempt (the runtime's `attempt` is a job's).
    package static let reconnectAttempt = "amqp.attempt"
    package static let delayMilliseconds = "amqp.delay_ms"
    package static let replyCode = "amqp.reply_code"
    package static let count = "amqp.count"
    package static let heartbeat = "amqp.heartbeat_s"
}

/// Monotonic time in nanoseconds (CLOCK_MONOTONIC; cheap, through the vDSO).
func monotonicNow() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// `now + duration`, saturating, in monotonic nanoseconds.
func deadline(after duration: Duration, from now: UInt64 = monotonicNow()) -> UInt64 {
    let nanos = duration.nanoseconds
    if nanos <= 0 { return now }
    let (sum, overflow) = now.addingReportingOverflow(UInt64(nanos))
    return overflow ? .max : sum
}

/// The wake-up descriptor (an eventfd) of a connection loop: callers signal it after queueing a
/// command, and the loop polls it together with the socket.
final class Waker: Sendable {
    let fd: Int32

    init() {
        // EFD_NONBLOCK | EFD_CLOEXEC
        let fd = eventfd(0, Int32(0o4000 | 0o2000000))
        precondition(fd >= 0, "eventfd failed: errno \(errno)")
        self.fd = fd
    }

    deinit {
        close(fd)
    }

    /// Makes the next (or current) `poll` of the loop return.
    func signal() {
        var one: UInt64 = 1
        _ = write(fd, &one, MemoryLayout<UInt64>.size)
    }

    /// Resets the counter after `poll` reported the descriptor readable.
    func clear() {
        var value: UInt64 = 0
        _ = read(fd, &value, MemoryLayout<UInt64>.size)
    }
}

/// `poll()` on a connection's socket and its waker, without allocating per call.
///
/// - Important: Owned and used by one loop thread.
final class Poller {
    private let fds = UnsafeMutablePointer<pollfd>.allocate(capacity: 2)

    deinit {
        fds.deallocate()
    }

    /// Waits until the waker or the socket is readable, or `timeoutMilliseconds` passed.
    /// - Returns: Whether the socket and the waker were readable (or in error, for the socket).
    func wait(waker: Waker, socketFD: Int32?, timeoutMilliseconds: Int32) -> (socket: Bool, wake: Bool) {
        fds[0] = pollfd(fd: waker.fd, events: Int16(POLLIN), revents: 0)
        var count: nfds_t = 1
        if let socketFD, socketFD >= 0 {
            fds[1] = pollfd(fd: socketFD, events: Int16(POLLIN), revents: 0)
            count = 2
        }
        let result = poll(fds, count, timeoutMilliseconds)
        guard result > 0 else { return (false, false) }
        let wake = fds[0].revents != 0
        let socket = count == 2 && fds[1].revents != 0
        if wake { waker.clear() }
        return (socket, wake)
    }
}

/// How long a loop may sleep in `poll` before it must call into librabbitmq again: at most a quarter
/// of the heartbeat (heartbeats are sent and checked only inside library calls), at most 1 s.
func pollInterval(heartbeatSeconds: Int) -> UInt64 {
    let milliseconds = heartbeatSeconds > 0 ? min(max(heartbeatSeconds * 1000 / 4, 50), 1000) : 1000
    return UInt64(milliseconds) * 1_000_000
}

/// Milliseconds from `now` until `deadline`, for `poll`, clamped to `0...maximum`.
func millisecondsUntil(_ deadline: UInt64, now: UInt64, maximum: UInt64) -> Int32 {
    guard deadline > now else { return 0 }
    let nanos = min(deadline - now, maximum)
    return Int32((nanos + 999_999) / 1_000_000)
}

/// Starts a dedicated thread (never the Swift concurrency pool) for one connection loop.
func startLoopThread(name: String, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread {
        _ = crabbitmq_set_thread_name(name)  // shown by top -H, perf, gdb (15 characters at most)
        body()
    }
    // librabbitmq decodes nested field tables recursively, without a depth limit, on this
    // thread: a header of thousands of nested arrays (a 128 KiB frame holds ~26,000) needs a
    // deep stack, so the loop threads get 16 MiB of (lazily committed) address space.
    thread.stackSize = 16 << 20
    thread.name = name
    thread.start()
}
