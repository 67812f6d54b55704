import ByteCodecs
import Foundation
import LoopbackHTTP
import Synchronization

/// A local OpenAI-compatible images API on 127.0.0.1 that behaves like OpenAI's, errors included.
///
/// Every request must carry `Authorization: Bearer <apiKey>` (else 401 `invalid_api_key`).
/// `POST /v1/images/generations` takes JSON and `POST /v1/images/edits` takes
/// `multipart/form-data` (read for real: the boundary from `Content-Type`, a `prompt` field and an
/// `image` file part are required). A well-formed request is answered by the next scripted
/// response queued with `enqueue(_:count:)`, else, after `defaultDelay`, by a small valid PNG in
/// `data[0].b64_json` whose colour follows the prompt. Another path or method is 404; a request
/// OpenAI would refuse is 400 `invalid_request_error` (neither uses up a scripted response).
public final class OpenAIImagesFake: Sendable {
    /// A scripted answer, used up by one request.
    public enum Scripted: Sendable, Hashable {
        /// 200 with `image` (the default PNG when nil) and `revised_prompt` when given.
        case success(image: Data? = nil, revisedPrompt: String? = nil)
        /// 429 `rate_limit_exceeded`, with `Retry-After: n` when given.
        case rateLimited(retryAfter: Int?)
        /// `status` (500 unless told) with OpenAI's `server_error` body.
        case serverError(status: Int = 500)
        /// 401 `invalid_api_key`, whatever key the request carried.
        case unauthorized
        /// 400 `invalid_request_error` with `message`.
        case badRequest(message: String)
        /// 400 `content_policy_violation`: the safety system refused the prompt.
        case contentPolicy
        /// 200 whose body is not valid JSON.
        case malformedJSON
        /// Never answers; the connection stays open until the client gives up or the fake stops.
        case hang
        /// 200 with the default PNG, after `seconds`.
        case delayed(seconds: Double)
    }

    /// The key requests must carry.
    public let apiKey: String
    private let server: LoopbackHTTPServer
    private let store: ImagesStore

    /// Starts the fake on a free loopback port.
    /// - Parameters:
    ///   - apiKey: the key requests must carry as `Authorization: Bearer <apiKey>`.
    ///   - defaultDelay: how long an unscripted answer takes (a model's drawing time), zero by
    ///     default; requests wait concurrently, as they do at a real endpoint.
    /// - Throws: `LoopbackHTTPError` when no port can be bound.
    public init(
        apiKey: String = "sk-fake-images-0123456789abcdef",
        defaultDelay: Duration = .zero
    ) throws(LoopbackHTTPError) {
        self.apiKey = apiKey
        let store = ImagesStore(apiKey: apiKey, defaultDelay: defaultDelay)
        self.store = store
        // The handler holds the store, not the fake, so releasing the fake stops the server.
        self.server = try LoopbackHTTPServer(name: "openai-images-fake") { request in
            await store.handle(request)
        }
    }

    /// `http://127.0.0.1:<port>/v1`, to use as the client's base URL.
    public var baseURL: URL { server.baseURL.appendingPathComponent("v1") }

    /// The fake's port on 127.0.0.1.
    public var port: Int { server.port }

    /// Queues `response` `count` times for the next well-formed, authorized requests of either
    /// endpoint (used in the order queued).
    public func enqueue(_ response: Scripted, count: Int = 1) {
        store.state.withLock { $0.scripted.append(contentsOf: repeatElement(response, count: max(0, count))) }
    }

    /// Scripted responses queued and not yet used.
    public var pendingScripted: [Scripted] { store.state.withLock { $0.scripted } }

    /// Requests received, refused ones included.
    public var requestCount: Int { store.state.withLock { $0.traffic.requestCount } }

    /// Requests refused with 401 because of the key (scripted `.unauthorized` ones not included).
    public var unauthorizedCount: Int { store.state.withLock { $0.traffic.unauthorizedCount } }

    /// Well-formed generation requests received.
    public var generationsCount: Int { store.state.withLock { $0.generationsCount } }

