import AstroDomain
import Foundation
import Testing
import ZoneInfo

@Suite struct ZoneInfoLoadTests {
    /// Every regular file below the system directory, except the `right/` and `posix/` copies.
    static func systemZoneFiles() -> [String] {
        let root = ZoneInfoRules.systemDirectory
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
        var files: [String] = []
        while let path = walker.nextObject() as? String {
            if path == "right" || path == "posix" {
                walker.skipDescendants()
                continue
            }
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDirectory),
                !isDirectory.boolValue
            {
                files.append(path)
            }
        }
        return files.sorted()
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: ZoneInfoRules.systemDirectory + "/UTC")))
    func everyTZifFileParses() throws {
        var parsed = 0
        for path in Self.systemZoneFiles() {
            let url = URL(fileURLWithPath: ZoneInfoRules.systemDirectory + "/" + path)
            let data = try Data(contentsOf: url)
            guard data.prefix(4).elementsEqual("TZif".utf8) else { continue }
            let rules = try ZoneInfoRules(data: data, identifier: path)
            #expect(!rules.localTimeTypes.isEmpty, "\(path)")
            #expect(rules.version >= 2, "\(path)")
            // zic makes type 0 the first standard type, so RFC 8536's "type 0 before the first
            // transition" and the older "first standard type" agree on every system file.
            #expect(!rules.localTimeTypes[0].isDaylightSaving, "\(path)")
            parsed += 1
            // Loading by identifier gives the same rules, where the name is an identifier.
            if path.utf8.allSatisfy({ $0 != UInt8(ascii: ".") }) {
                #expect(try ZoneInfoRules.load(identifier: path) == rules, "\(path)")
            }
        }
        #expect(parsed > 300)
    }

    @Test(arguments: ["../etc/passwd", "/etc/passwd", "Europe/../../etc/passwd", "Europe/Kyiv.tab", "", "Europe/Ky iv"])
    func unsafeIdentifiersAreRefused(identifier: String) {
        #expect {
            try ZoneInfoRules.load(identifier: identifier)
        } throws: { error in
            (error as? ZoneInfoError)?.code == .invalidIdentifier
        }
    }

    @Test func filesThatAreNotTZifAreRefused() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("zoneinfo-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data("# tzdb timezone descriptions\nAD\t+4230+00131\tEurope/Andorra\n".utf8)
            .write(to: directory.appendingPathComponent("zone_tab"))
        try Data("TZif2".utf8).write(to: directory.appendingPathComponent("short"))
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("Europe"),
            withIntermediateDirectories: true
        )
        func code(_ identifier: String) -> ZoneInfoError.Code? {
            do {
                _ = try ZoneInfoRules.load(identifier: identifier, directory: directory.path)
                return nil
            } catch {
                return error.code
            }
        }
        #expect(code("zone_tab") == .notTZif)
        #expect(code("short") == .malformed)
        #expect(code("Europe") == .notTZif)
        #expect(code("Europe/Nowhere") == .notFound)
    }

    @Test func systemProviderReadsTheDatabaseAndFallsBackToFoundation() throws {
        let system = SystemTimeZones()
        let amsterdam = try #require(system.rules(forIdentifier: "Europe/Amsterdam"))
        #expect(amsterdam is ZoneInfoRules)
        #expect(amsterdam.identifier == "Europe/Amsterdam")
        #expect(system.rules(forIdentifier: "Mars/Olympus") == nil)
        #expect(system.rules(forIdentifier: "right/UTC") == nil)
        #expect(system.rules(forIdentifier: "posix/Europe/Kyiv") == nil)

        // No database at all (a container without tzdata): Foundation's zones.
        let missing = SystemTimeZones(directory: "/nonexistent-zoneinfo")
        let kyiv = try #require(missing.rules(forIdentifier: "Europe/Kyiv"))
        #expect(kyiv is TimeZone)
        #expect(missing.rules(forIdentifier: "Mars/Olympus") == nil)
    }

    @Test func birthDataValidationStaysStrict() throws {
        let system = SystemTimeZones.shared
        for identifier in ["PST", "GMT+5", "europe/kyiv", "/Europe/Kyiv", "Europe/../Europe/Kyiv", "posixrules"] {
            #expect(throws: ChartInputError.self, "\(identifier)") {
                try BirthData.timeZoneRules(named: identifier, in: system)
            }
        }
        #expect(try BirthData.timeZoneRules(named: "Europe/Kyiv", in: system) is ZoneInfoRules)
        #expect(try BirthData.timeZoneRules(named: "UTC", in: system) is ZoneInfoRules)
    }

    @Test func amsterdam1935ResolvesWithAmsterdamMeanTime() throws {
        let birth = BirthData(
            name: "A",
            birthDate: "1935-11-20",
            birthTime: "12:00",
            timezone: "Europe/Amsterdam",
            latitude: 52.37,
            longitude: 4.89,
            locationName: "Amsterdam"
        )
        let instant = try birth.resolveInstant(timeZones: SystemTimeZones.shared)
        #expect(instant.utcOffset == 1172)
        #expect(ISO8601.string(from: instant.utc) == "1935-11-20T11:40:28Z")
    }

    @Test func gapsAndOverlapsAreFoundInTheDatabase() throws {
        let newYork = try ZoneInfoRules.load(identifier: "America/New_York")
        // 2099-03-08 02:30 does not exist; 2099-11-01 01:30 happens twice.
        let gap = LocalTimeConverter.resolve(
            date: BirthDate(year: 2099, month: 3, day: 8),
            time: BirthTime(hour: 2, minute: 30),
            in: newYork
        )
        #expect(
            gap
                == .nonexistent(
                    transition: Date(timeIntervalSince1970: 4_076_636_400),
                    offsetBefore: -18000,
                    offsetAfter: -14400
                )
        )
        let overlap = LocalTimeConverter.resolve(
            date: BirthDate(year: 2099, month: 11, day: 1),
            time: BirthTime(hour: 1, minute: 30),
            in: newYork
        )
        guard case .ambiguous(_, let firstOffset, _, let secondOffset) = overlap else {
            Issue.record("expected an overlap, got \(overlap)")
            return
        }
        #expect(firstOffset == -14400)
        #expect(secondOffset == -18000)
    }
}

