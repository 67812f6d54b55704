import Foundation
import Postgres

/// The database schema of the backend: numbered SQL migrations shipped as package resources.
public enum AstroSchema {
    /// Every migration of the schema, in version order.
    ///
    /// - Throws: `AstroSchemaError` when the bundled folder is missing, or `PostgresError`
    ///   (kind `.migration`) when a file in it is misnamed: both mean a broken build.
    public static func migrations() throws -> [Migration] {
        guard let directory = Bundle.module.url(forResource: "Migrations", withExtension: nil) else {
            throw AstroSchemaError(message: "the Migrations resource folder is missing from the Schema bundle")
        }
        return try Migration.load(directory: directory)
    }
}

/// The schema's resources could not be found: the package was built or installed incompletely.
public struct AstroSchemaError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