    /// Well-formed edit requests received.
    public var editsCount: Int { store.state.withLock { $0.editsCount } }

    /// The most requests being handled at the same moment since the start.
    public var maxConcurrentRequests: Int { store.state.withLock { $0.traffic.maxInFlight } }

    /// The last well-formed request's prompt (either endpoint).
    public var lastPrompt: String? { store.state.withLock { $0.lastRequest?.prompt } }

    /// The last well-formed request's `model`, when it named one.
    public var lastModel: String? { store.state.withLock { $0.lastRequest?.model } }

    /// The last well-formed request's `size`, when it gave one.
    public var lastSize: String? { store.state.withLock { $0.lastRequest?.size } }

    /// The last well-formed request's `response_format`, when it gave one.
    public var lastResponseFormat: String? { store.state.withLock { $0.lastRequest?.responseFormat } }

    /// The bytes of the last well-formed edit's `image` part, exactly as received.
    public var lastEditImage: Data? { store.state.withLock { $0.lastEdit?.image } }

    /// The last well-formed edit's prompt.
    public var lastEditPrompt: String? { store.state.withLock { $0.lastEdit?.prompt } }

    /// The last well-formed edit's image part's file name and content type.
    public var lastEditImageFile: (filename: String?, contentType: String?)? {
        store.state.withLock { state in state.lastEdit.map { ($0.imageFilename, $0.imageContentType) } }
    }

    /// The last request's body as sent (any path).
    public var lastRequestBody: Data? { store.state.withLock { $0.traffic.lastBody } }

    /// The last request's `Authorization` header as sent.
    public var lastAuthorizationHeader: String? { store.state.withLock { $0.traffic.lastAuthorization } }

    /// Stops serving: open connections are closed and hanging or delayed requests end.
    public func stop() { server.stop() }

    /// A valid `width`×`height` RGB PNG of one colour: signature, IHDR, one IDAT (zlib with stored
    /// deflate blocks) and IEND, with correct CRCs and Adler-32. Sides are clamped to 1…256.
    public static func tinyPNG(width: Int = 8, height: Int = 8, red: UInt8, green: UInt8, blue: UInt8) -> Data {
        PNGWriter.solid(width: min(max(width, 1), 256), height: min(max(height, 1), 256), rgb: (red, green, blue))
    }

    /// The default answer's PNG for `prompt`: 8×8, its colour taken from an FNV-1a hash of the
    /// prompt, so different pages get different (and repeatable) images.
    public static func defaultImage(prompt: String) -> Data {
        var hash: UInt32 = 0x811C_9DC5
        for byte in prompt.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return tinyPNG(red: UInt8(truncatingIfNeeded: hash), green: UInt8(truncatingIfNeeded: hash >> 8), blue: 200)
    }
}

/// An images request as the fake read it, from either endpoint.
private struct ImageRequest: Sendable {
    var model: String?
    var prompt: String
    var size: String?
    var responseFormat: String?
}

/// What an edit uploaded.
private struct ReceivedEdit: Sendable {
    var prompt: String
    var image: Data
    var imageFilename: String?
    var imageContentType: String?
}

/// The fake's state, shared by the fake and its server's handler.
private final class ImagesStore: Sendable {
    struct State {
        var scripted: [OpenAIImagesFake.Scripted] = []
        var traffic = TrafficCounters()
        var generationsCount = 0
        var editsCount = 0
        var lastRequest: ImageRequest?
        var lastEdit: ReceivedEdit?
    }

    let state = Mutex(State())
    let apiKey: String
    let defaultDelay: Duration

    init(apiKey: String, defaultDelay: Duration) {
        self.apiKey = apiKey
        self.defaultDelay = defaultDelay
    }

    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let authorized = state.withLock { $0.traffic.begin(request, apiKey: apiKey) }
        defer { state.withLock { $0.traffic.end() } }
        guard authorized else { return OpenAIErrorResponse.invalidAPIKey }

