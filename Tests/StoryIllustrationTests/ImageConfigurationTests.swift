import Foundation
import LLMClient
import Testing

@Suite("ImageConfiguration from the environment")
struct ImageConfigurationTests {
    static let key = "sk-proj-Img8uR2x9LmN4vT7wK1pB"
    static let base = [
        "IMAGE_BASE_URL": "https://api.openai.com/v1/", "IMAGE_MODEL": "gpt-image-1", "IMAGE_API_KEY": key,
    ]

    private func with(_ changes: [String: String?]) -> [String: String] {
        var environment = Self.base
        for (name, value) in changes { environment[name] = value }
        return environment
    }

    /// The refusal's description, or "" when the environment was accepted.
    private func refusal(_ environment: [String: String]) -> String {
        do {
            _ = try ImageConfiguration.fromEnvironment(environment)
            return ""
        } catch {
            return error.description
        }
    }

    @Test("no IMAGE_BASE_URL: no images API, whatever else is set")
    func unset() throws {
        #expect(try ImageConfiguration.fromEnvironment([:]) == nil)
        #expect(try ImageConfiguration.fromEnvironment(with(["IMAGE_BASE_URL": " "])) == nil)
        // The chat variables do not configure images.
        #expect(
            try ImageConfiguration.fromEnvironment([
                "LLM_BASE_URL": "https://api.openai.com/v1", "LLM_MODEL": "m", "LLM_API_KEY": Self.key,
            ]) == nil
        )
    }

    @Test("the defaults, and every variable read")
    func everyVariable() throws {
        let defaults = try #require(try ImageConfiguration.fromEnvironment(Self.base))
        #expect(defaults.baseURL.absoluteString == "https://api.openai.com/v1")
        #expect(defaults.model == "gpt-image-1")
        #expect(defaults.size == "1024x1024")
        #expect(defaults.requestTimeout == .seconds(120))
        #expect(defaults.retryPolicy.maxAttempts == 3)
        #expect(defaults.retryPolicy.deadline == .seconds(300))

        let path = FileManager.default.temporaryDirectory.appendingPathComponent("image-key-\(UUID().uuidString)").path
        try "  \(Self.key)\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let tuned = try #require(
            try ImageConfiguration.fromEnvironment([
                "IMAGE_BASE_URL": "http://127.0.0.1:8080/v1", "IMAGE_MODEL": " dall-e-3 ", "IMAGE_API_KEY_FILE": path,
                "IMAGE_SIZE": "1792x1024", "IMAGE_TIMEOUT_SECONDS": "90.5", "IMAGE_MAX_ATTEMPTS": "5",
                "IMAGE_DEADLINE_SECONDS": "600",
            ])
        )
        #expect(tuned.baseURL.absoluteString == "http://127.0.0.1:8080/v1")
        #expect(tuned.model == "dall-e-3")
        #expect(tuned.size == "1792x1024")
        #expect(tuned.requestTimeout == .milliseconds(90_500))
        #expect(tuned.retryPolicy.maxAttempts == 5)
        #expect(tuned.retryPolicy.deadline == .seconds(600))
        #expect(!tuned.description.contains(Self.key))
    }

    @Test("missing or invalid settings are refused with the variable named")
    func refusals() {
        #expect(refusal(Self.base) == "")
        #expect(refusal(with(["IMAGE_MODEL": nil])).contains("IMAGE_MODEL is required when IMAGE_BASE_URL is set"))
        #expect(refusal(with(["IMAGE_API_KEY": nil])).contains("IMAGE_API_KEY or IMAGE_API_KEY_FILE is required"))
        #expect(
            refusal(with(["IMAGE_API_KEY_FILE": "/tmp/k"])).contains(
                "set IMAGE_API_KEY or IMAGE_API_KEY_FILE, not both"
            )
        )
        #expect(
            refusal(with(["IMAGE_API_KEY": nil, "IMAGE_API_KEY_FILE": "/nonexistent/image-key"]))
                .contains("IMAGE_API_KEY_FILE /nonexistent/image-key: no such file")
        )
        #expect(refusal(with(["IMAGE_API_KEY": "sk-with space"])).contains("IMAGE_API_KEY must be printable ASCII"))
        #expect(refusal(with(["IMAGE_BASE_URL": "http://images.example.com/v1"])).contains("IMAGE_BASE_URL"))
        let credentials = refusal(with(["IMAGE_BASE_URL": "https://user:hunter2@images.example.com/v1"]))
        #expect(credentials.contains("IMAGE_BASE_URL must not carry credentials (the key goes in IMAGE_API_KEY)"))
        #expect(!credentials.contains("hunter2"))
        for size in ["1024", "1024x", "x1024", "1024X1024", "1024x1024x2", "32x32", "8192x8192", "+512x512", "auto"] {
            #expect(refusal(with(["IMAGE_SIZE": size])).contains("IMAGE_SIZE must be <width>x<height>"), "\(size)")
        }
        #expect(refusal(with(["IMAGE_SIZE": "512x768"])) == "")
        #expect(refusal(with(["IMAGE_TIMEOUT_SECONDS": "soon"])).contains("IMAGE_TIMEOUT_SECONDS"))
        #expect(refusal(with(["IMAGE_TIMEOUT_SECONDS": "900"])).contains("IMAGE_TIMEOUT_SECONDS"))
        #expect(refusal(with(["IMAGE_MAX_ATTEMPTS": "0"])).contains("IMAGE_MAX_ATTEMPTS must be 1...20"))
        #expect(refusal(with(["IMAGE_MAX_ATTEMPTS": "two"])).contains("IMAGE_MAX_ATTEMPTS must be a whole number"))
        #expect(refusal(with(["IMAGE_DEADLINE_SECONDS": "-1"])).contains("IMAGE_DEADLINE_SECONDS"))
        for text in [refusal(with(["IMAGE_API_KEY": Self.key + " x"])), refusal(with(["IMAGE_SIZE": "big"]))] {
            #expect(!text.contains(Self.key))
        }
    }

    @Test("the key never appears in a description or a dump")
    func keyRedacted() throws {
        let configuration = try ImageConfiguration(
            baseURL: URL(string: "https://api.openai.com/v1")!,
            model: "gpt-image-1",
            apiKey: Self.key
        )
        var dumped = ""
        dump(configuration, to: &dumped)
        for text in [configuration.description, configuration.debugDescription, "\(configuration)", dumped] {
            #expect(!text.contains(Self.key))
            #expect(!text.contains("Img8uR2"))
        }
        #expect(configuration.description.contains("apiKey: <redacted>"))
        #expect(dumped.contains("<redacted>"))
    }
}
