import AstroDomain
import ChartEngine
import Crypto
import Foundation
import Postgres

/// Content-derived ids of stored chart results.
///
/// The id is a UUID (version 8, RFC 9562) made of the first 16 bytes of SHA-256 over one
/// `key:length:value` line per input — so no value can imitate another field: the user (ids are
/// per user: no row is shared between users, and erasure is per user), the profile (two profiles
/// with the same birth data each own their results), the kind, the canonical
/// parameters (sorted-key JSON), the input charts' `input_digest` values (which already name the
/// birth data, the ephemeris and the engine), `ChartEngine.version`, and for wheels
/// `ChartWheel.version` and the drawn profile names. Same inputs, same id: the cache key.
public enum ChartResultID {
    /// The version of this derivation, hashed first: a change of rule changes every id.
    public static let scheme = "chart-result/2"

    /// The id of a result.
    /// - Parameters:
    ///   - wheel: for wheels, the renderer's version and the names drawn (inner first).
    public static func derive(
        user: UserID,
        profile: ProfileID,
        kind: ChartResultKind,
        parameters: JSONValue,
        inputDigests: [String],
        wheel: (version: String, names: [String])? = nil
    ) -> UUID {
        var text: [UInt8] = []
        func field(_ key: String, _ value: String) {
            text.append(contentsOf: key.utf8)
            text.append(contentsOf: ":\(value.utf8.count):".utf8)
            text.append(contentsOf: value.utf8)
            text.append(UInt8(ascii: "\n"))
        }
        field("scheme", scheme)
        field("user", user.description)
        // The profile too: two profiles of one user with the same birth data have the same
        // input digest, and each must own its results (deleting one must not take the other's).
        field("profile", profile.description)
        field("kind", kind.rawValue)
        field("parameters", parameters.jsonString())
        for digest in inputDigests { field("input", digest) }
        field("engine", ChartEngine.version)
        if let wheel {
            field("wheel", wheel.version)
            for name in wheel.names { field("name", name) }
        }
        var bytes = Array(Crypto.SHA256.hash(data: text).prefix(16))
        bytes[6] = (bytes[6] & 0x0f) | 0x80
        bytes[8] = (bytes[8] & 0x3f) | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            )
        )
    }
}

/// One `chart_results` row, ready to insert.
struct ChartResultRow: Sendable {
    var id: UUID
    var userID: UUID
    var profileID: UUID
    var partnerProfileID: UUID?
    var kind: ChartResultKind
    var parametersJSON: String
    var resultJSON: String?
    var svg: String?
    var bytes: Int

    init(
        id: UUID,
        userID: UUID,
        profileID: UUID,
        partnerProfileID: UUID?,
        kind: ChartResultKind,
        parametersJSON: String,
        resultJSON: String?,
        svg: String?,
        bytes: Int
    ) {
        self.id = id
        self.userID = userID
        self.profileID = profileID
        self.partnerProfileID = partnerProfileID
        self.kind = kind
        self.parametersJSON = parametersJSON
        self.resultJSON = resultJSON
        self.svg = svg
        self.bytes = bytes
    }

    /// A JSON result's row.
    init(
        id: UUID,
        request: (user: UserID, profile: ProfileID, partner: ProfileID?),
        kind: ChartResultKind,
        parameters: JSONValue,
        result: JSONValue
    ) throws {
        let text = result.jsonString()
        self.init(
            id: id,
            userID: request.user.uuid,
            profileID: request.profile.uuid,
            partnerProfileID: request.partner?.uuid,
            kind: kind,
            parametersJSON: parameters.jsonString(),
            resultJSON: text,
            svg: nil,
            bytes: text.utf8.count
        )
    }

    /// Inserts the row; false when a row of the same id was there already (then only its
    /// `last_used_at` is touched).
    func insert(database: PostgresConnection) throws -> Bool {
        let rows = try database.query(
            """
            INSERT INTO chart_results (id, user_id, profile_id, partner_profile_id, kind, parameters, result, svg,
                bytes, engine_version)
            VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9, $10)
            ON CONFLICT (id) DO UPDATE SET last_used_at = now()
            RETURNING (xmax = 0) AS inserted
            """,
            [
                id, userID, profileID, partnerProfileID, kind.rawValue, parametersJSON, resultJSON, svg, bytes,
                ChartEngine.version,
            ]
        )
        return try rows.first?.decode(Bool.self, "inserted") ?? false
    }
}
