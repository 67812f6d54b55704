import Crypto
import Foundation
import Testing

/// The client generated from openapi.yaml (Tests/IntegrationTests/GatewayAPIClient, walked by
/// GatewayGeneratedClientTests) is the one of the spec as it is: every generated file names the
/// sha256 of the spec it came from, so an edit of the spec without a regeneration fails here,
/// without building the generator.
@Suite("Generated client")
struct GeneratedClientTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func everyGeneratedFileIsOfTheSpecAsItIs() throws {
        let spec = try Data(contentsOf: Self.root.appendingPathComponent("Sources/Gateway/Resources/openapi.yaml"))
        let digest = SHA256.hash(data: spec).map { String(format: "%02x", $0) }.joined()
        let folder = Self.root.appendingPathComponent("Tests/IntegrationTests/GatewayAPIClient")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }
        #expect(files.contains("Client.swift") && files.contains("Types.swift"), "generated files: \(files)")
        for file in files.sorted() {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            let header = text.split(separator: "\n").prefix(5).first { $0.contains("openapi.yaml sha256 ") }
            let named = header?.split(separator: " ").drop { $0 != "sha256" }.dropFirst().first.map(String.init)
            #expect(
                named == digest,
                """
                GatewayAPIClient/\(file) was generated from openapi.yaml sha256 \(named ?? "(none)"), the spec's \
                is \(digest): run scripts/generate-openapi.sh
                """
            )
        }
    }
}
