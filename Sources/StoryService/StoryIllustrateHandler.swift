import AstroDomain
import Foundation
import Logging
import Postgres
import Stories
import StoryIllustration
import WorkerRuntime

/// `story.illustrate`: illustrates a story's pages in page order.
///
/// Each page moves `notStarted`/`failed` → `generating` → `generated` (image stored, path set) or
/// `failed` (with the reason), and each move is committed as it happens, so `astroctl stories
/// show` and the app see the progress. The image of the latest page drawn before it is passed to
/// the illustrator as context, for a consistent look. A page that fails does not stop the others;
/// the job then ends `failed` (`pages-not-illustrated`, naming the pages) and a later
/// `story.illustrate` with `pages: [n]` draws exactly those.
///
/// A page being drawn is claimed by the job (`illustration_job`): a redelivery of the same job
/// takes its pages back, another job only takes a claim older than `claimLease` (its worker died).
/// `story.illustrated` reports what was drawn, what failed, what was left to another job and
/// which explicitly named pages already had a picture (redrawn only with `force`). The story
/// must belong to the job's user.
public struct StoryIllustrateHandler: JobHandler {
    public let jobType = JobType.storyIllustrate
    private let pool: PostgresPool
    private let illustrator: any StoryIllustrator
    private let storage: IllustrationStorage
    private let claimLease: Duration
    private let logger: Logger
    private let pricePerImageUSD: Decimal
    private let paidCalls: PaidCallLedger?
    private let fallback: (any StoryIllustrator)?

    /// - Parameters:
    ///   - pool: page state is written through it as each page moves, outside the job's transaction.
    ///   - claimLease: how old another job's `generating` claim must be before this job takes the page.
    ///   - pricePerImageUSD: what one picture from the images API costs (`astro_image_cost_usd_total`
    ///     and the daily budget).
    ///   - paidCalls: meters each picture of a paid illustrator when it is drawn, and bounds them
    ///     (the daily budget, the user's daily pictures); nil: unmetered (tests, tools).
    ///   - fallback: draws a page when `paidCalls` refuses a paid picture (the built-in illustrator).
    public init(
        pool: PostgresPool,
        illustrator: any StoryIllustrator,
        storage: IllustrationStorage,
        claimLease: Duration = .seconds(600),
        logger: Logger,
        pricePerImageUSD: Double = 0,
        paidCalls: PaidCallLedger? = nil,
        fallback: (any StoryIllustrator)? = nil
    ) {
        // Through its shortest text: Decimal(Double) would carry binary digits into the ledger.
        self.pricePerImageUSD = Decimal(string: "\(pricePerImageUSD)") ?? 0
        self.pool = pool
        self.illustrator = illustrator
        self.storage = storage
        self.claimLease = claimLease
        self.logger = logger
        self.paidCalls = paidCalls
        self.fallback = fallback
    }

    public struct PageFailure: Sendable, Hashable {
        public var page: Int
        public var error: JobError
    }

    public struct Prepared: Sendable {
        var request: StoryIllustrateRequest
        var generated: [Int]
        var failed: [PageFailure]
        /// Pages another job holds right now.
        var skipped: [Int]
        /// Pages asked for explicitly that already had a picture (left alone without `force`).
        var unchanged: [Int] = []
        /// Pages drawn by each illustrator (the built-in one takes over past a paid bound).
        var drawnBy: [String: Int] = [:]
    }

    private struct StoredPage: Sendable {
        var number: Int
        var text: String
        var status: String
        var path: String?
    }

