import Foundation

/// Cuts a stream of bytes into chunks of `size` bytes (the last one shorter) and hands each to
/// `store` as soon as it is full, so the stream is never held whole: the user export's zip goes
/// into `user_export_chunks` this way while it is being written.
struct ChunkedOutput {
    /// The bytes of every chunk but the last.
    let size: Int
    private var buffer = Data()
    /// Chunks handed to `store` so far; the next one's `seq`.
    private(set) var chunks = 0
    /// Bytes written so far.
    private(set) var bytes = 0

    init(size: Int) {
        precondition(size > 0, "a chunk holds at least one byte")
        self.size = size
        buffer.reserveCapacity(size)
    }

    /// Appends `data`, storing each chunk it fills.
    /// - Throws: what `store` throws; the chunk is then not counted.
    mutating func write(_ data: Data, to store: (_ seq: Int, _ chunk: Data) throws -> Void) rethrows {
        var rest = data[...]
        while !rest.isEmpty {
            let taken = min(size - buffer.count, rest.count)
            buffer.append(rest.prefix(taken))
            rest = rest.dropFirst(taken)
            bytes += taken
            if buffer.count == size { try flush(to: store) }
        }
    }

    /// Stores what is left as the last, shorter chunk (nothing when the stream ended on a chunk).
    /// - Throws: what `store` throws.
    mutating func close(to store: (_ seq: Int, _ chunk: Data) throws -> Void) rethrows {
        if !buffer.isEmpty { try flush(to: store) }
    }

    private mutating func flush(to store: (_ seq: Int, _ chunk: Data) throws -> Void) rethrows {
        try store(chunks, buffer)
        chunks += 1
        // Kept, not reallocated: `store` has let go of the chunk by now, so this does not copy.
        buffer.removeAll(keepingCapacity: true)
    }
}