        let parsed: Result<ImageRequest, Refusal>
        switch (request.method, request.path) {
        case ("POST", "/v1/images/generations"):
            parsed = Self.readGeneration(request.body).flatMap(Self.validate)
            if case .success(let image) = parsed {
                state.withLock {
                    $0.generationsCount += 1
                    $0.lastRequest = image
                }
            }
        case ("POST", "/v1/images/edits"):
            let edit = Self.readEdit(request)
            parsed = edit.map { $0.0 }.flatMap(Self.validate)
            if case .success(let image) = parsed, case .success(let (_, received)) = edit {
                state.withLock {
                    $0.editsCount += 1
                    $0.lastRequest = image
                    $0.lastEdit = received
                }
            }
        default:
            return OpenAIErrorResponse.invalidURL(request)
        }
        let image: ImageRequest
        switch parsed {
        case .failure(let refusal): return refusal.response
        case .success(let accepted): image = accepted
        }

        let scripted = state.withLock { $0.scripted.isEmpty ? nil : $0.scripted.removeFirst() }
        guard let scripted else {
            if defaultDelay > .zero { try? await Task.sleep(for: defaultDelay) }
            return Self.success(OpenAIImagesFake.defaultImage(prompt: image.prompt), revisedPrompt: nil)
        }
        switch scripted {
        case .success(let data, let revisedPrompt):
            return Self.success(
                data ?? OpenAIImagesFake.defaultImage(prompt: image.prompt),
                revisedPrompt: revisedPrompt
            )
        case .delayed(let seconds):
            // Cancelled (and so answered at once, to nobody) when the server stops.
            try? await Task.sleep(for: .milliseconds(Int64((max(0, seconds) * 1_000).rounded())))
            return Self.success(OpenAIImagesFake.defaultImage(prompt: image.prompt), revisedPrompt: nil)
        case .rateLimited(let retryAfter):
            return OpenAIErrorResponse.rateLimited(model: image.model ?? "dall-e-2", retryAfter: retryAfter)
        case .serverError(let status):
            return OpenAIErrorResponse.serverError(status: status)
        case .unauthorized:
            return OpenAIErrorResponse.invalidAPIKey
        case .badRequest(let message):
            return OpenAIErrorResponse.invalidRequest(message)
        case .contentPolicy:
            return OpenAIErrorResponse.invalidRequest(
                "Your request was rejected as a result of our safety system. Your prompt may contain text that is "
                    + "not allowed by our safety system.",
                code: "content_policy_violation"
            )
        case .malformedJSON:
            return .json(status: 200, text: #"{"created":1700000000,"data":[{"b64_js"#)
        case .hang:
            return .hangUntilStopped
        }
    }

    private struct Refusal: Error {
        var response: HTTPResponse

        init(_ message: String) { response = OpenAIErrorResponse.invalidRequest(message) }
    }

    /// The fields of a generation's JSON body.
    private struct GenerationBody: Decodable {
        var model: String?
        var prompt: String?
        var n: Int?
        var size: String?
        var responseFormat: String?

        enum CodingKeys: String, CodingKey {
            case model
            case prompt
            case n
            case size
            case responseFormat = "response_format"
        }
    }

    private static func readGeneration(_ body: Data) -> Result<GenerationBody, Refusal> {
        guard let decoded = try? JSONDecoder().decode(GenerationBody.self, from: body) else {
            return .failure(Refusal(OpenAIErrorResponse.unparsableJSON))
        }
        return .success(decoded)
    }

