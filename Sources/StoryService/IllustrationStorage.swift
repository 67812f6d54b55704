import Foundation
import StoryIllustration
import UUIDText

/// Where illustrations are kept: files under a root folder (a volume in production), named by
/// story and page; pages store the path relative to the root.
public struct IllustrationStorage: Sendable {
    public let root: URL

    /// - Throws: `IllustrationStorageError` when the root cannot be created or written.
    public init(root: URL) throws(IllustrationStorageError) {
        self.root = root.standardizedFileURL
        do {
            try FileManager.default.createDirectory(at: self.root, withIntermediateDirectories: true)
        } catch {
            throw IllustrationStorageError(
                "cannot create the storage root \(self.root.path): \(error.localizedDescription)"
            )
        }
        guard FileManager.default.isWritableFile(atPath: self.root.path) else {
            throw IllustrationStorageError("the storage root \(self.root.path) is not writable")
        }
    }

    /// `<story>/page-<nn>.<ext>`: one file per page, replaced when the page is drawn again.
    public static func relativePath(storyID: UUID, page: Int, fileExtension: String) -> String {
        "\(storyID.lowercasedText)/page-\(page < 10 ? "0" : "")\(page).\(fileExtension)"
    }

    /// Stores `image` for a page and returns its path relative to the root. The file appears
    /// whole or not at all (written aside, then renamed), so a reader never sees half an image.
    ///
    /// - Throws: `IllustrationStorageError` when the file cannot be written.
    public func store(_ image: StoryImage, storyID: UUID, page: Int) throws(IllustrationStorageError) -> String {
        let relative = Self.relativePath(storyID: storyID, page: page, fileExtension: image.fileExtension)
        let target = root.appendingPathComponent(relative)
        do {
            try FileManager.default.createDirectory(
                at: target.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            try image.data.write(to: target, options: .atomic)
        } catch {
            throw IllustrationStorageError("cannot write \(target.path): \(error.localizedDescription)")
        }
        return relative
    }

    /// The stored image at `relativePath`, or nil when there is none (or the path leaves the root).
    public func load(_ relativePath: String) -> StoryImage? {
        let url = root.appendingPathComponent(relativePath).standardizedFileURL
        guard url.path.hasPrefix(root.path + "/"), let data = try? Data(contentsOf: url) else { return nil }
        let fileExtension = url.pathExtension.lowercased()
        let mediaType =
            fileExtension == "svg" ? "image/svg+xml" : fileExtension == "png" ? "image/png" : "application/octet-stream"
        return StoryImage(data: data, fileExtension: fileExtension, mediaType: mediaType)
    }
}

/// The illustration storage cannot be used: what failed, with the path.
public struct IllustrationStorageError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
