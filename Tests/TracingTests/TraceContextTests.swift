import Testing
import TraceContext

@Suite struct TraceparentParsingTests {
    static let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    @Test func validHeaderIsReadAndWrittenBackUnchanged() throws {
        let context = try #require(TraceContext.parse(traceparent: Self.valid))
        #expect(context.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(context.spanID.hex == "00f067aa0ba902b7")
        #expect(context.sampled)
        #expect(context.traceparent == Self.valid)
        let unsampled = try #require(
            TraceContext.parse(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
        )
        #expect(!unsampled.sampled)
    }

    @Test(arguments: [
        // all-zero trace id, all-zero span id
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        // version ff is invalid; versions are hex
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        // wrong lengths
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b77-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "",
        // uppercase hex is not allowed
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
        // version 00 has exactly four fields
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
        // wrong separators, spaces, non-ASCII
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0é",
    ])
    func invalidHeaderStartsANewTrace(_ header: String) {
        #expect(TraceContext.parse(traceparent: header) == nil)
    }

    @Test func laterVersionMayAddFieldsAfterADash() throws {
        let context = try #require(
            TraceContext.parse(traceparent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-what-ever")
        )
        #expect(context.traceID.hex == "4bf92f3577b34da6a3ce929d0e0e4736")
        // Only the sampled bit of a later version's flags is kept, and the answer is version 00.
        #expect(context.flags == 1)
        #expect(context.traceparent.hasPrefix("00-"))
        #expect(TraceContext.parse(traceparent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x") == nil)
    }

    @Test func overlongHeaderIsNotRead() {
        let long = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + String(repeating: "a", count: 600)
        #expect(TraceContext.parse(traceparent: long) == nil)
    }

    @Test func childKeepsTheTraceAndGetsANewSpan() throws {
        let parent = try #require(TraceContext.parse(traceparent: Self.valid, tracestate: "vendor=abc"))
        let child = parent.child()
        #expect(child.traceID == parent.traceID)
        #expect(child.spanID != parent.spanID)
        #expect(child.tracestate == "vendor=abc")
        let root = TraceContext.newRoot(sampled: true)
        #expect(root.traceparent.utf8.count == 55)
        #expect(TraceContext.parse(traceparent: root.traceparent) == root)
    }
}

@Suite struct TraceStateTests {
    @Test func entriesAreKeptInOrderWithOptionalSpaces() throws {
        let state = try #require(TraceState(parsing: "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7 ,,tenant@sys=x"))
        #expect(state.headerValue == "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7,tenant@sys=x")
    }

    @Test(arguments: [
        "novalue", "Upper=1", "k=", "k=a,k=b", "k=va=lue", "1abc=x", "k=a\u{7f}", "k=caf\u{e9}", "@sys=x", "t@Sys=x",
    ])
    func malformedStateIsDropped(_ header: String) {
        #expect(TraceState(parsing: header) == nil)
        // The traceparent is still used; only its tracestate goes.
        let context = TraceContext.parse(
            traceparent: TraceparentParsingTests.valid,
            tracestate: header
        )
        #expect(context?.tracestate == nil)
    }

    @Test func moreThan32EntriesIsInvalid() {
        let entries = (0..<33).map { "k\($0)=v" }.joined(separator: ",")
        #expect(TraceState(parsing: entries) == nil)
        #expect(TraceState(parsing: (0..<32).map { "k\($0)=v" }.joined(separator: ","))?.entries.count == 32)
    }

    @Test func longStateIsCutByWholeEntriesTo512() throws {
        let value = String(repeating: "x", count: 200)
        let state = try #require(TraceState(parsing: "a=\(value),b=\(value),c=\(value)"))
        #expect(state.entries.map(\.key) == ["a", "b"])
        #expect(state.headerValue.utf8.count <= TraceState.maxLength)
        #expect(TraceState(parsing: String(repeating: "k=v,", count: 3_000)) == nil)
    }
}
