import Postgres

/// The database role a worker connects as (created by migration 0004 with only the grants that
/// worker's jobs need), and the environment variable `astroctl migrate` reads its password from.
public enum WorkerRole: String, CaseIterable, Sendable {
    case chartWorker = "astro_chart_worker"
    case reportWorker = "astro_report_worker"
    case billingWorker = "astro_billing_worker"
    /// Created by migration 0006 for Magical Stories.
    case storyWorker = "astro_story_worker"
    /// Created by migration 0014 for the gateway (not a worker, but a service with its own role).
    case gateway = "astro_gateway"
    /// Created by migration 0020 for astroctl's operator actions (dead letters, cancel): not a
    /// service, but the operator's least-privilege role.
    case `operator` = "astro_operator"
    /// Created by migration 0021 for the `maintenance` task (retention): it may delete only
    /// finished jobs, sent outbox rows and expired gateway records.
    case maintenance = "astro_maintenance"

    /// `CHART_WORKER_DB_PASSWORD`, `REPORT_WORKER_DB_PASSWORD`, `BILLING_WORKER_DB_PASSWORD`,
    /// `STORY_WORKER_DB_PASSWORD`, `GATEWAY_DB_PASSWORD`, `OPERATOR_DB_PASSWORD`,
    /// `MAINTENANCE_DB_PASSWORD`.
    public var passwordVariable: String {
        switch self {
        case .chartWorker: "CHART_WORKER_DB_PASSWORD"
        case .reportWorker: "REPORT_WORKER_DB_PASSWORD"
        case .billingWorker: "BILLING_WORKER_DB_PASSWORD"
        case .storyWorker: "STORY_WORKER_DB_PASSWORD"
        case .gateway: "GATEWAY_DB_PASSWORD"
        case .operator: "OPERATOR_DB_PASSWORD"
        case .maintenance: "MAINTENANCE_DB_PASSWORD"
        }
    }

    /// Lets the role log in with `password` (run by the schema owner after migrating).
    ///
    /// - Throws: `PostgresError` when the role does not exist (migrations not applied) or the
    ///   connected user may not alter it.
    public func enableLogin(password: String, database: PostgresConnection) throws(PostgresError) {
        // The password travels as a SCRAM verifier computed here: never in clear text, so it is
        // in no statement log or error. ALTER ROLE takes no bind parameters: the server quotes
        // the name and the verifier itself.
        let verifier = try database.scramVerifier(password: password, user: rawValue)
        let rows = try database.query(
            "SELECT format('ALTER ROLE %I LOGIN PASSWORD %L', $1::text, $2::text) AS sql",
            [rawValue, verifier]
        )
        guard let row = rows.first else {
            throw PostgresError(kind: .decoding, message: "format() returned no row for role \(rawValue)")
        }
        let statement = try row.decode(String.self, "sql")
        try database.executeScript(SQL(unsafeSQL: statement))
    }
}
