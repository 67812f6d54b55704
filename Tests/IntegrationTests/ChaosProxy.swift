import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
import TestProcesses
#endif

/// A TCP proxy on loopback that the chaos suite puts between the workers and a server, so it can
/// cut their connections the way a network partition does: no FIN, no RST, just silence.
///
/// `cut()` blackholes every connection open at that moment and every one accepted until `heal()`:
/// neither side's bytes are read or passed on, and the sockets stay open. `heal()` resets the
/// blackholed connections (what a peer answers to segments of a connection it has forgotten) and
/// passes new ones through again. A client can only notice a cut by its own deadlines: AMQP
/// heartbeats, the database client's wait for an answer.
final class ChaosProxy: Sendable {
    let port: Int
    private let upstreamPort: Int
    private let listener: Int32

    /// One proxied connection. Only its pump thread closes the sockets (after a `resetRequested`
    /// or `closeRequested`), so a descriptor number is never reused under a running poll.
    private final class Link: Sendable {
        let client: Int32
        let server: Int32
        let blackholed = Atomic<Bool>(false)
        let resetRequested = Atomic<Bool>(false)
        let closeRequested = Atomic<Bool>(false)
        let closed = Atomic<Bool>(false)

        init(client: Int32, server: Int32) {
            self.client = client
            self.server = server
        }

        /// Closes both sides with a reset (SO_LINGER 0), once.
        func reset() {
            guard !closed.exchange(true, ordering: .relaxed) else { return }
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            for descriptor in [client, server] {
                setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                Glibc.close(descriptor)
            }
        }

        /// Closes both sides politely (one side ended its connection), once.
        func close() {
            guard !closed.exchange(true, ordering: .relaxed) else { return }
            Glibc.close(client)
            Glibc.close(server)
        }
    }

    private struct State {
        var links: [Link] = []
        var cut = false
        var stopped = false
        var passBeforeRefusing = 0
        var refuseCount = 0
    }

    private let state = Mutex(State())

    /// Listens on a free loopback port and forwards to `127.0.0.1:upstreamPort`.
    init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 256) == 0 else {
            Glibc.close(descriptor)
            throw TestFailure("chaos proxy: cannot listen")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        listener = descriptor
        port = Int(UInt16(bigEndian: actual.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "chaos-proxy-\(port)"
        thread.start()
    }

    static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// Blackholes every connection, open or new, until `heal()`.
    func cut() {
        state.withLock { state in
            state.cut = true
            for link in state.links { link.blackholed.store(true, ordering: .relaxed) }
        }
    }

    /// Resets the blackholed connections and passes new ones through again.
    /// - Returns: how many connections were cut.
    @discardableResult
    func heal() -> Int {
        let doomed = state.withLock { state -> [Link] in
            state.cut = false
            let doomed = state.links.filter { $0.blackholed.load(ordering: .relaxed) }
            state.links.removeAll { $0.blackholed.load(ordering: .relaxed) }
            return doomed
        }
        for link in doomed { link.resetRequested.store(true, ordering: .relaxed) }
        return doomed.count
    }

    /// Lets the next `passing` new connections through, then resets the `refusing` after them as
    /// soon as they are accepted (a server going down between two connections of one client).
    func refuse(_ refusing: Int, after passing: Int) {
        state.withLock { state in
            state.passBeforeRefusing = passing
            state.refuseCount = refusing
        }
    }

    /// Stops accepting and closes every connection.
    func stop() {
        let links = state.withLock { state -> [Link] in
            state.stopped = true
            defer { state.links.removeAll() }
            return state.links
        }
        for link in links { link.closeRequested.store(true, ordering: .relaxed) }
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
        while !state.withLock({ $0.stopped }) {
            var descriptor = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 200) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            let refused = state.withLock { state -> Bool in
                if state.passBeforeRefusing > 0 {
                    state.passBeforeRefusing -= 1
                    return false
                }
                guard state.refuseCount > 0 else { return false }
                state.refuseCount -= 1
                return true
            }
            if refused {
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                Glibc.close(client)
                continue
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: upstreamPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                // The server is down (a restart): refuse, as the server itself would.
                Link(client: client, server: server).reset()
                continue
            }
            let link = Link(client: client, server: server)
            let accepted = state.withLock { state -> Bool in
                guard !state.stopped else { return false }
                if state.cut { link.blackholed.store(true, ordering: .relaxed) }
                state.links.append(link)
                return true
            }
            guard accepted else {
                link.close()
                continue
            }
            let pump = Thread { [self] in self.pump(link) }
            pump.name = "chaos-pump"
            pump.start()
        }
        Glibc.close(listener)
    }

    /// Passes bytes both ways until either side closes; blackholed, it touches neither socket.
    private func pump(_ link: Link) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !link.closed.load(ordering: .relaxed) {
            if link.resetRequested.load(ordering: .relaxed) {
                link.reset()
                return
            }
            if link.closeRequested.load(ordering: .relaxed) {
                link.close()
                return
            }
            if link.blackholed.load(ordering: .relaxed) {
                usleep(50_000)
                continue
            }
            var descriptors = [
                pollfd(fd: link.client, events: Int16(POLLIN), revents: 0),
                pollfd(fd: link.server, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&descriptors, 2, 100)
            guard ready > 0, !link.blackholed.load(ordering: .relaxed) else { continue }
            for (index, descriptor) in descriptors.enumerated() where descriptor.revents != 0 {
                let from = index == 0 ? link.client : link.server
                let to = index == 0 ? link.server : link.client
                let count = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
                guard count > 0, Self.sendAll(to, buffer, count) else {
                    state.withLock { state in state.links.removeAll { $0 === link } }
                    link.close()
                    return
                }
            }
        }
    }

    private static func sendAll(_ descriptor: Int32, _ buffer: [UInt8], _ count: Int) -> Bool {
        var sent = 0
        while sent < count {
            let written = buffer[sent..<count].withUnsafeBytes {
                send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard written > 0 else { return false }
            sent += written
        }
        return true
    }
}
