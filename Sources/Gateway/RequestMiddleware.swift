import AstroDomain
import Foundation
import Hummingbird
import Logging
import UUIDText
import WorkerRuntime

/// Gives every request an id (the client's `X-Request-Id` when it is 1–64 safe characters),
/// puts it on every log line and on the response, turns every error into a problem+json answer,
/// logs and counts the request.
struct RequestMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let metrics: GatewayMetrics

    func handle(
        _ request: Request,
        context: GatewayRequestContext,
        next: (Request, GatewayRequestContext) async throws -> Response
    ) async throws -> Response {
        let started = ContinuousClock.now
        var context = context
        let requestID = Self.requestID(request.headers[GatewayRoutes.requestIDHeader])
        // One id per request on every log line: ours (the client's when well-formed) replaces
        // the one Hummingbird made up, under its key (`context.id` reads it).
        context.logger[metadataKey: "hb.request.id"] = "\(requestID)"
        var response: Response
        do {
            response = try await next(request, context)
        } catch let problem as Problem {
            response = Self.response(problem)
        } catch let error as HTTPResponseError
            where error.status == .notFound
            && !GatewayAPI.methods(forPath: request.uri.path).isEmpty
            && !GatewayAPI.methods(forPath: request.uri.path).contains(request.method)
        {
            // A known path asked with a method it does not have: 405 with the methods it has
            // (RFC 9110 §15.5.6), not 404.
            let allowed = GatewayAPI.methods(forPath: request.uri.path)
            response = Self.response(
                Problem(
                    .methodNotAllowed,
                    "\(request.method.rawValue) is not allowed here; allowed: \(allowed.map(\.rawValue).joined(separator: ", "))"
                )
            )
            response.headers[.allow] = allowed.map(\.rawValue).joined(separator: ", ")
        } catch let error as HTTPResponseError {
            // The framework's own refusals answer like ours: the catalogue's code, status and
            // title ("Not found", not the reason phrase "Not Found").
            let status = error.status
            response = Self.response(
                status == .notFound
                    ? Problem.notFound() : Problem(.http(status: status.code), status.reasonPhrase)
            )
        } catch {
            // An unexpected error's description may quote the request: its detail at debug only.
            FailureLogging.log(
                "request failed",
                level: .error,
                code: ErrorCode.internalError.rawValue,
                publicReason: FailureLogging.publicReason(of: error) ?? "\(type(of: error))",
                detail: String(reflecting: error),
                logger: context.logger
            )
            response = Self.response(
                Problem(.internalError, "the request failed")
            )
        }
        response.headers[GatewayRoutes.requestIDHeader] = requestID
        if !GatewayAPI.isDocumented(
            status: response.status.code,
            method: request.method,
            route: context.endpointPath
        ) {
            // The route table, and so openapi.yaml, is missing this answer.
            context.logger.error(
                "status not in the route table",
                metadata: ["http.route": "\(context.endpointPath ?? "")", "http.status": "\(response.status.code)"]
            )
        }
        let elapsed = ContinuousClock.now - started
        metrics.recordRequest(
            route: context.endpointPath ?? "unmatched",
            status: response.status.code,
            duration: elapsed
        )
        context.logger.info(
            "request",
            metadata: [
                "http.method": "\(request.method.rawValue)",
                "http.route": "\(context.endpointPath ?? "unmatched")",
                "http.status": "\(response.status.code)",
                "http.duration_ms":
                    "\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)",
            ]
        )
        return response
    }

    static func requestID(_ header: String?) -> String {
        if let header, (1...64).contains(header.utf8.count),
            header.utf8.allSatisfy({ byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                    true
                default: false
                }
            })
        {
            return header
        }
        return UUID().lowercasedText
    }

    static func response(_ problem: Problem) -> Response {
        var headers: HTTPFields = [.contentType: "application/problem+json"]
        if let retryAfter = problem.retryAfter { headers[.retryAfter] = "\(retryAfter)" }
        if problem.status == 401 { headers[.wwwAuthenticate] = "Bearer" }
        return Response(
            status: HTTPResponse.Status(code: problem.status),
            headers: headers,
            body: .init(byteBuffer: ByteBuffer(bytes: (try? GatewayRoutes.answerEncoder.encode(problem)) ?? Data()))
        )
    }
}
