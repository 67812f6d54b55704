import AstroDomain
import Foundation
import Postgres
import UUIDText
import WorkerRuntime

extension IllustrationStorage {
    /// Removes a story's folder of illustrations (`<story>/`), if there is one.
    /// - Returns: whether a folder was removed.
    /// - Throws: `IllustrationStorageError` when it exists but cannot be removed.
    public func removeStory(_ storyID: UUID) throws(IllustrationStorageError) -> Bool {
        let folder = root.appendingPathComponent(storyID.lowercasedText, isDirectory: true)
        guard FileManager.default.fileExists(atPath: folder.path) else { return false }
        do {
            try FileManager.default.removeItem(at: folder)
        } catch {
            throw IllustrationStorageError("cannot remove \(folder.path): \(error.localizedDescription)")
        }
        return true
    }
}

/// `story.erase-illustrations`: removes the illustration files of stories a `user.delete` erased.
/// The billing-worker deletes the rows but cannot reach this worker's storage root, so it hands
/// the story ids over in this job, committed with the deletion. Idempotent (a removed folder is
/// not there the second time), and it removes only folders of stories that no longer exist, so
/// a job naming a live story changes nothing of it.
public struct EraseIllustrationsHandler: JobHandler {
    public let jobType = JobType.storyEraseIllustrations
    let pool: PostgresPool
    let storage: IllustrationStorage

    /// - Parameters:
    ///   - pool: reads which of the named stories still exist.
    ///   - storage: the illustrations' root.
    public init(pool: PostgresPool, storage: IllustrationStorage) {
        self.pool = pool
        self.storage = storage
    }

    public struct Prepared: Sendable {
        var removed: Int
        var kept: Int
    }

    /// Removes the folders.
    /// - Throws: `JobRejection` (`invalid-payload`, or `too-many-stories` over
    ///   `EraseIllustrationsRequest.maxStories`); `PostgresError` or `IllustrationStorageError`
    ///   (retried).
    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        let request = try job.decode(EraseIllustrationsRequest.self)
        guard request.storyIDs.count <= EraseIllustrationsRequest.maxStories else {
            throw JobRejection(
                code: .tooManyStories,
                message:
                    "storyIds: at most \(EraseIllustrationsRequest.maxStories) stories per job, got \(request.storyIDs.count)"
            )
        }
        let named = request.storyIDs.map(\.uuid)
        guard !named.isEmpty else { return Prepared(removed: 0, kept: 0) }
        let list = "{" + named.map { $0.lowercasedText }.joined(separator: ",") + "}"
        let live = try await pool.withConnection { database in
            Set(
                try database.query("SELECT id FROM stories.stories WHERE id = ANY ($1::uuid[])", [list])
                    .map { try $0.decode(UUID.self, "id") }
            )
        }
        var removed = 0
        for story in Set(named) where !live.contains(story) {
            if try storage.removeStory(story) { removed += 1 }
        }
        return Prepared(removed: removed, kept: live.count)
    }

    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        JobOutcome(
            result: .object([
                "removedFolders": .number(Double(prepared.removed)),
                "liveStoriesKept": .number(Double(prepared.kept)),
            ])
        )
    }
}
