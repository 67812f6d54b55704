import Foundation
import Testing

@testable import AstroDomain

/// A valid birth (the contract's example) that each test breaks in one place.
private func kyiv(
    name: String = "Me",
    birthDate: String = "1990-10-07",
    birthTime: String = "15:00",
    timezone: String = "Europe/Kyiv",
    latitude: Double = 50.4501,
    longitude: Double = 30.5234
) -> BirthData {
    BirthData(
        name: name,
        birthDate: birthDate,
        birthTime: birthTime,
        timezone: timezone,
        latitude: latitude,
        longitude: longitude,
        locationName: "Kyiv, Ukraine"
    )
}

/// The error `validated()` throws, or `nil` when the birth data is valid.
private func validationError(_ birth: BirthData) -> ChartInputError? {
    do {
        _ = try birth.validated()
        return nil
    } catch {
        return error
    }
}

@Suite struct BirthDataValidationTests {
    @Test func contractExampleIsValidAndNormalized() throws {
        var birth = kyiv(name: "  Me \n")
        birth.points = [.chiron, .meanNode, .chiron]
        let valid = try birth.validated()
        #expect(valid.name == "Me")
        #expect(valid.points == [.meanNode, .chiron])
    }

    @Test(arguments: [
        ("", "invalid-name"),
        ("   ", "invalid-name"),
        (String(repeating: "a", count: 51), "invalid-name"),
    ])
    func invalidNames(name: String, code: String) {
        let error = validationError(kyiv(name: name))
        #expect(error?.code.rawValue == code)
        #expect(error?.field == "profile.name")
        #expect(error?.message.hasPrefix("profile.name: must be 1–50 characters") == true)
    }

    @Test func nameLimitsCountCharactersAfterTrimming() {
        #expect(validationError(kyiv(name: String(repeating: "я", count: 50))) == nil)
        #expect(validationError(kyiv(name: " " + String(repeating: "a", count: 50) + " ")) == nil)
        #expect(validationError(kyiv(name: "👩‍👩‍👧")) == nil)  // one character
    }

    @Test(arguments: [
        "1990-13-07", "1990-00-10", "1990-10-32", "2001-02-29", "1900-02-29", "1990-1-07", "90-10-07",
        "1990/10/07", "1990-10-07T00:00", "", "abcd-ef-gh", "１９９０-10-07",
    ])
    func malformedDates(text: String) {
        let error = validationError(kyiv(birthDate: text))
        #expect(error?.code == .invalidBirthDate)
        #expect(error?.field == "profile.birthDate")
    }

    @Test(arguments: ["1899-12-31", "2101-01-01", "0001-01-01", "9999-12-31"])
    func datesOutOfRange(text: String) {
        let error = validationError(kyiv(birthDate: text))
        #expect(error?.code == .birthDateOutOfRange)
        #expect(error?.field == "profile.birthDate")
        #expect(error?.message == "profile.birthDate: \(text) is outside 1900-01-01…2100-12-31")
    }

    @Test func rangeBoundariesAndLeapDays() {
        #expect(validationError(kyiv(birthDate: "1900-01-01", birthTime: "00:00")) == nil)
        #expect(validationError(kyiv(birthDate: "2100-12-31", birthTime: "23:59")) == nil)
        #expect(validationError(kyiv(birthDate: "2000-02-29")) == nil)
        #expect(validationError(kyiv(birthDate: "2096-02-29")) == nil)
        #expect(validationError(kyiv(birthDate: "2100-02-29"))?.code == .invalidBirthDate)
    }

    @Test(arguments: ["24:00", "23:60", "9:05", "09:5", "15:00:00", "3pm", "", "15.00", "-1:00", "１５:00"])
    func malformedTimes(text: String) {
        let error = validationError(kyiv(birthTime: text))
        #expect(error?.code == .invalidBirthTime)
        #expect(error?.field == "profile.birthTime")
    }

    @Test func timeBoundaries() {
        #expect(validationError(kyiv(birthTime: "00:00")) == nil)
        #expect(validationError(kyiv(birthTime: "23:59")) == nil)
    }

