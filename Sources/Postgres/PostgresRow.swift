import Foundation

/// Column names and types shared by all rows of one result.
final class PostgresColumns: Sendable {
    let names: [String]
    let typeOIDs: [UInt32]
    let indexByName: [String: Int]

    init(names: [String], typeOIDs: [UInt32]) {
        self.names = names
        self.typeOIDs = typeOIDs
        var index: [String: Int] = [:]
        for (position, name) in names.enumerated() where index[name] == nil { index[name] = position }
        self.indexByName = index
    }
}

/// One value of a result as the server sent it.
enum PostgresCell: Sendable {
    case text(String)
    case binary(Data)
}

/// The format the server sends a result's values in.
public enum PostgresResultFormat: Sendable, Hashable {
    /// Every value as text (the default: every `PostgresDecodable` reads it).
    case text
    /// Every value in its type's binary format: what reads large `bytea` values without their hex
    /// text. Only `Data`, `String`, the integers, `Bool` and `UUID` decode it, and `decodeJSON`.
    case binary
}

/// One row of a result, copied out of libpq.
public struct PostgresRow: Sendable {
    let columns: PostgresColumns
    let values: [PostgresCell?]

    init(columns: PostgresColumns, values: [PostgresCell?]) {
        self.columns = columns
        self.values = values
    }

    /// The result's column names, in order.
    public var columnNames: [String] { columns.names }

    private func position(_ column: String) throws(PostgresError) -> Int {
        guard let position = columns.indexByName[column] else {
            throw PostgresError(
                kind: .decoding,
                message: "no column \"\(column)\" in the result (columns: \(columns.names.joined(separator: ", ")))"
            )
        }
        return position
    }

    /// Whether the column is SQL NULL.
    /// - Throws: `.decoding` if there is no such column.
    public func isNull(_ column: String) throws(PostgresError) -> Bool {
        values[try position(column)] == nil
    }

    /// Decodes a non-NULL column.
    /// - Throws: `.decoding` naming the column and type for NULL, an unknown column or an unparsable value.
    public func decode<T: PostgresDecodable>(_ type: T.Type, _ column: String) throws(PostgresError) -> T {
        guard let value = try decode(T?.self, column) else {
            throw PostgresError(
                kind: .decoding,
                message: "column \"\(column)\" is NULL but \(T.self) is not optional"
            )
        }
        return value
    }

    /// Decodes a column, NULL as nil.
    /// - Throws: `.decoding` naming the column and type for an unknown column or an unparsable value.
    public func decode<T: PostgresDecodable>(_ type: T?.Type, _ column: String) throws(PostgresError) -> T? {
        let position = try position(column)
        do {
            switch values[position] {
            case nil: return nil
            case .text(let text)?: return try T.decode(postgresText: text, typeOID: columns.typeOIDs[position])
            case .binary(let bytes)?: return try T.decode(postgresBinary: bytes, typeOID: columns.typeOIDs[position])
            }
        } catch {
            var error = error
            error.message = "column \"\(column)\": " + error.message
            throw error
        }
    }

    /// Decodes a `json`/`jsonb` column into a `Decodable` (ISO 8601 dates).
    /// - Throws: `.decoding` naming the column and type for NULL, an unknown column or JSON that does not fit.
    public func decodeJSON<T: Decodable>(_ type: T.Type, _ column: String) throws(PostgresError) -> T {
        guard let value = try decodeJSON(T?.self, column) else {
            throw PostgresError(kind: .decoding, message: "column \"\(column)\" is NULL but \(T.self) is not optional")
        }
        return value
    }

    /// Decodes a `json`/`jsonb` column into a `Decodable`, NULL as nil.
    /// - Throws: `.decoding` naming the column and type for an unknown column or JSON that does not fit.
    public func decodeJSON<T: Decodable>(_ type: T?.Type, _ column: String) throws(PostgresError) -> T? {
        let position = try position(column)
        let json: Data
        switch values[position] {
        case nil: return nil
        case .text(let text)?: json = Data(text.utf8)
        // Binary jsonb is a version byte (1) and the text; binary json is the text.
        case .binary(let bytes)?:
            json = columns.typeOIDs[position] == PostgresTypeOID.jsonb && bytes.first == 1 ? bytes.dropFirst() : bytes
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            return try decoder.decode(T.self, from: json)
        } catch {
            var path = ""
            if let decodingError = error as? DecodingError {
                switch decodingError {
                case .typeMismatch(_, let context), .valueNotFound(_, let context), .keyNotFound(_, let context),
                    .dataCorrupted(let context):
                    path = context.codingPath.map(\.stringValue).joined(separator: ".")
                @unknown default:
                    break
                }
            }
            throw PostgresError(
                kind: .decoding,
                message:
                    "column \"\(column)\": cannot decode \(PostgresTypeOID.name(columns.typeOIDs[position])) as \(T.self)"
                    + (path.isEmpty ? "" : " at \(path)"),
                detail: String(describing: error)
            )
        }
    }

    /// The column's value as the server sent it in text format; nil for NULL, an unknown column
    /// or a binary-format value.
    public func rawText(_ column: String) -> String? {
        guard let position = columns.indexByName[column], case .text(let text)? = values[position] else { return nil }
        return text
    }
}

/// The rows of a statement and the number of rows it affected.
public struct PostgresResult: Sendable, RandomAccessCollection {
    let rows: [PostgresRow]
    /// Rows inserted, updated, deleted, selected… as the command tag reports (0 when it reports none).
    public let rowsAffected: Int
    /// The result's column names, in order.
    public let columnNames: [String]

    init(rows: [PostgresRow], rowsAffected: Int, columnNames: [String]) {
        self.rows = rows
        self.rowsAffected = rowsAffected
        self.columnNames = columnNames
    }

    public var startIndex: Int { rows.startIndex }
    public var endIndex: Int { rows.endIndex }
    public subscript(position: Int) -> PostgresRow { rows[position] }
}