/// Issue 29, F12: the system provider asks the one rule first and keeps its cache bounded.
@Suite struct SystemTimeZonesBoundTests {
    @Test func aNulByteIsRefusedBeforeTheDatabaseAndNotCached() {
        let system = SystemTimeZones()
        #expect(system.rules(forIdentifier: "Europe/Kyiv") != nil)
        for index in 0..<2000 {
            #expect(system.rules(forIdentifier: "Europe/Kyiv\u{0}\(index)") == nil)
        }
        #expect(system.cachedCount == 1)
        #expect(throws: ChartInputError.self) { try BirthData.timeZoneRules(named: "Europe/Kyiv\u{0}", in: system) }
    }

    @Test func manyDistinctUnknownNamesStayWithinTheBound() {
        let system = SystemTimeZones(cache: ZoneLookupCache(capacity: 64, unknownCapacity: 32))
        #expect(system.rules(forIdentifier: "Europe/Kyiv") != nil)
        for index in 0..<5000 {
            #expect(system.rules(forIdentifier: "Mars/Crater\(index)") == nil)
        }
        #expect(system.cachedCount == 1 + 32)
        #expect(system.rules(forIdentifier: "Europe/Kyiv") is ZoneInfoRules)
    }

    /// The rule refuses no zone of the database: every `Area/Location` TZif file is accepted.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: ZoneInfoRules.systemDirectory + "/UTC")))
    func everyZoneFileNameIsAnIANAName() throws {
        let names = ZoneInfoLoadTests.systemZoneFiles().filter {
            $0.contains("/") && (try? ZoneInfoRules.load(identifier: $0)) != nil
        }
        #expect(names.count > 300)
        for name in names { #expect(BirthData.isIANAZoneName(name), "\(name)") }
    }
}
