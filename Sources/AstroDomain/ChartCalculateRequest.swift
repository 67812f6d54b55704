import Foundation

/// The body of a `chart.calculate` job (CONTRACT.md), decoded and validated.
///
/// ```json
/// {"jobId": "…", "userId": "…",
///  "profile": {"id": "optional", "name": "Me", "birthDate": "1990-10-07", "birthTime": "15:00",
///              "timezone": "Europe/Kyiv", "latitude": 50.4501, "longitude": 30.5234,
///              "locationName": "Kyiv, Ukraine"},
///  "houseSystem": "placidus", "dstPolicy": "earlier",
///  "points": ["MeanNode", "Chiron"], "sidereal": "lahiri"}
/// ```
/// `houseSystem` defaults to `placidus`; `dstPolicy`, `points` and `sidereal` are optional (a
/// `null` counts as absent). `points` and `sidereal` extend the contract's body: `points` lists
/// `ChartPoint` raw values, `sidereal` names an ayanamsa (`lahiri`, `faganBradley`, `raman`) and
/// makes the chart sidereal. Unknown keys are ignored.
public struct ChartCalculateRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var userID: UserID
    /// The profile to update; `nil` creates a new profile.
    public var profileID: ProfileID?
    /// The profile block and chart options, validated.
    public var birthData: BirthData

    public init(jobID: JobID, userID: UserID, profileID: ProfileID? = nil, birthData: BirthData) {
        self.jobID = jobID
        self.userID = userID
        self.profileID = profileID
        self.birthData = birthData
    }

    /// Decodes and validates a body.
    /// - Throws: `ChartInputError`: `invalid-json` when the body is not a JSON object, then, field
    ///   by field in the order of the contract, `missing-field`, `invalid-field-type`, `invalid-id`,
    ///   `unknown-house-system`, `invalid-dst-policy`, `unknown-point`, `unknown-ayanamsa`, and the
    ///   rules of `BirthData.validated()`.
    public static func decode(from data: Data) throws(ChartInputError) -> ChartCalculateRequest {
        let json: JSONValue
        do {
            json = try JSONValue.parse(data)
        } catch {
            throw ChartInputError(.invalidJSON, field: "", message: "the body is not valid JSON (\(error))")
        }
        return try ChartCalculateRequest(json: json)
    }

    /// The `jobId` of a body, when it has a readable one, even if the rest is invalid (so that a
    /// `chart.failed` event can name the job).
    public static func jobID(in data: Data) -> JobID? {
        guard let json = try? JSONValue.parse(data) else { return nil }
        return json["jobId"]?.stringValue.flatMap(JobID.init)
    }

    /// Validates a decoded body; see `decode(from:)`.
    public init(json: JSONValue) throws(ChartInputError) {
        guard case .object = json else {
            throw ChartInputError(.invalidJSON, field: "", message: "the body is not a JSON object")
        }
        let body = Fields(json, path: "")
        jobID = try body.id("jobId", JobID.self)
        userID = try body.id("userId", UserID.self)
        guard let profileJSON = json["profile"], profileJSON != .null else {
            throw ChartInputError(
                .missingField,
                field: ChartField.profile,
                message: "\(ChartField.profile): missing (an object is required)"
            )
        }
        guard case .object = profileJSON else {
            throw Fields.typeError(ChartField.profile, expected: "an object", got: profileJSON)
        }
        let profile = Fields(profileJSON, path: "profile.")
        profileID = try profile.optionalID("id", ProfileID.self)
        let name = try profile.string("name")
        let birthDate = try profile.string("birthDate")
        let birthTime = try profile.string("birthTime")
        let timezone = try profile.string("timezone")
        let latitude = try profile.number("latitude")
        let longitude = try profile.number("longitude")
        let locationName = try profile.string("locationName")

        let houseSystem = try body.optionalEnum(
            "houseSystem",
            ChartHouseSystem.self,
            code: .unknownHouseSystem
        )
        let dstPolicy = try body.optionalEnum("dstPolicy", DSTPolicy.self, code: .invalidDSTPolicy)
        let points = try body.points("points")
        let ayanamsa = try body.optionalEnum("sidereal", ZodiacSystem.Ayanamsa.self, code: .unknownAyanamsa)

        birthData = try BirthData(
            name: name,
            birthDate: birthDate,
            birthTime: birthTime,
            timezone: timezone,
            latitude: latitude,
            longitude: longitude,
            locationName: locationName,
            houseSystem: houseSystem ?? .placidus,
            dstPolicy: dstPolicy,
            points: points,
            zodiac: ayanamsa.map { .sidereal($0) } ?? .tropical
        ).validated()
    }

    /// The body as JSON, in the contract's shape (optional keys only when set).
    public var json: JSONValue {
        var profile: [String: JSONValue] = [
            "name": .string(birthData.name),
            "birthDate": .string(birthData.birthDate),
            "birthTime": .string(birthData.birthTime),
            "timezone": .string(birthData.timezone),
            "latitude": .number(birthData.latitude),
            "longitude": .number(birthData.longitude),
            "locationName": .string(birthData.locationName),
        ]
        if let profileID { profile["id"] = .string(profileID.description) }
        var body: [String: JSONValue] = [
            "jobId": .string(jobID.description),
            "userId": .string(userID.description),
            "profile": .object(profile),
            "houseSystem": .string(birthData.houseSystem.rawValue),
        ]
        if let dstPolicy = birthData.dstPolicy { body["dstPolicy"] = .string(dstPolicy.rawValue) }
        if !birthData.points.isEmpty { body["points"] = .array(birthData.points.map { .string($0.rawValue) }) }
        if case .sidereal(let ayanamsa) = birthData.zodiac { body["sidereal"] = .string(ayanamsa.rawValue) }
        return .object(body)
    }

    /// The body as JSON data (sorted keys), ready to publish.
    public func jsonData() throws -> Data { try JSONCoding.encoder.encode(json) }

    /// Decodes through `init(json:)`; the error thrown is the `ChartInputError` itself.
    public init(from decoder: any Decoder) throws {
        try self.init(json: JSONValue(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }
}

/// Typed reads of the members of one JSON object, with errors naming the member's path.
private struct Fields {
    let json: JSONValue
    let path: String

    init(_ json: JSONValue, path: String) {
        self.json = json
        self.path = path
    }

    /// The member, or `nil` when absent or `null`.
    func value(_ key: String) -> JSONValue? {
        guard let value = json[key], value != .null else { return nil }
        return value
    }

    func required(_ key: String, _ expected: String) throws(ChartInputError) -> JSONValue {
        guard let value = value(key) else {
            throw ChartInputError(
                .missingField,
                field: path + key,
                message: "\(path + key): missing (\(expected) is required)"
            )
        }
        return value
    }

    func string(_ key: String) throws(ChartInputError) -> String {
        let value = try required(key, "a string")
        guard case .string(let text) = value else { throw Self.typeError(path + key, expected: "a string", got: value) }
        return text
    }

    func number(_ key: String) throws(ChartInputError) -> Double {
        let value = try required(key, "a number")
        guard case .number(let number) = value else {
            throw Self.typeError(path + key, expected: "a number", got: value)
        }
        return number
    }

    func id<ID: TypedID>(_ key: String, _ type: ID.Type) throws(ChartInputError) -> ID {
        let text = try string(key)
        guard let id = ID(text) else {
            throw ChartInputError(
                .invalidID,
                field: path + key,
                message: "\(path + key): \(InputQuote.short(text)) is not a UUID"
            )
        }
        return id
    }

    func optionalID<ID: TypedID>(_ key: String, _ type: ID.Type) throws(ChartInputError) -> ID? {
        guard value(key) != nil else { return nil }
        return try id(key, type)
    }

    func optionalEnum<Value>(
        _ key: String,
        _ type: Value.Type,
        code: ChartInputError.Code
    ) throws(ChartInputError) -> Value? where Value: RawRepresentable<String> & CaseIterable {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else {
            throw Self.typeError(path + key, expected: "a string", got: value)
        }
        guard let parsed = Value(rawValue: text) else {
            let allowed = Value.allCases.map(\.rawValue).joined(separator: ", ")
            throw ChartInputError(
                code,
                field: path + key,
                message: "\(path + key): \(InputQuote.short(text)) is not one of \(allowed)"
            )
        }
        return parsed
    }

    func points(_ key: String) throws(ChartInputError) -> [ChartPoint] {
        guard let value = value(key) else { return [] }
        guard case .array(let items) = value else {
            throw Self.typeError(path + key, expected: "an array of strings", got: value)
        }
        var points: [ChartPoint] = []
        for (index, item) in items.enumerated() {
            let itemPath = "\(path + key)[\(index)]"
            guard case .string(let text) = item else {
                throw Self.typeError(itemPath, expected: "a string", got: item)
            }
            guard let point = ChartPoint(rawValue: text) else {
                let allowed = ChartPoint.allCases.map(\.rawValue).joined(separator: ", ")
                throw ChartInputError(
                    .unknownPoint,
                    field: itemPath,
                    message: "\(itemPath): \(InputQuote.short(text)) is not one of \(allowed)"
                )
            }
            points.append(point)
        }
        return points
    }

    static func typeError(_ field: String, expected: String, got value: JSONValue) -> ChartInputError {
        ChartInputError(
            .invalidFieldType,
            field: field,
            message: "\(field): expected \(expected), got \(kind(of: value))"
        )
    }

    static func kind(of value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