    /// The edit's fields as a generation body, and what it uploaded.
    private static func readEdit(_ request: HTTPRequest) -> Result<(GenerationBody, ReceivedEdit), Refusal> {
        let contentType = request.headers["Content-Type"] ?? ""
        guard let boundary = MultipartFormData.boundary(contentType: contentType) else {
            return .failure(
                Refusal(
                    "Invalid Content-Type header (\(contentType)), expected multipart/form-data with a boundary. "
                        + "(HINT: If you're using curl, you can pass -F 'image=@<file>' to upload a file.)"
                )
            )
        }
        let form: MultipartFormData
        do {
            form = try MultipartFormData.parse(request.body, boundary: boundary)
        } catch {
            return .failure(Refusal("Could not parse multipart form: \(error.reason)."))
        }
        guard let image = form.part("image") ?? form.part("image[]"), image.filename != nil else {
            return .failure(Refusal("Missing required parameter: 'image'."))
        }
        guard Self.isImage(image.data) else {
            return .failure(Refusal("Invalid image file or mode for image 1, please check your image file."))
        }
        var n = 1
        if let text = form.part("n")?.text {
            guard let number = Int(text) else {
                return .failure(Refusal("Invalid type for 'n': expected an integer, but got a string instead."))
            }
            n = number
        }
        let fields = GenerationBody(
            model: form.part("model")?.text,
            prompt: form.part("prompt")?.text,
            n: n,
            size: form.part("size")?.text,
            responseFormat: form.part("response_format")?.text
        )
        let received = ReceivedEdit(
            prompt: fields.prompt ?? "",
            image: image.data,
            imageFilename: image.filename,
            imageContentType: image.contentType
        )
        return .success((fields, received))
    }

    /// The checks both endpoints make, in OpenAI's words.
    private static func validate(_ body: GenerationBody) -> Result<ImageRequest, Refusal> {
        guard let prompt = body.prompt, !prompt.isEmpty else {
            return .failure(Refusal("Missing required parameter: 'prompt'."))
        }
        if let n = body.n, !(1...10).contains(n) {
            return .failure(Refusal("Invalid 'n': integer out of range. Expected a value between 1 and 10, got \(n)."))
        }
        if let format = body.responseFormat, format != "b64_json" {
            // OpenAI would also take `url`; this fake only serves images inline.
            return .failure(
                Refusal("Invalid value: '\(format)'. This fake supports response_format 'b64_json' only.")
            )
        }
        if let size = body.size, !Self.isSize(size) {
            return .failure(Refusal("Invalid value: '\(size)'. Supported values are sizes like '1024x1024'."))
        }
        return .success(
            ImageRequest(model: body.model, prompt: prompt, size: body.size, responseFormat: body.responseFormat)
        )
    }

    private static func isSize(_ text: String) -> Bool {
        let sides = text.split(separator: "x", omittingEmptySubsequences: false)
        return sides.count == 2 && sides.allSatisfy { !$0.isEmpty && $0.count <= 4 && $0.allSatisfy(\.isWholeNumber) }
    }

    /// PNG, JPEG or WebP, by their magic numbers (what OpenAI's edits accept).
    private static func isImage(_ data: Data) -> Bool {
        data.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) || data.starts(with: [0xFF, 0xD8, 0xFF])
            || (data.count >= 12 && data.starts(with: Array("RIFF".utf8))
                && data.dropFirst(8).starts(with: Array("WEBP".utf8)))
    }

    /// OpenAI's images answer: `{"created", "data": [{"b64_json", "revised_prompt"?}]}`.
    private static func success(_ image: Data, revisedPrompt: String?) -> HTTPResponse {
        struct Body: Encodable {
            struct Item: Encodable {
                var b64JSON: String
                var revisedPrompt: String?

                enum CodingKeys: String, CodingKey {
                    case b64JSON = "b64_json"
                    case revisedPrompt = "revised_prompt"
                }
            }

            var created: Int
            var data: [Item]
        }
        let body = Body(
            created: Int(Date().timeIntervalSince1970),
            data: [Body.Item(b64JSON: image.base64EncodedString(), revisedPrompt: revisedPrompt)]
        )
        return .json(status: 200, body)
    }
}

/// Writes PNG files of one colour: tiny, so stored rather than compressed.
enum PNGWriter {
    static func solid(width: Int, height: Int, rgb: (UInt8, UInt8, UInt8)) -> Data {
        let pixels = [UInt8]([rgb.0, rgb.1, rgb.2].repeated(width * height))
        return Data(PNGEncoder.encode(width: width, height: height, rgb: pixels, compression: .stored))
    }
}

extension Array {
    fileprivate func repeated(_ times: Int) -> [Element] {
        var result: [Element] = []
        result.reserveCapacity(count * times)
        for _ in 0..<times { result.append(contentsOf: self) }
        return result
    }
}
