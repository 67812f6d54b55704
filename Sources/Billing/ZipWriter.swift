import ByteCodecs
import Foundation

/// A small ZIP writer for the user export: entries are stored (method 0, no compression: the
/// illustrations are PNG or SVG and the document is read once), each with its CRC-32, in the
/// classic format without ZIP64, so every size and offset must fit 32 bits and the entry count
/// 16 bits; `maxBytes` bounds the whole archive far below that.
///
/// It streams: it keeps only the central directory, and hands each entry's bytes to the caller,
/// who writes them in order (`add`, or `addEntry` and then the content), then the tail `finish`
/// returns. An entry is checked before any of it is handed out (`ZipWriterError.tooLarge` before
/// one that would pass `maxBytes`); a refused entry leaves the writer unchanged.
public struct ZipWriter: Sendable {
    /// The largest archive (entries, headers and directory): at most `UInt32.max - 1`.
    public let maxBytes: Int
    /// The bytes handed out so far (local headers and contents).
    public private(set) var written = 0
    private var directory = Data()
    private var entries = 0
    private var names: Set<String> = []
    /// The most entries without ZIP64.
    public static let maxEntries = 65_535
    /// The longest entry name, in UTF-8 bytes.
    public static let maxNameBytes = 1_024

    /// - Parameter maxBytes: the bound of the whole archive (clamped to 1…`UInt32.max - 1`).
    public init(maxBytes: Int) {
        self.maxBytes = min(max(maxBytes, 1), Int(UInt32.max) - 1)
    }

    /// The bytes the archive will have once `finish` adds the central directory and its end.
    public var size: Int { written + directory.count + 22 }

    /// Records a stored entry of `content` and returns its bytes (local header and content),
    /// which the caller writes next.
    /// - Throws: as `addEntry`.
    public mutating func add(_ name: String, _ content: Data, modified: Date = Date()) throws(ZipWriterError) -> Data {
        var entry = try addEntry(name, byteCount: content.count, crc: CRC32.checksum(content), modified: modified)
        entry.append(content)
        return entry
    }

    /// Records a stored entry of `byteCount` bytes whose CRC-32 is `crc` and returns its local
    /// header: the caller writes it, then exactly those bytes.
    /// - Parameters:
    ///   - name: a relative path with `/` separators: not empty, no `..` component, no leading `/`
    ///     or `\`, unique within the archive.
    ///   - modified: the entry's time, in UTC (ZIP's DOS time has 2-second steps, 1980…2107).
    /// - Throws: `ZipWriterError` (`invalidName`, `duplicateName`, `tooManyEntries`, `tooLarge`);
    ///   the writer is then unchanged.
    public mutating func addEntry(
        _ name: String,
        byteCount: Int,
        crc: UInt32,
        modified: Date = Date()
    ) throws(ZipWriterError) -> Data {
        let nameBytes = Data(name.utf8)
        let components = name.split(separator: "/", omittingEmptySubsequences: false)
        guard !nameBytes.isEmpty, nameBytes.count <= Self.maxNameBytes, !name.hasPrefix("/"),
            !name.contains("\\"), !name.contains("\0"),
            !components.contains(where: { $0 == ".." || $0 == "." || $0.isEmpty })
        else { throw .invalidName(name) }
        guard !names.contains(name) else { throw .duplicateName(name) }
        guard entries < Self.maxEntries else { throw .tooManyEntries }
        // The local header (30 + name), the data, the directory entry (46 + name).
        let added = 30 + nameBytes.count + byteCount + 46 + nameBytes.count
        guard byteCount >= 0, size + added <= maxBytes else { throw .tooLarge(limit: maxBytes) }
        let (time, date) = Self.dosTime(modified)
        let offset = UInt32(written)
        // Bit 11: the name is UTF-8.
        let flags: UInt16 = 1 << 11
        var local = Data()
        local.reserveCapacity(30 + nameBytes.count)
        local.append(le32: 0x0403_4b50)
        local.append(le16: 20)  // version needed: 2.0
        local.append(le16: flags)
        local.append(le16: 0)  // stored
        local.append(le16: time)
        local.append(le16: date)
        local.append(le32: crc)
        local.append(le32: UInt32(byteCount))
        local.append(le32: UInt32(byteCount))
        local.append(le16: UInt16(nameBytes.count))
        local.append(le16: 0)
        local.append(nameBytes)
        var central = Data()
        central.append(le32: 0x0201_4b50)
        central.append(le16: 0x0314)  // made by: Unix, 2.0
        central.append(le16: 20)
        central.append(le16: flags)
        central.append(le16: 0)
        central.append(le16: time)
        central.append(le16: date)
        central.append(le32: crc)
        central.append(le32: UInt32(byteCount))
        central.append(le32: UInt32(byteCount))
        central.append(le16: UInt16(nameBytes.count))
        central.append(le16: 0)  // extra
        central.append(le16: 0)  // comment
        central.append(le16: 0)  // disk
        central.append(le16: 0)  // internal attributes
        central.append(le32: 0o100644 << 16)  // a regular file, rw-r--r--
        central.append(le32: offset)
        central.append(nameBytes)
        directory.append(central)
        written += local.count + byteCount
        entries += 1
        names.insert(name)
        return local
    }

    /// The archive's tail, written after every entry: the central directory and its end record.
    public func finish() -> Data {
        var tail = directory
        tail.append(le32: 0x0605_4b50)
        tail.append(le16: 0)
        tail.append(le16: 0)
        tail.append(le16: UInt16(entries))
        tail.append(le16: UInt16(entries))
        tail.append(le32: UInt32(directory.count))
        tail.append(le32: UInt32(written))
        tail.append(le16: 0)
        return tail
    }

    /// MS-DOS time and date of `moment` in UTC, clamped to the years ZIP can say.
    static func dosTime(_ moment: Date) -> (time: UInt16, date: UInt16) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: moment)
        let year = min(max(parts.year ?? 1980, 1980), 2107)
        let time = UInt16((parts.hour ?? 0) << 11 | (parts.minute ?? 0) << 5 | (parts.second ?? 0) / 2)
        let date = UInt16((year - 1980) << 9 | (parts.month ?? 1) << 5 | (parts.day ?? 1))
        return (time, date)
    }
}

/// Why an entry was not added to a `ZipWriter`.
public enum ZipWriterError: Error, Sendable, Hashable, CustomStringConvertible {
    case invalidName(String)
    case duplicateName(String)
    case tooManyEntries
    /// The archive would pass its bound.
    case tooLarge(limit: Int)

    public var description: String {
        switch self {
        case .invalidName(let name): return "invalid entry name \(name.prefix(80).debugDescription)"
        case .duplicateName(let name): return "duplicate entry name \(name.prefix(80).debugDescription)"
        case .tooManyEntries: return "more than \(ZipWriter.maxEntries) entries"
        case .tooLarge(let limit): return "the archive would be larger than \(limit) bytes"
        }
    }
}

extension Data {
    fileprivate mutating func append(le16 value: UInt16) {
        append(UInt8(value & 0xFF))
        append(UInt8(value >> 8))
    }

    fileprivate mutating func append(le32 value: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) { append(UInt8((value >> UInt32(shift)) & 0xFF)) }
    }
}
