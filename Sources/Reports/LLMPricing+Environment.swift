import Foundation
import LLMClient

extension LLMPricing {
    /// The configured model's prices from `LLM_PRICE_INPUT_PER_1M_USD` and
    /// `LLM_PRICE_OUTPUT_PER_1M_USD` (USD per million tokens; unset or empty: 0).
    ///
    /// - Throws: `LLMConfigurationError` naming the variable whose value is not a price ≥ 0.
    public static func fromEnvironment(_ environment: [String: String]) throws(LLMConfigurationError) -> LLMPricing {
        func price(_ name: String) throws(LLMConfigurationError) -> Decimal {
            guard let text = environment[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return 0 }
            guard let value = Decimal(string: text), value >= 0 else {
                throw LLMConfigurationError("\(name): expected a price in USD per million tokens, got \(text)")
            }
            return value
        }
        return LLMPricing(
            inputPerMillionUSD: try price("LLM_PRICE_INPUT_PER_1M_USD"),
            outputPerMillionUSD: try price("LLM_PRICE_OUTPUT_PER_1M_USD")
        )
    }
}
