import AstroDomain
import Foundation
import Testing
import Yams

@testable import Gateway

/// `openapi.yaml` against the code: the routes the router is built from (`GatewayAPI.routes`)
/// and the document list the same operations, methods and status codes; errors are problems.
@Suite("OpenAPI document")
struct OpenAPIDocumentTests {
    static let rootURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("openapi.yaml")

    struct Operation: Hashable, CustomStringConvertible {
        var method: String
        var path: String
        var operationID: String
        var description: String { "\(method.uppercased()) \(path) (\(operationID))" }
    }

    let document: [String: Any]

    init() throws {
        let text = try String(contentsOf: Self.rootURL, encoding: .utf8)
        document = try #require(try Yams.load(yaml: text) as? [String: Any], "openapi.yaml: not a mapping")
    }

    func mapping(_ value: Any?) -> [String: Any]? {
        guard let dictionary = value as? [AnyHashable: Any] else { return nil }
        return Dictionary(uniqueKeysWithValues: dictionary.map { ("\($0.key)", $0.value) })
    }

    /// Follows a local `$ref` (`#/components/…`).
    func resolve(_ value: Any?) -> [String: Any]? {
        guard let object = mapping(value) else { return nil }
        guard let reference = object["$ref"] as? String else { return object }
        guard reference.hasPrefix("#/") else { return nil }
        var current: Any? = document
        for part in reference.dropFirst(2).split(separator: "/") { current = mapping(current)?[String(part)] }
        return resolve(current)
    }

    /// Every operation of the document with its raw mapping.
    func operations() throws -> [(Operation, [String: Any])] {
        let paths = try #require(mapping(document["paths"]), "openapi.yaml: no paths")
        var result: [(Operation, [String: Any])] = []
        for (path, item) in paths {
            for (method, value) in try #require(mapping(item), "\(path): not a mapping")
            where ["get", "put", "post", "delete", "patch", "head", "options"].contains(method) {
                let operation = try #require(mapping(value), "\(method) \(path): not a mapping")
                let id = try #require(operation["operationId"] as? String, "\(method) \(path): no operationId")
                result.append((Operation(method: method, path: path, operationID: id), operation))
            }
        }
        return result
    }

    @Test func theServedDocumentIsTheRepositoryFile() throws {
        let bundled = try #require(GatewayAPI.document, "the Gateway target's openapi.yaml resource is missing")
        #expect(bundled == (try String(contentsOf: Self.rootURL, encoding: .utf8)))
        #expect((document["openapi"] as? String)?.hasPrefix("3.1.") == true)
    }

    @Test func everyRouteIsDocumentedAndEveryOperationExists() throws {
        let documented = Set(try operations().map(\.0))
        let routed = Set(
            GatewayAPI.routes.map {
                Operation(method: $0.method.rawValue.lowercased(), path: $0.path, operationID: $0.operation.rawValue)
            }
        )
        for missing in routed.subtracting(documented) { Issue.record("not in openapi.yaml: \(missing)") }
        for extra in documented.subtracting(routed) { Issue.record("documented, not routed: \(extra)") }
        #expect(GatewayAPI.routes.count == routed.count, "a route is registered twice")
        #expect(Set(GatewayAPI.routes.map(\.operation)) == Set(GatewayRoute.Operation.allCases))
    }

    @Test func theDocumentedStatusesAreTheOnesTheRoutesAnswer() throws {
        let byID = Dictionary(uniqueKeysWithValues: GatewayAPI.routes.map { ($0.operation.rawValue, $0) })
        for (operation, raw) in try operations() {
            guard let route = byID[operation.operationID] else { continue }
            let responses = try #require(mapping(raw["responses"]), "\(operation): no responses")
            let documented = Set(responses.keys.compactMap { Int($0) })
            #expect(documented.count == responses.count, "\(operation): a response key is not a status code")
            #expect(
                documented == route.statuses,
                "\(operation): documented \(documented.sorted()), code \(route.statuses.sorted())"
            )
        }
    }

    @Test func theMiddlewareFlagsAnAnswerTheTableDoesNotList() {
        #expect(GatewayAPI.isDocumented(status: 404, method: .get, route: "/v1/jobs/{id}"))
        #expect(!GatewayAPI.isDocumented(status: 422, method: .get, route: "/v1/jobs/{id}"))
        #expect(!GatewayAPI.isDocumented(status: 200, method: .post, route: "/v1/profiles"))
        #expect(GatewayAPI.isDocumented(status: 404, method: .get, route: "NotFound"))
    }

    @Test func everyErrorIsAProblemAndEveryReferenceResolves() throws {
        for (operation, raw) in try operations() {
            let responses = try #require(mapping(raw["responses"]))
            for (status, value) in responses {
                let response = try #require(resolve(value), "\(operation) \(status): unresolved $ref")
                #expect(response["description"] is String, "\(operation) \(status): no description")
                guard let code = Int(status), code >= 400 else { continue }
                let content = mapping(response["content"]) ?? [:]
                #expect(Array(content.keys) == ["application/problem+json"], "\(operation) \(status): not a problem")
                let schema = mapping(mapping(content["application/problem+json"])?["schema"])
                #expect(schema?["$ref"] as? String == "#/components/schemas/Problem", "\(operation) \(status)")
            }
        }
    }

    @Test func authenticatedRoutesDeclareTheBearerScheme() throws {
        let schemes = mapping(mapping(document["components"])?["securitySchemes"])
        let bearer = try #require(mapping(schemes?["bearer"]), "no bearer security scheme")
        #expect(bearer["type"] as? String == "http")
        #expect(bearer["scheme"] as? String == "bearer")
        #expect(bearer["bearerFormat"] as? String == "JWT")
        let byID = Dictionary(uniqueKeysWithValues: GatewayAPI.routes.map { ($0.operation.rawValue, $0) })
        for (operation, raw) in try operations() {
            guard let route = byID[operation.operationID] else { continue }
            let security = (raw["security"] as? [Any])?.compactMap { mapping($0)?.keys.first } ?? []
            // The routes that authenticate are the ones that can answer 401 for a token; the
            // refresh route's 401 is about its refresh token, not a bearer token.
            let authenticates = route.statuses.contains(401) && route.operation != .refreshToken
            #expect(security == (authenticates ? ["bearer"] : []), "\(operation): security \(security)")
        }
    }

    @Test func theStoryThemesAreTheContracts() throws {
        let request = try #require(resolve(["$ref": "#/components/schemas/StoryRequest"]), "no StoryRequest schema")
        let theme = try #require(mapping(mapping(request["properties"])?["theme"]), "StoryRequest has no theme")
        #expect(theme["enum"] as? [String] == StoryThemes.keys)
    }

    @Test func theProblemSchemaIsTheProblemTheGatewayWrites() throws {
        let schema = try #require(resolve(["$ref": "#/components/schemas/Problem"]))
        let required = Set(schema["required"] as? [String] ?? [])
        let properties = Set((mapping(schema["properties"]) ?? [:]).keys)
        guard case .object(let bare) = Problem(.invalidJSON, "y").json,
            case .object(let full) = Problem(.invalidJSON, "y", field: "z").json
        else {
            Issue.record("a problem is not a JSON object")
            return
        }
        #expect(required == Set(bare.keys))
        #expect(properties == Set(full.keys))
    }
}

extension Problem {
    /// The body the gateway writes, as the client reads it.
    var json: JSONValue {
        (try? JSONValue.parse(GatewayRoutes.answerEncoder.encode(self))) ?? .null
    }
}
