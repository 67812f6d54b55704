import AstroCLISupport
import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import LLMClient
import LLMFake
import Reports
import UUIDText

/// What `bench e2e --type report` needs beyond credits: a real chart for every seeded profile
/// (the report-workers read and interpret it), and for `--llm-delay` a local OpenAI-compatible
/// endpoint whose answers pass the LLM writer's checks.
enum ReportBenchFixture {
    /// The chart every seeded profile gets: Kyiv, 1990-10-07 15:00, Placidus.
    static func chart() async throws -> NatalChart {
        let body: JSONValue = [
            "jobId": .string(JobID.random().description), "userId": .string(UUID().lowercasedText),
            "profile": [
                "name": "Bench", "birthDate": "1990-10-07", "birthTime": "15:00", "timezone": "Europe/Kyiv",
                "latitude": .number(50.4501), "longitude": .number(30.5234), "locationName": "Kyiv, Ukraine",
            ],
            "houseSystem": "placidus",
        ]
        let request: ChartCalculateRequest
        do {
            request = try ChartCalculateRequest(json: body)
        } catch {
            throw CommandFailure("bench chart request: \(error.message)")
        }
        let engine: ChartEngine
        do {
            engine = ChartEngine(ephemeris: try Ephemeris(configuration: EphemerisConfiguration(threads: 1)))
        } catch {
            throw CommandFailure("ephemeris: \(error.message)")
        }
        do {
            return try await engine.chart(for: request.birthData)
        } catch {
            throw CommandFailure("bench chart: \(error)")
        }
    }

    /// The bench chart as the JSON stored in `birth_charts.chart_data`.
    static func chartJSON() async throws -> String {
        String(decoding: try JSONCoding.encoder.encode(try await chart()), as: UTF8.self)
    }

    /// A fake endpoint answering every request after `delay` seconds with a well-formed report
    /// in the language the prompt asks for (the built-in writer's text for the bench chart), so
    /// what is measured is the report-worker waiting on a slow model, not answer rejections.
    static func llmFake(delay: Double) async throws -> OpenAIFake {
        let natal = try await chart()
        let writer: BuiltInReportWriter
        do {
            writer = try BuiltInReportWriter()
        } catch {
            throw CommandFailure("knowledge base: \(error)")
        }
        let english = writer.write(chart: natal, area: .career, language: .en).text
        let ukrainian = writer.write(chart: natal, area: .career, language: .uk).text
        do {
            return try OpenAIFake(
                apiKey: "sk-bench-\(UUID().uuidString)",
                defaultResponder: { messages in
                    // The Ukrainian prompts ask for the answer "українською мовою".
                    messages.contains { $0.content.contains("українською") } ? ukrainian : english
                },
                defaultDelay: .milliseconds(Int64((delay * 1_000).rounded()))
            )
        } catch {
            throw CommandFailure("fake LLM endpoint: \(error)")
        }
    }
}