    private struct StoryFacts: Sendable {
        var title: String
        var theme: String
        var ageGroup: StoryAgeGroup
        var language: ReportLanguage
        var mainCharacter: String
        var childName: String
        var pages: [StoredPage]
    }

    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        let request = try job.decode(StoryIllustrateRequest.self)
        if let pages = request.pages {
            guard !pages.isEmpty, pages.count <= 100, Set(pages).count == pages.count, pages.allSatisfy({ $0 >= 1 })
            else {
                throw JobRejection(
                    code: .invalidPages,
                    message: "pages must be 1 to 100 distinct page numbers from 1, got \(pages.prefix(10))"
                        + (pages.count > 10 ? "… (\(pages.count))" : "")
                )
            }
        }
        let story = try await load(request.storyID, userID: request.userID)
        // Pages by number: stored numbers need not run 1…n (a gap must not shift or trap).
        let pagesByNumber = Dictionary(story.pages.map { ($0.number, $0) }, uniquingKeysWith: { first, _ in first })
        if let wanted = request.pages, let missing = wanted.first(where: { pagesByNumber[$0] == nil }) {
            let numbers = story.pages.map(\.number).sorted().map(String.init).joined(separator: ", ")
            throw JobRejection(
                code: .invalidPages,
                message: "the story has pages \(numbers); there is no page \(missing)"
            )
        }
        let force = request.force ?? false
        var unchanged: [Int] = []
        let targets: [Int]
        if let wanted = request.pages?.sorted() {
            // Explicit pages are redrawn only when they have no picture yet, unless forced.
            unchanged = force ? [] : wanted.filter { pagesByNumber[$0]?.status == "generated" }
            targets = wanted.filter { !unchanged.contains($0) }
        } else {
            targets = story.pages.filter { $0.status != "generated" }.map(\.number).sorted()
        }