    @Test func latitudeRange() {
        let error = validationError(kyiv(latitude: 95.0))
        #expect(error?.code == .latitudeOutOfRange)
        #expect(error?.field == "profile.latitude")
        #expect(error?.message == "profile.latitude: 95.0 is outside −90…90")
        #expect(validationError(kyiv(latitude: -90.000_1))?.code == .latitudeOutOfRange)
        #expect(validationError(kyiv(latitude: .nan))?.code == .latitudeOutOfRange)
        #expect(validationError(kyiv(latitude: 90)) == nil)
        #expect(validationError(kyiv(latitude: -90)) == nil)
    }

    @Test func longitudeRange() {
        let error = validationError(kyiv(longitude: -180.5))
        #expect(error?.code == .longitudeOutOfRange)
        #expect(error?.field == "profile.longitude")
        #expect(error?.message == "profile.longitude: -180.5 is outside −180…180")
        #expect(validationError(kyiv(longitude: .infinity))?.code == .longitudeOutOfRange)
        #expect(validationError(kyiv(longitude: 180)) == nil)
        #expect(validationError(kyiv(longitude: -180)) == nil)
    }

    @Test(arguments: ["Mars/Olympus", "europe/kyiv", "Europe/Kyiv ", "", "PST", "GMT+5", "UTC+3", "+02:00", "Kyiv"])
    func unknownTimeZones(identifier: String) {
        let error = validationError(kyiv(timezone: identifier))
        #expect(error?.code == .unknownTimezone)
        #expect(error?.field == "profile.timezone")
    }

    @Test(arguments: [
        "Europe/Kyiv", "Europe/Kiev", "America/New_York", "UTC", "Etc/GMT+5", "Asia/Kolkata",
        "America/Argentina/Buenos_Aires", "EST5EDT",
    ])
    func knownTimeZones(identifier: String) {
        #expect(validationError(kyiv(timezone: identifier)) == nil)
    }

    @Test func firstBrokenRuleIsReported() {
        let error = validationError(kyiv(name: "", birthDate: "nope", latitude: 100))
        #expect(error?.code == .invalidName)
    }
}

@Suite struct BirthDateTests {
    @Test func daysSince1970RoundTrips() {
        #expect(BirthDate(year: 1970, month: 1, day: 1).daysSince1970 == 0)
        #expect(BirthDate(year: 2000, month: 3, day: 1).daysSince1970 == 11_017)
        #expect(BirthDate(year: 1900, month: 1, day: 1).daysSince1970 == -25_567)
        for days in stride(from: -30_000, through: 50_000, by: 17) {
            #expect(BirthDate(daysSince1970: days).daysSince1970 == days)
        }
        #expect(BirthDate(daysSince1970: -1).description == "1969-12-31")
    }
}

@Suite struct ChartEnumTests {
    @Test func signsFromLongitude() {
        #expect(ZodiacSign(longitude: 0) == .aries)
        #expect(ZodiacSign(longitude: 29.999_999) == .aries)
        #expect(ZodiacSign(longitude: 30) == .taurus)
        #expect(ZodiacSign(longitude: 194.1) == .libra)
        #expect(ZodiacSign(longitude: 359.999_999) == .pisces)
        #expect(ZodiacSign(longitude: 360) == .aries)
        #expect(ZodiacSign(longitude: -1) == .pisces)
        #expect(ZodiacSign(longitude: 725) == .aries)
        #expect(ZodiacSign.allCases.map(\.rawValue).first == "Aries")
        #expect(ZodiacSign.pisces.startLongitude == 330)
    }

    @Test func elementsAndModalitiesCycle() {
        for (index, sign) in ZodiacSign.allCases.enumerated() {
            #expect(sign.element == ZodiacSign.Element.allCases[index % 4])
            #expect(sign.modality == ZodiacSign.Modality.allCases[index % 3])
        }
    }

    @Test func aspectTypesHaveTheSeedOrbs() {
        #expect(AspectType.allCases.map(\.rawValue) == ["Conjunction", "Opposition", "Trine", "Square", "Sextile"])
        #expect(AspectType.allCases.map(\.angle) == [0, 180, 120, 90, 60])
        #expect(AspectType.allCases.map(\.maxOrb) == [8, 8, 7, 7, 6])
    }

