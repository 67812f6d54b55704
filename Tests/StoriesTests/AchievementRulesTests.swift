import AstroDomain
import Foundation
import Testing

@testable import Stories

/// A read of `story` at an ISO 8601 instant.
private func read(_ story: UUID, _ iso: String, theme: String = "courage") throws -> ReadingRecord {
    ReadingRecord(storyID: story, theme: theme, readAt: try Date(iso, strategy: .iso8601))
}

/// `count` reads of distinct stories, an hour apart from 2026-01-10T12:00Z.
private func distinctReads(_ count: Int) -> [ReadingRecord] {
    let start = Date(timeIntervalSince1970: 1_768_046_400)  // 2026-01-10T12:00:00Z
    return (0..<count).map { ReadingRecord(storyID: UUID(), theme: "courage", readAt: start + Double($0) * 3_600) }
}

private func zone(_ identifier: String) -> TimeZone { TimeZone(identifier: identifier)! }

private let utc = TimeZone(identifier: "UTC")!

extension [AchievementStatus] {
    fileprivate subscript(key: String) -> AchievementStatus? { first { $0.ruleKey == key } }
}

@Suite("Achievement rules")
struct AchievementRulesTests {
    let book: AchievementRuleBook

    init() throws { book = try AchievementRuleBook.load() }

    private func evaluate(
        _ reads: [ReadingRecord],
        in timeZone: TimeZone = utc,
        collections: [CompletedCollection] = [],
        language: ReportLanguage = .en
    ) -> [AchievementStatus] {
        book.evaluate(reads: reads, timeZone: timeZone, completedCollections: collections, language: language)
    }

    // MARK: Stories completed

