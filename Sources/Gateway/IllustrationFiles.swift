import Crypto
import Foundation
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The story-worker's stored page pictures, read (never written) from the same storage root
/// (`STORY_STORAGE_ROOT`; in Kubernetes the worker's volume mounted read-only).
///
/// A picture is read by the path the worker stored in the database, relative to the root; the
/// request only chooses which row. A stored path is still checked before it is opened: relative,
/// no `.`/`..`/empty components, a known picture type, and — after symbolic links are
/// resolved — inside the root; the file must be a regular file of at most `maxBytes`. File
/// system calls block, so they run on NIO's thread pool, never on the cooperative pool.
struct IllustrationFiles: Sendable {
    /// The storage root as configured (resolved when read, since the worker may create it later).
    let root: String
    /// The largest picture served; a larger file is refused as broken.
    static let maxBytes = 16 * 1024 * 1024
    /// Longest stored path accepted.
    static let maxPathBytes = 512

    /// A picture ready to send.
    struct Image: Sendable {
        var data: Data
        var mediaType: String
        /// A strong entity tag: the first 128 bits of the bytes' SHA-256, quoted.
        var etag: String
    }

    /// Why a stored picture cannot be served; each is a fault of the stored data or the volume,
    /// not of the request.
    enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// The stored path is not a plain relative path, or resolves outside the root.
        case refusedPath(String)
        /// A type the gateway does not serve.
        case unknownType(String)
        /// No readable regular file there.
        case unreadable(String)
        /// Over `maxBytes`.
        case tooLarge(Int)

        /// The stable code logged (and answered) for the failure.
        var code: String {
            switch self {
            case .refusedPath: "illustration-path-refused"
            case .unknownType: "illustration-type-unknown"
            case .unreadable: "illustration-unreadable"
            case .tooLarge: "illustration-too-large"
            }
        }

        var description: String {
            switch self {
            case .refusedPath(let path): "the stored path \(path.debugDescription) is not inside the storage root"
            case .unknownType(let path): "the stored path \(path.debugDescription) is not a PNG, JPEG, WebP or SVG"
            case .unreadable(let reason): reason
            case .tooLarge(let size): "the stored picture is \(size) bytes, over \(IllustrationFiles.maxBytes)"
            }
        }
    }

    /// Media types by file extension: what the worker's illustrators write.
    static let mediaTypes: [String: String] = [
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "webp": "image/webp", "svg": "image/svg+xml",
    ]

    /// The media type for a stored relative path, after checking its shape (no I/O).
    /// - Throws: `Failure.refusedPath` for an absolute path, a `.`, `..` or empty component, a NUL,
    ///   or an overlong path; `Failure.unknownType` for an extension not in `mediaTypes`.
    static func check(_ relativePath: String) throws(Failure) -> String {
        let components = relativePath.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...maxPathBytes).contains(relativePath.utf8.count), !relativePath.utf8.contains(0),
            components.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." })
        else { throw .refusedPath(relativePath) }
        let name = components.last ?? ""
        guard let dot = name.lastIndex(of: "."),
            let mediaType = mediaTypes[name[name.index(after: dot)...].lowercased()]
        else { throw .unknownType(relativePath) }
        return mediaType
    }

    /// Reads the picture stored at `relativePath`.
    /// - Throws: `Failure` (see its cases); never a path outside the root.
    func load(_ relativePath: String) async throws -> Image {
        let mediaType = try Self.check(relativePath)
        let root = self.root
        let result: Result<Data, Failure> = try await NIOThreadPool.singleton.runIfActive {
            Self.read(relativePath, root: root)
        }
        let data = try result.get()
        let digest = SHA256.hash(data: data).prefix(16).map { String(format: "%02x", $0) }.joined()
        return Image(data: data, mediaType: mediaType, etag: "\"\(digest)\"")
    }

    /// Blocking: resolves the root and the file, checks containment, reads at most `maxBytes`.
    private static func read(_ relativePath: String, root: String) -> Result<Data, Failure> {
        guard let resolvedRoot = realPath(root) else {
            return .failure(.unreadable("the storage root \(root) cannot be resolved"))
        }
        guard let resolved = realPath(resolvedRoot + "/" + relativePath) else {
            return .failure(.unreadable("no file at \(relativePath.debugDescription) under the storage root"))
        }
        // After every link is followed, the file must still be under the root.
        let prefix = resolvedRoot.hasSuffix("/") ? resolvedRoot : resolvedRoot + "/"
        guard resolved.hasPrefix(prefix) else { return .failure(.refusedPath(relativePath)) }
        // O_NOFOLLOW: the resolved path names the file itself; a link swapped in since is refused.
        let descriptor = open(resolved, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            return .failure(.unreadable("cannot open \(relativePath.debugDescription): errno \(errno)"))
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
            return .failure(.unreadable("\(relativePath.debugDescription) is not a regular file"))
        }
        guard status.st_size <= maxBytes else { return .failure(.tooLarge(Int(status.st_size))) }
        do {
            let data = try handle.read(upToCount: maxBytes + 1) ?? Data()
            guard data.count <= maxBytes else { return .failure(.tooLarge(data.count)) }
            return .success(data)
        } catch {
            return .failure(.unreadable("cannot read \(relativePath.debugDescription): \(error)"))
        }
    }

    /// `realpath(3)`: the absolute path with every link, `.` and `..` resolved; nil when it
    /// does not exist.
    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
