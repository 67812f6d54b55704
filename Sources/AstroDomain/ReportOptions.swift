/// A life area a report speaks to (the seed's `ReportArea`): `area` of `report.request`,
/// `report.generate` and `billing.refund-credit`.
public enum ReportArea: String, Sendable, Codable, CaseIterable, Hashable {
    case finances, career, relationships, health, general
}

/// The language a report or a story is written in: `language` of the report and story jobs.
public enum ReportLanguage: String, Sendable, Codable, CaseIterable, Hashable {
    case en, uk
}
