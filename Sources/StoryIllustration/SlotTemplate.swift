/// A text with `{name}` slots, split once when loaded so that rendering only appends strings.
///
/// Slots are either fixed when compiled (a theme's palette) or filled at each render from a
/// list of values (a story's colours, a page number). Values go in as given, in one pass, so a
/// value that itself contains `{…}` is never expanded.
struct SlotTemplate: Sendable, Hashable {
    enum Piece: Sendable, Hashable {
        case text(String)
        /// The index of the value in the list given to `render`.
        case value(Int)
    }

    let pieces: [Piece]

    /// Why a template cannot be compiled: an unknown or unterminated slot.
    struct Invalid: Error, Sendable {
        var message: String
    }

    /// Compiles `text`.
    /// - Parameters:
    ///   - fixed: slots replaced now, by name.
    ///   - runtime: the slots filled at render time, in the order of `render`'s values.
    /// - Throws: `Invalid` naming a slot that is neither fixed nor runtime, or a `{` never closed.
    init(_ text: String, fixed: [String: String] = [:], runtime: [String] = []) throws(Invalid) {
        var pieces: [Piece] = []
        var literal = ""
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            literal += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}") else {
                throw Invalid(message: "a { is never closed in \(String(rest.prefix(40)).debugDescription)")
            }
            let name = String(rest[rest.index(after: open)..<close])
            if let value = fixed[name] {
                literal += value
            } else if let index = runtime.firstIndex(of: name) {
                if !literal.isEmpty { pieces.append(.text(literal)) }
                literal = ""
                pieces.append(.value(index))
            } else {
                throw Invalid(message: "unknown slot {\(name)}")
            }
            rest = rest[rest.index(after: close)...]
        }
        literal += rest
        if !literal.isEmpty { pieces.append(.text(literal)) }
        self.pieces = pieces
    }

    /// The text when every slot was fixed, else nil.
    var fixedText: String? {
        var text = ""
        for piece in pieces {
            guard case .text(let part) = piece else { return nil }
            text += part
        }
        return text
    }

    /// Appends the template to `output` with `values` in its runtime slots.
    func render(_ values: [String], into output: inout String) {
        for piece in pieces {
            switch piece {
            case .text(let text): output += text
            case .value(let index): output += values[index]
            }
        }
    }

    /// The template with `values` in its runtime slots.
    func render(_ values: [String]) -> String {
        var output = ""
        render(values, into: &output)
        return output
    }
}