    @Test func noReadsGiveUnearnedCountAndStreakRulesOnly() {
        let statuses = evaluate([])
        #expect(
            statuses.map(\.ruleKey) == [
                "first-story", "stories-completed-5", "stories-completed-25", "reading-streak-3", "reading-streak-7",
            ]
        )
        #expect(statuses.allSatisfy { !$0.earned && $0.progress == 0 && $0.storyID == nil })
    }

    @Test func firstStoryIsEarnedByTheFirstRead() throws {
        let story = UUID()
        let statuses = evaluate([try read(story, "2026-02-01T08:00:00Z")])
        let first = try #require(statuses["first-story"])
        #expect(first.earned)
        #expect(first.progress == 1)
        #expect(first.storyID == story)
        #expect(first.type == "specialMilestone")
        #expect(first.icon == "book.fill")
        #expect(first.name == "First Story")
        #expect(statuses["stories-completed-5"]?.progress == 0.2)
    }

    @Test func fiveStoriesNeedsFiveDistinctStories() throws {
        let four = distinctReads(4)
        let notYet = try #require(evaluate(four)["stories-completed-5"])
        #expect(!notYet.earned)
        #expect(notYet.progress == 0.8)
        #expect(notYet.storyID == nil)

        let five = distinctReads(5)
        let earned = try #require(evaluate(five)["stories-completed-5"])
        #expect(earned.earned)
        #expect(earned.progress == 1)
        #expect(earned.storyID == five[4].storyID)
    }

    @Test func rereadingOneStoryCountsOnce() throws {
        let story = UUID()
        let reads = try (1...5).map { try read(story, "2026-02-0\($0)T08:00:00Z") }
        let statuses = evaluate(reads)
        #expect(statuses["first-story"]?.earned == true)
        let five = try #require(statuses["stories-completed-5"])
        #expect(!five.earned)
        #expect(five.progress == 0.2)
    }

    @Test func twentyFiveStoriesAtTheBoundary() throws {
        let reads = distinctReads(25)
        let at24 = try #require(evaluate(Array(reads.prefix(24)))["stories-completed-25"])
        #expect(!at24.earned)
        #expect(at24.progress == 24.0 / 25.0)

        // Re-reads after the 24th distinct story do not reach 25.
        let rereads =
            Array(reads.prefix(24))
            + reads.prefix(3).map {
                ReadingRecord(storyID: $0.storyID, theme: "courage", readAt: $0.readAt + 86_400 * 30)
            }
        #expect(evaluate(rereads)["stories-completed-25"]?.earned == false)

        let at25 = try #require(evaluate(reads)["stories-completed-25"])
        #expect(at25.earned)
        #expect(at25.storyID == reads[24].storyID)
        #expect(at25.type == "storiesCompleted")
    }

    // MARK: Crossing read and order

    @Test func storyIDIsTheChronologicalCrossingReadWhateverTheArrayOrder() throws {
        let reads = distinctReads(8)
        // Later re-reads of earlier stories must not move the crossing.
        let rereads = reads.map { ReadingRecord(storyID: $0.storyID, theme: "courage", readAt: $0.readAt + 86_400) }
        var shuffled = reads + rereads
        shuffled.reverse()
        shuffled.swapAt(0, 7)
        let statuses = evaluate(shuffled)
        #expect(statuses["first-story"]?.storyID == reads[0].storyID)
        #expect(statuses["stories-completed-5"]?.storyID == reads[4].storyID)
        #expect(statuses == evaluate(reads + rereads))
    }

    @Test func readsAtTheSameInstantKeepArrayOrder() throws {
        let first = UUID()
        let second = UUID()
        let statuses = evaluate([
            try read(second, "2026-02-01T08:00:00Z"), try read(first, "2026-01-31T08:00:00Z"),
            try read(UUID(), "2026-02-01T08:00:00Z"),
        ])
        #expect(statuses["first-story"]?.storyID == first)
        let tied = [try read(first, "2026-02-01T08:00:00Z"), try read(second, "2026-02-01T08:00:00Z")]
        #expect(evaluate(tied)["first-story"]?.storyID == first)
        #expect(evaluate(Array(tied.reversed()))["first-story"]?.storyID == second)
    }

    @Test func outputOrderIsRuleOrderThenSubjectKey() throws {
        let story = UUID()
        let reads = try [
            read(story, "2026-02-01T08:00:00Z", theme: "kindness"),
            read(story, "2026-02-01T09:00:00Z", theme: "courage"),
            read(story, "2026-02-01T10:00:00Z", theme: "sharing"),
        ]
        let low = try #require(UUID(uuidString: "0A000000-0000-0000-0000-000000000000"))
        let high = try #require(UUID(uuidString: "FF000000-0000-0000-0000-000000000000"))
        let collections = [CompletedCollection(id: high, name: "B"), CompletedCollection(id: low, name: "A")]
        let keys = evaluate(reads, collections: collections).map(\.ruleKey)
        #expect(
            keys == [
                "first-story", "stories-completed-5", "stories-completed-25", "reading-streak-3", "reading-streak-7",
                "theme-mastery:courage", "theme-mastery:kindness", "theme-mastery:sharing",
                "collection-completed:0a000000-0000-0000-0000-000000000000",
                "collection-completed:ff000000-0000-0000-0000-000000000000",
            ]
        )
        #expect(evaluate(reads.reversed(), collections: collections.reversed()).map(\.ruleKey) == keys)
    }

    // MARK: Streaks

    /// Three reads near midnight whose calendar days depend on the zone. Worked out by hand:
    /// - set A: 03-01T22:30Z, 03-02T21:00Z, 03-03T23:30Z. UTC: Mar 1, 2, 3 → 3. Kyiv (UTC+2): Mar 2 00:30,
    ///   Mar 2 23:00, Mar 4 01:30 → 2, 2, 4 → 1. Los Angeles (UTC−8, DST only from Mar 8): Mar 1 14:30,
    ///   Mar 2 13:00, Mar 3 15:30 → 3.
    /// - set B: 03-02T05:00Z, 03-02T20:00Z, 03-04T07:00Z. UTC: 2, 2, 4 → 1. Kyiv: Mar 2 07:00, Mar 2 22:00,
    ///   Mar 4 09:00 → 1. Los Angeles: Mar 1 21:00, Mar 2 12:00, Mar 3 23:00 → 3.
    /// - set C: 03-01T22:30Z, 03-03T12:00Z, 03-03T22:30Z. UTC: 1, 3, 3 → 1. Kyiv: Mar 2 00:30, Mar 3 14:00,
    ///   Mar 4 00:30 → 3. Los Angeles: Mar 1 14:30, Mar 3 04:00, Mar 3 14:30 → 1.
    static let midnightCases: [(reads: [String], zone: String, longest: Int)] = {
        let a = ["2026-03-01T22:30:00Z", "2026-03-02T21:00:00Z", "2026-03-03T23:30:00Z"]
        let b = ["2026-03-02T05:00:00Z", "2026-03-02T20:00:00Z", "2026-03-04T07:00:00Z"]
        let c = ["2026-03-01T22:30:00Z", "2026-03-03T12:00:00Z", "2026-03-03T22:30:00Z"]
        return [
            (a, "UTC", 3), (a, "Europe/Kyiv", 1), (a, "America/Los_Angeles", 3),
            (b, "UTC", 1), (b, "Europe/Kyiv", 1), (b, "America/Los_Angeles", 3),
            (c, "UTC", 1), (c, "Europe/Kyiv", 3), (c, "America/Los_Angeles", 1),
        ]
    }()

    @Test(arguments: midnightCases)
    func streakDaysAreCalendarDaysOfTheChildsZone(instants: [String], identifier: String, longest: Int) throws {
        let stories = [UUID(), UUID(), UUID()]
        let reads = try zip(stories, instants).map { try read($0, $1) }
        let statuses = evaluate(reads, in: zone(identifier))
        let three = try #require(statuses["reading-streak-3"])
        #expect(three.earned == (longest >= 3))
        #expect(three.progress == min(Double(longest) / 3, 1))
        #expect(three.storyID == (longest >= 3 ? stories[2] : nil))
        #expect(statuses["reading-streak-7"]?.progress == Double(longest) / 7)
    }

    /// Kyiv moves its clocks from 03:00 EET to 04:00 EEST on 2026-03-29 (01:00Z). The last read,
    /// 03-29T21:30Z, is 00:30 on Mar 30 at UTC+3 but would be Mar 29 at the winter offset: four days.
    @Test func aDaylightSavingChangeInsideAStreakStillCounts() throws {
        let stories = (0..<4).map { _ in UUID() }
        let reads = try [
            read(stories[0], "2026-03-27T21:30:00Z"),  // Mar 27 23:30 EET
            read(stories[1], "2026-03-28T21:45:00Z"),  // Mar 28 23:45 EET
            read(stories[2], "2026-03-29T00:30:00Z"),  // Mar 29 02:30 EET, before the change
            read(stories[3], "2026-03-29T21:30:00Z"),  // Mar 30 00:30 EEST
        ]
        let statuses = evaluate(reads, in: zone("Europe/Kyiv"))
        #expect(statuses["reading-streak-3"]?.earned == true)
        #expect(statuses["reading-streak-3"]?.storyID == stories[2])
        #expect(statuses["reading-streak-7"]?.progress == 4.0 / 7.0)
        // In UTC the same reads fall on Mar 27, 28, 29, 29.
        #expect(evaluate(reads)["reading-streak-7"]?.progress == 3.0 / 7.0)
    }

    /// Los Angeles springs forward on 2026-03-08 (10:00Z); 03-09T07:15Z is 00:15 PDT on Mar 9, 23:15 PST on Mar 8.
    @Test func losAngelesSpringForwardInsideAStreak() throws {
        let reads = try [
            read(UUID(), "2026-03-07T07:30:00Z"),  // Mar 6 23:30 PST
            read(UUID(), "2026-03-08T07:30:00Z"),  // Mar 7 23:30 PST
            read(UUID(), "2026-03-08T20:00:00Z"),  // Mar 8 13:00 PDT
            read(UUID(), "2026-03-09T07:15:00Z"),  // Mar 9 00:15 PDT
        ]
        #expect(evaluate(reads, in: zone("America/Los_Angeles"))["reading-streak-7"]?.progress == 4.0 / 7.0)
    }

    @Test func aGapBreaksTheStreak() throws {
        let reads = try [
            read(UUID(), "2026-04-01T10:00:00Z"), read(UUID(), "2026-04-02T10:00:00Z"),
            read(UUID(), "2026-04-04T10:00:00Z"), read(UUID(), "2026-04-05T10:00:00Z"),
        ]
        let broken = try #require(evaluate(reads)["reading-streak-3"])
        #expect(!broken.earned)
        #expect(broken.progress == 2.0 / 3.0)

        let sixth = UUID()
        let resumed = try #require(evaluate(reads + [try read(sixth, "2026-04-06T10:00:00Z")])["reading-streak-3"])
        #expect(resumed.earned)
        #expect(resumed.storyID == sixth)
    }

    @Test func sevenDayStreakIsEarnedByTheFirstReadOfTheSeventhDay() throws {
        var reads: [ReadingRecord] = []
        for day in 1...7 {
            reads.append(try read(UUID(), "2026-05-0\(day)T07:00:00Z", theme: "kindness"))
            reads.append(try read(UUID(), "2026-05-0\(day)T19:00:00Z", theme: "kindness"))
        }
        let sixDays = try #require(evaluate(Array(reads.prefix(12)))["reading-streak-7"])
        #expect(!sixDays.earned)
        #expect(sixDays.progress == 6.0 / 7.0)

        let statuses = evaluate(reads)
        let seven = try #require(statuses["reading-streak-7"])
        #expect(seven.earned)
        #expect(seven.progress == 1)
        #expect(seven.type == "readingStreak")
        #expect(seven.storyID == reads[12].storyID)
        #expect(statuses["reading-streak-3"]?.storyID == reads[4].storyID)
    }

    /// The cached offset must give the calendar day Calendar gives, at any instant, in zones with
    /// transitions (DST both ways, a half-hour zone, one with no DST).
    @Test(arguments: ["Europe/Kyiv", "America/Los_Angeles", "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago"])
    func localDaysMatchCalendar(identifier: String) {
        let timeZone = zone(identifier)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        var utcCalendar = Calendar(identifier: .gregorian)
        utcCalendar.timeZone = utc
        var counter = LocalDayCounter(timeZone: timeZone)
        var generator = SystemRandomNumberGenerator()
        // Chronological instants over three years, about every 7 hours, with jitter.
        var instant = Date(timeIntervalSince1970: 1_735_689_600)  // 2025-01-01T00:00Z
        while instant < Date(timeIntervalSince1970: 1_830_297_600) {  // 2028-01-01T00:00Z
            // The local civil date, as midnight UTC of that date, counted in days since 1970-01-01.
            let date = calendar.dateComponents([.year, .month, .day], from: instant)
            let expected = Int(utcCalendar.date(from: date)!.timeIntervalSince1970 / 86_400)
            #expect(counter.day(of: instant) == expected, "\(identifier) at \(instant)")
            instant += Double.random(in: 3_600...50_000, using: &generator)
        }
    }

    // MARK: Themes and collections

    @Test func themeMasteryAtFiveReadsNamedInBothLanguages() throws {
        let story = UUID()
        let fifth = UUID()
        var reads = try (1...4).map { try read(story, "2026-06-0\($0)T10:00:00Z", theme: "honesty") }
        reads.append(try read(fifth, "2026-06-05T10:00:00Z", theme: "honesty"))
        reads += try (1...4).map { try read(UUID(), "2026-06-0\($0)T11:00:00Z", theme: "curiosity") }

        let english = evaluate(reads, language: .en)
        let honesty = try #require(english["theme-mastery:honesty"])
        #expect(honesty.earned)
        #expect(honesty.type == "themeMastery")
        #expect(honesty.storyID == fifth)
        #expect(honesty.name == "Honesty Master")
        #expect(honesty.description == "Read stories about Honesty 5 times.")
        let curiosity = try #require(english["theme-mastery:curiosity"])
        #expect(!curiosity.earned)
        #expect(curiosity.progress == 0.8)
        #expect(english["theme-mastery:courage"] == nil)

        let ukrainian = evaluate(reads, language: .uk)
        #expect(ukrainian["theme-mastery:honesty"]?.name == "Знавець теми «Чесність»")
        #expect(ukrainian["theme-mastery:honesty"]?.description == "Казки на тему «Чесність» прочитано 5 разів.")
        #expect(ukrainian["theme-mastery:curiosity"]?.name == "Знавець теми «Допитливість»")
        #expect(ukrainian["first-story"]?.name == "Перша казка")
    }

    @Test func aThemeWithoutADisplayNameIsShownByItsKey() throws {
        let statuses = evaluate([try read(UUID(), "2026-06-01T10:00:00Z", theme: "space")], language: .uk)
        #expect(statuses["theme-mastery:space"]?.name == "Знавець теми «space»")
        #expect(statuses["theme-mastery:space"]?.progress == 0.2)
    }

    @Test func completedCollectionsAreEarnedOncePerCollection() throws {
        let id = try #require(UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF"))
        let collection = CompletedCollection(id: id, name: "Bedtime Tales")
        let english = evaluate([], collections: [collection, collection])
        let keys = english.map(\.ruleKey).filter { $0.hasPrefix("collection-completed") }
        #expect(keys == ["collection-completed:6f9619ff-8b86-d011-b42d-00c04fc964ff"])
        let status = try #require(english[keys[0]])
        #expect(status.earned)
        #expect(status.progress == 1)
        #expect(status.storyID == nil)
        #expect(status.type == "collectionCompleted")
        #expect(status.description == "Read every story in “Bedtime Tales”.")
        #expect(
            evaluate([], collections: [collection], language: .uk)[keys[0]]?.description
                == "Прочитано всі казки збірки «Bedtime Tales»."
        )
    }

    // MARK: The rules file

    @Test func shippedRulesHaveEveryLanguageAndEveryStoryTheme() throws {
        #expect(!book.version.isEmpty)
        #expect(
            book.rules.map(\.key) == [
                "first-story", "stories-completed-5", "stories-completed-25", "reading-streak-3", "reading-streak-7",
                "theme-mastery", "collection-completed",
            ]
        )
        for language in ReportLanguage.allCases {
            for rule in book.rules {
                #expect(rule.name[language]?.isEmpty == false, "\(rule.key) \(language)")
                #expect(rule.description[language]?.isEmpty == false, "\(rule.key) \(language)")
            }
            // Every theme the built-in writer uses has a display name in every language.
            for theme in try StoryKnowledgeBase.load(language).themes.keys {
                #expect(book.themeNames[theme]?[language]?.isEmpty == false, "\(theme) \(language)")
            }
            let reads = try StoryKnowledgeBase.load(language).themes.keys.map {
                try read(UUID(), "2026-06-01T10:00:00Z", theme: $0)
            }
            let collection = CompletedCollection(id: UUID(), name: "X")
            for status in evaluate(reads, collections: [collection], language: language) {
                #expect(!status.name.contains("{") && !status.description.contains("{"), "\(status.ruleKey)")
                #expect(!status.icon.isEmpty)
            }
        }
    }

    /// Edits of the shipped file, each with the words its error must contain.
    static let invalidEdits: [(edit: @Sendable (inout [String: Any]) -> Void, message: String)] = [
        ({ $0["version"] = " " }, "version is empty"),
        ({ rules(&$0) { $0[0]["metric"] = "storiesLiked" } }, "unknown metric storiesLiked"),
        ({ rules(&$0) { $0[1]["type"] = "bonus" } }, "unknown type bonus"),
        ({ rules(&$0) { $0[2]["threshold"] = 0 } }, "threshold 0"),
        ({ rules(&$0) { $0[6]["threshold"] = 2 } }, "threshold must be 1"),
        ({ rules(&$0) { $0[3]["name"] = ["en": "Streak"] } }, "rule reading-streak-3 has no uk name"),
        (
            { rules(&$0) { $0[4]["description"] = ["en": "x", "uk": " "] } },
            "rule reading-streak-7 has no uk description"
        ),
        ({ rules(&$0) { $0[1]["key"] = "first-story" } }, "first-story appears twice"),
        ({ rules(&$0) { $0[0]["key"] = "a:b" } }, "without ':'"),
        ({ rules(&$0) { $0[0]["name"] = ["en": "{theme} fan", "uk": "x"] } }, "uses {theme}"),
        ({ rules(&$0) { $0[0]["icon"] = "" } }, "has no icon"),
        ({ $0["themes"] = ["courage": ["en": "Courage"]] }, "theme courage has no uk name"),
        ({ $0["rules"] = [] as [Any] }, "rules is empty"),
        ({ $0.removeValue(forKey: "rules") }, "is not an achievement rules file"),
    ]

    private static func rules(_ file: inout [String: Any], _ edit: (inout [[String: Any]]) -> Void) {
        var rules = file["rules"] as! [[String: Any]]
        edit(&rules)
        file["rules"] = rules
    }

    @Test(arguments: 0..<invalidEdits.count)
    func invalidFilesAreRejectedWithAClearMessage(index: Int) throws {
        let shipped = try AchievementRuleBook.shippedFile()
        var file = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: shipped)) as? [String: Any])
        Self.invalidEdits[index].edit(&file)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("achievements-\(UUID()).json")
        try JSONSerialization.data(withJSONObject: file).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }

        let error = #expect(throws: StoryKnowledgeBaseError.self) { try AchievementRuleBook.load(from: url) }
        #expect(error?.message.contains(Self.invalidEdits[index].message) == true, "\(error?.message ?? "")")
        #expect(error?.message.contains(url.path) == true)
    }

    @Test func theUneditedCopyLoadsAndMissingOrBrokenFilesDoNot() throws {
        let shipped = try AchievementRuleBook.shippedFile()
        #expect(try AchievementRuleBook.load(from: shipped).rules.count == book.rules.count)

        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("no-such-\(UUID()).json")
        let error = #expect(throws: StoryKnowledgeBaseError.self) { try AchievementRuleBook.load(from: missing) }
        #expect(error?.message.contains("cannot read") == true)

        let broken = FileManager.default.temporaryDirectory.appendingPathComponent("broken-\(UUID()).json")
        try Data("{\"version\": ".utf8).write(to: broken)
        defer { try? FileManager.default.removeItem(at: broken) }
        #expect(throws: StoryKnowledgeBaseError.self) { try AchievementRuleBook.load(from: broken) }
    }
}