    @Test func namesAreTheSeedRawValues() {
        #expect(
            PlanetName.allCases.map(\.rawValue).joined(separator: ",")
                == "Sun,Moon,Mercury,Venus,Mars,Jupiter,Saturn,Uranus,Neptune,Pluto"
        )
        #expect(ChartPoint.allCases.map(\.rawValue) == ["MeanNode", "TrueNode", "Chiron", "MeanLilith"])
        #expect(ChartHouseSystem.allCases.count == 7)
        #expect(ChartHouseSystem.wholeSign.rawValue == "wholeSign")
    }

    @Test func zodiacSystemStrings() throws {
        #expect(ZodiacSystem.tropical.rawValue == "tropical")
        #expect(ZodiacSystem.sidereal(.lahiri).rawValue == "sidereal:lahiri")
        #expect(ZodiacSystem(rawValue: "sidereal:faganBradley") == .sidereal(.faganBradley))
        #expect(ZodiacSystem(rawValue: "sidereal:") == nil)
        let data = try JSONEncoder().encode([ZodiacSystem.sidereal(.raman)])
        #expect(String(decoding: data, as: UTF8.self) == "[\"sidereal:raman\"]")
    }
}

@Suite struct ChartCalculateRequestTests {
    static let jobID = "9b2f0c4e-1d2a-4c3b-8e5f-6a7b8c9d0e1f"
    static let userID = "4c1a0c4e-1d2a-4c3b-8e5f-6a7b8c9d0e1f"

    /// The contract's body with one member of the profile or of the body replaced or removed.
    static func body(profile changes: [String: JSONValue?] = [:], top: [String: JSONValue?] = [:]) -> JSONValue {
        var profile: [String: JSONValue] = [
            "name": "Me", "birthDate": "1990-10-07", "birthTime": "15:00", "timezone": "Europe/Kyiv",
            "latitude": 50.4501, "longitude": 30.5234, "locationName": "Kyiv, Ukraine",
        ]
        for (key, value) in changes { profile[key] = value }
        var body: [String: JSONValue] = [
            "jobId": .string(jobID), "userId": .string(userID), "profile": .object(profile), "houseSystem": "placidus",
        ]
        for (key, value) in top { body[key] = value }
        return .object(body)
    }

    static func error(_ json: JSONValue) -> ChartInputError? {
        do {
            _ = try ChartCalculateRequest(json: json)
            return nil
        } catch {
            return error
        }
    }

    @Test func decodesTheContractExample() throws {
        let text = """
            {"jobId": "\(Self.jobID)", "userId": "\(Self.userID)",
             "profile": {"name": "Me", "birthDate": "1990-10-07", "birthTime": "15:00", "timezone": "Europe/Kyiv",
                         "latitude": 50.4501, "longitude": 30.5234, "locationName": "Kyiv, Ukraine"},
             "houseSystem": "placidus"}
            """
        let request = try ChartCalculateRequest.decode(from: Data(text.utf8))
        #expect(request.jobID.description == Self.jobID)
        #expect(request.userID.description == Self.userID)
        #expect(request.profileID == nil)
        #expect(request.birthData == kyiv())
        #expect(request.birthData.dstPolicy == nil)
        #expect(request.birthData.zodiac == .tropical)
        // Through Codable, with the same result.
        #expect(try JSONCoding.decoder.decode(ChartCalculateRequest.self, from: Data(text.utf8)) == request)
    }

    @Test func optionalFields() throws {
        let profileID = "11111111-2222-4333-8444-555555555555"
        let request = try ChartCalculateRequest(
            json: Self.body(
                profile: ["id": .string(profileID)],
                top: [
                    "houseSystem": nil, "dstPolicy": "later", "points": ["Chiron", "MeanNode"], "sidereal": "lahiri",
                ]
            )
        )
        #expect(request.profileID?.description == profileID)
        #expect(request.birthData.houseSystem == .placidus)
        #expect(request.birthData.dstPolicy == .later)
        #expect(request.birthData.points == [.meanNode, .chiron])
        #expect(request.birthData.zodiac == .sidereal(.lahiri))
        // Encodes back to the same request.
        let again = try ChartCalculateRequest.decode(from: request.jsonData())
        #expect(again == request)
        // Nulls count as absent.
        let nulls = try ChartCalculateRequest(
            json: Self.body(profile: ["id": .null], top: ["dstPolicy": .null, "points": .null, "sidereal": .null])
        )
        #expect(nulls.profileID == nil && nulls.birthData.dstPolicy == nil && nulls.birthData.points.isEmpty)
    }

