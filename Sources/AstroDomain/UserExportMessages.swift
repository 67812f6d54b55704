import Foundation

/// The body of `user.export`: gather everything stored about the user into a zip for download
/// (CONTRACT.md, "User export"). Consumed by the story-worker, which copies the illustration
/// files (only it can reach its storage root) and hands over to `user.export-pack`.
public struct UserExportRequest: Sendable, Hashable, Codable {
    /// Also the export's id: `GET /v1/me/exports/{jobId}` downloads it.
    public var jobID: JobID
    public var userID: UserID

    public init(jobID: JobID, userID: UserID) {
        self.jobID = jobID
        self.userID = userID
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case userID = "userId"
    }

    /// The JSON body.
    /// - Throws: `EncodingError` (not expected for these members).
    public func jsonData() throws -> Data { try JSONCoding.encoder.encode(self) }
}

/// The body of `user.export-pack`: write the export's JSON document and pack it with the copied
/// illustration files into the zip (billing-worker; published only by `user.export`).
public struct UserExportPackRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var userID: UserID
    /// The `user.export` job: the export's id.
    public var exportID: JobID

    public init(jobID: JobID, userID: UserID, exportID: JobID) {
        self.jobID = jobID
        self.userID = userID
        self.exportID = exportID
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case userID = "userId"
        case exportID = "exportId"
    }

    /// The JSON body.
    /// - Throws: `EncodingError` (not expected for these members).
    public func jsonData() throws -> Data { try JSONCoding.encoder.encode(self) }
}

/// The vocabulary of the user export shared by the workers, the gateway and astroctl.
public enum UserExport {
    /// `schemaVersion` of `export.json` (CONTRACT.md, "User export"); raised when a field
    /// changes meaning or disappears, not when a table or field is added.
    public static let schemaVersion = 1
    /// The document's name inside the zip.
    public static let documentName = "export.json"
    /// The folder of the illustration files inside the zip (`illustrations/<story>/<file>`).
    public static let illustrationsFolder = "illustrations/"

    /// Permanent: the export would be larger than `USER_EXPORT_MAX_BYTES`.
    public static let tooLargeCode = ErrorCode.exportTooLarge.rawValue
    /// Permanent: the export named by `user.export-pack` does not exist (or belongs to someone else).
    public static let unknownExportCode = ErrorCode.unknownExport.rawValue

    /// Bounds of `USER_EXPORT_MAX_BYTES` (the zip, files and document together). The upper
    /// bound is tested end to end (UserExportTests): no service holds the whole export (bytes
    /// travel in binary format, a file and a chunk at a time).
    public static let maxBytesRange = 1 << 20...(512 << 20)
    /// Default of `USER_EXPORT_MAX_BYTES`: 64 MiB.
    public static let defaultMaxBytes = 64 << 20
    /// Bounds of `USER_EXPORT_TTL_SECONDS`, how long a finished export can be downloaded.
    public static let ttlSecondsRange = 60...(7 * 86_400)
    /// Default of `USER_EXPORT_TTL_SECONDS`: one day.
    public static let defaultTTLSeconds = 86_400
    /// The most files one export copies (a story has at most a few dozen pages).
    public static let maxFiles = 10_000
    /// The zip is stored in chunks of this many bytes (`user_export_chunks`, migration 0035, the
    /// last one shorter), which the gateway reads and sends one at a time.
    public static let chunkBytes = 1 << 20
    /// An export asked for less than this long ago whose jobs have not finished is the user's
    /// export in progress: `POST /v1/me/export` answers with it instead of starting another.
    /// Older, it is taken as lost (its job dead-lettered, the message dropped) and no longer
    /// blocks a new one.
    public static let inProgressSeconds = 3_600

    /// Reads a bounded integer setting: the default when unset, an error outside `range`.
    /// - Throws: `UserExportSettingError` when set but not an integer within `range`.
    public static func setting(
        _ variable: String,
        in environment: [String: String],
        range: ClosedRange<Int>,
        default value: Int
    ) throws -> Int {
        guard let text = environment[variable], !text.isEmpty else { return value }
        guard let number = Int(text), range.contains(number) else {
            throw UserExportSettingError(variable: variable, value: text, range: range)
        }
        return number
    }
}

/// A `USER_EXPORT_*` variable outside its bounds: the worker refuses to start.
public struct UserExportSettingError: Error, Sendable, CustomStringConvertible {
    public var variable: String
    public var value: String
    public var range: ClosedRange<Int>
    public var description: String {
        "\(variable)=\(value.prefix(40).debugDescription): expected an integer in \(range.lowerBound)...\(range.upperBound)"
    }
}