        var generated: [Int] = []
        var failed: [PageFailure] = []
        var skipped: [Int] = []
        var drawnBy: [String: Int] = [:]
        let meter = illustrator.isPaid ? paidCalls?.meter(user: request.userID, job: job.jobID) : nil
        // Pictures as this job knows them: those stored when it started, then those it draws.
        // (Another job drawing a page at the same moment is not waited for: the reference is a
        // help for consistency, not a requirement.)
        var paths = Dictionary(
            uniqueKeysWithValues: story.pages.compactMap { page in page.path.map { (page.number, $0) } }
        )
        for number in targets {
            guard let page = pagesByNumber[number] else { continue }
            switch try await claim(request, page: number, force: force) {
            case .claimed: break
            case .drawnByThisJob:
                // An earlier attempt of this job drew it (a retry after a crash): not again.
                generated.append(number)
                continue
            case .notThisJobs:
                skipped.append(number)
                continue
            }
            let illustration = IllustrationRequest(
                storyID: request.storyID.uuid,
                title: story.title,
                theme: story.theme,
                ageGroup: story.ageGroup,
                language: story.language,
                mainCharacter: story.mainCharacter,
                childName: story.childName,
                pageNumber: number,
                pageCount: max(story.pages.count, story.pages.map(\.number).max() ?? 0),
                pageText: page.text,
                // The latest page before this one that has a picture.
                previousImage: paths.filter { $0.key < number }.max { $0.key < $1.key }.flatMap {
                    storage.load($0.value)
                }
            )
            // A paid picture only within the day's budget and the user's daily pictures; past
            // them the built-in illustrator draws the page.
            // Without a fallback a refused page fails (`paid-call-refused`) and may be asked for
            // again another day.
            var drawer = illustrator
            var refused = false
            if let meter, await meter.admit(.illustration) != .admitted {
                if let fallback { drawer = fallback } else { refused = true }
            }
            let outcome: Result<String, JobError>
            do {
                let image: StoryImage
                do throws(IllustrationError) {
                    if refused {
                        throw IllustrationError(
                            code: .paidCallRefused,
                            message: "the images API's daily budget or this user's daily pictures are spent",
                            isTransient: false
                        )
                    }
                    image = try await drawer.illustrate(illustration)
                    if drawer.isPaid { await recordPicture(meter) }
                } catch {
                    if drawer.isPaid, error.wasAnswered { await recordPicture(meter) }
                    throw error
                }
                outcome = .success(try storage.store(image, storyID: request.storyID.uuid, page: number))
            } catch let error as IllustrationError {
                outcome = .failure(JobError(code: error.code, message: error.message))
            } catch let error as IllustrationStorageError {
                outcome = .failure(JobError(code: .storageFailed, message: error.message))
            }
            switch outcome {
            case .success(let path):
                drawnBy[drawer.name, default: 0] += 1
                if try await finish(request, page: number, status: "generated", path: path, error: nil, by: drawer.name)
                    == 0
                {
                    // The story may have been erased (user.delete) while the picture was drawn,
                    // after its files were removed: this one must not stay behind.
                    try await removeFilesIfStoryIsGone(request.storyID.uuid)
                }
                generated.append(number)
                paths[number] = path
            case .failure(let error):
                // The image API's message may quote the page's prompt (the child's name): debug only.
                FailureLogging.log(
                    "page not illustrated",
                    level: .warning,
                    code: error.code,
                    publicReason: nil,
                    detail: error.message,
                    extra: ["story_id": "\(request.storyID.uuid)", "page": "\(number)"],
                    logger: logger
                )
                try await finish(request, page: number, status: "failed", path: nil, error: error, by: drawer.name)
                failed.append(PageFailure(page: number, error: error))
                paths[number] = nil
            }
        }
        return Prepared(
            request: request,
            generated: generated,
            failed: failed,
            skipped: skipped,
            unchanged: unchanged,
            drawnBy: drawnBy
        )
    }

    /// Meters one picture the images API drew (billed whatever is done with it).
    private func recordPicture(_ meter: (any PaidCallMeter)?) async {
        await meter?.record(
            PaidCallUsage(purpose: .illustration, model: illustrator.name, images: 1, costUSD: pricePerImageUSD)
        )
    }

    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        let request = prepared.request
        let fields: [String: JSONValue] = [
            "storyId": .string(request.storyID.description),
            "illustrator": .string(illustrator.name),
            // Who drew the pages: the built-in illustrator past the images API's daily bounds.
            "drawnBy": .object(prepared.drawnBy.mapValues { .number(Double($0)) }),
            "generatedPages": .array(prepared.generated.map { .number(Double($0)) }),
            "failedPages": .array(
                prepared.failed.map {
                    .object([
                        "page": .number(Double($0.page)), "code": .string($0.error.code),
                        "message": .string($0.error.message),
                    ])
                }
            ),
            "skippedPages": .array(prepared.skipped.map { .number(Double($0)) }),
            "unchangedPages": .array(prepared.unchanged.map { .number(Double($0)) }),
        ]
        var error: JobError?
        if !prepared.failed.isEmpty {
            let pages = prepared.failed.map { String($0.page) }.joined(separator: ", ")
            let reasons = prepared.failed.map { "page \($0.page): \($0.error)" }.joined(separator: "; ")
            error = JobError(
                code: .pagesNotIllustrated,
                message: "\(reasons). Retry with story.illustrate pages [\(pages)]"
            )
        }
        let event = JobEvent(
            jobID: request.jobID,
            userID: request.userID,
            type: .storyIllustrated,
            fields: fields,
            error: error
        )
        return JobOutcome(
            status: error.map { .failed($0) } ?? .succeeded,
            result: .object(fields),
            messages: [try .event(event)],
            measurements: prepared.drawnBy.sorted { $0.key < $1.key }.flatMap {
                StoryMeasurements.illustrated(pages: $0.value, illustrator: $0.key)
            }
        )
    }

    /// The story and its pages, if it belongs to `userID` (another user's story is "not found").
    private func load(_ storyID: StoryID, userID: UserID) async throws -> StoryFacts {
        let facts = try await pool.withConnection { database -> StoryFacts? in
            guard
                let row = try database.query(
                    """
                    SELECT title, theme, age_group, language, main_character, child_name
                    FROM stories.stories WHERE id = $1 AND user_id = $2
                    """,
                    [storyID.uuid, userID.uuid]
                ).first
            else { return nil }
            let pages = try database.query(
                """
                SELECT page_number, text, illustration_status, illustration_path FROM stories.pages
                WHERE story_id = $1 ORDER BY page_number
                """,
                [storyID.uuid]
            ).map { page throws(PostgresError) in
                StoredPage(
                    number: try page.decode(Int.self, "page_number"),
                    text: try page.decode(String.self, "text"),
                    status: try page.decode(String.self, "illustration_status"),
                    path: try page.decode(String?.self, "illustration_path")
                )
            }
            return StoryFacts(
                title: try row.decode(String.self, "title"),
                theme: try row.decode(String.self, "theme"),
                ageGroup: StoryAgeGroup(rawValue: try row.decode(Int.self, "age_group")) ?? .preschool,
                language: ReportLanguage(rawValue: try row.decode(String.self, "language")) ?? .en,
                mainCharacter: try row.decode(String.self, "main_character"),
                childName: try row.decode(String.self, "child_name"),
                pages: pages
            )
        }
        guard let facts else {
            throw JobRejection(code: .storyNotFound, message: "no story \(storyID)")
        }
        return facts
    }

    /// What `claim` found.
    enum PageClaim {
        /// The page is this job's to draw now.
        case claimed
        /// An earlier attempt of this job drew it already.
        case drawnByThisJob
        /// Another job holds a fresh claim, or — unless forced — it was drawn meanwhile.
        case notThisJobs
    }

    /// Takes the page for this job: `generating`, no picture, one more attempt. A forced job
    /// redraws a generated page once: not again on its own retry.
    private func claim(_ request: StoryIllustrateRequest, page: Int, force: Bool) async throws -> PageClaim {
        let lease = Double(claimLease.components.seconds)
        return try await pool.withConnection { database in
            let claimed = try database.execute(
                """
                UPDATE stories.pages SET illustration_status = 'generating', illustration_path = NULL,
                    illustration_error = NULL, illustration_job = $3,
                    illustration_attempts = illustration_attempts + 1, updated_at = now()
                WHERE story_id = $1 AND page_number = $2 AND (
                    illustration_status IN ('notStarted', 'failed')
                    OR ($4 AND illustration_status = 'generated' AND illustration_job IS DISTINCT FROM $3)
                    OR (illustration_status = 'generating'
                        AND (illustration_job = $3 OR updated_at < now() - make_interval(secs => $5))))
                """,
                [request.storyID.uuid, page, request.jobID.uuid, force, lease]
            )
            if claimed == 1 { return .claimed }
            let drawn = try !database.query(
                """
                SELECT 1 FROM stories.pages WHERE story_id = $1 AND page_number = $2
                    AND illustration_status = 'generated' AND illustration_job = $3
                """,
                [request.storyID.uuid, page, request.jobID.uuid]
            ).isEmpty
            return drawn ? .drawnByThisJob : .notThisJobs
        }
    }

    /// Records the page's end state, if the page is still this job's.
    /// - Returns: the pages updated: 0 when the claim was lost or the story is gone.
    @discardableResult
    private func finish(
        _ request: StoryIllustrateRequest,
        page: Int,
        status: String,
        path: String?,
        error: JobError?,
        by name: String
    ) async throws -> Int {
        try await pool.withConnection { database in
            try database.execute(
                """
                UPDATE stories.pages SET illustration_status = $4, illustration_path = $5, illustration_error = $6,
                    illustrator = CASE WHEN $4 = 'generated' THEN $7 ELSE illustrator END, updated_at = now()
                WHERE story_id = $1 AND page_number = $2 AND illustration_job = $3
                    AND illustration_status = 'generating'
                """,
                [request.storyID.uuid, page, request.jobID.uuid, status, path, error?.description, name]
            )
        }
    }

    /// Removes the story's folder when its row no longer exists.
    private func removeFilesIfStoryIsGone(_ storyID: UUID) async throws {
        let exists = try await pool.withConnection { database in
            !(try database.query("SELECT 1 FROM stories.stories WHERE id = $1", [storyID]).isEmpty)
        }
        if !exists { _ = try storage.removeStory(storyID) }
    }
}