    @Test(arguments: [
        ("jobId", "missing-field"), ("userId", "missing-field"), ("profile", "missing-field"),
    ])
    func missingTopLevelFields(key: String, code: String) {
        let error = Self.error(Self.body(top: [key: nil]))
        #expect(error?.code.rawValue == code)
        #expect(error?.field == key)
    }

    @Test(arguments: ["name", "birthDate", "birthTime", "timezone", "latitude", "longitude", "locationName"])
    func missingProfileFields(key: String) {
        let error = Self.error(Self.body(profile: [key: nil]))
        #expect(error?.code == .missingField)
        #expect(error?.field == "profile." + key)
        #expect(error?.message.hasPrefix("profile.\(key): missing") == true)
    }

    @Test func mistypedFields() {
        let latitude = Self.error(Self.body(profile: ["latitude": "50.45"]))
        #expect(latitude?.code == .invalidFieldType)
        #expect(latitude?.message == "profile.latitude: expected a number, got a string")
        #expect(Self.error(Self.body(profile: ["name": 42]))?.field == "profile.name")
        #expect(Self.error(Self.body(top: ["profile": "me"]))?.code == .invalidFieldType)
        #expect(Self.error(Self.body(top: ["houseSystem": 1]))?.code == .invalidFieldType)
        #expect(Self.error(Self.body(top: ["points": "Chiron"]))?.code == .invalidFieldType)
        #expect(Self.error(Self.body(top: ["points": [1]]))?.field == "points[0]")
    }

    @Test func invalidIDs() {
        #expect(Self.error(Self.body(top: ["jobId": "42"]))?.code == .invalidID)
        #expect(Self.error(Self.body(top: ["userId": "x"]))?.field == "userId")
        #expect(Self.error(Self.body(profile: ["id": "nope"]))?.field == "profile.id")
    }

    @Test func enumeratedOptions() {
        let house = Self.error(Self.body(top: ["houseSystem": "topocentric"]))
        #expect(house?.code == .unknownHouseSystem)
        #expect(house?.field == "houseSystem")
        #expect(
            house?.message
                == "houseSystem: \"topocentric\" is not one of placidus, koch, porphyry, regiomontanus, campanus, "
                + "equal, wholeSign"
        )
        let policy = Self.error(Self.body(top: ["dstPolicy": "nearest"]))
        #expect(policy?.code == .invalidDSTPolicy)
        #expect(policy?.field == "dstPolicy")
        #expect(Self.error(Self.body(top: ["points": ["Vertex"]]))?.code == .unknownPoint)
        #expect(Self.error(Self.body(top: ["sidereal": "krishnamurti"]))?.code == .unknownAyanamsa)
    }

    @Test func validationRulesApplyToTheBody() {
        #expect(Self.error(Self.body(profile: ["latitude": 95]))?.code == .latitudeOutOfRange)
        #expect(Self.error(Self.body(profile: ["birthDate": "1899-12-31"]))?.code == .birthDateOutOfRange)
        #expect(Self.error(Self.body(profile: ["timezone": "Mars/Olympus"]))?.code == .unknownTimezone)
        #expect(Self.error(Self.body(profile: ["name": ""]))?.code == .invalidName)
    }

    @Test func notAnObject() throws {
        #expect(throws: ChartInputError.self) { try ChartCalculateRequest.decode(from: Data("[1]".utf8)) }
        #expect(throws: ChartInputError.self) { try ChartCalculateRequest.decode(from: Data("{".utf8)) }
        #expect(ChartCalculateRequest.jobID(in: Data("{\"jobId\":\"\(Self.jobID)\"}".utf8))?.description == Self.jobID)
        #expect(ChartCalculateRequest.jobID(in: Data("{".utf8)) == nil)
    }
}
