import Foundation

/// The WebAuthn authenticator data App Attest uses: RP id hash (32 bytes), flags (1), counter
/// (4, big-endian), then for an attestation the attested credential data: aaguid (16),
/// credential id length (2) and id, and the COSE public key (not read: the key comes from the
/// certificate).
public struct AuthenticatorData: Sendable, Equatable {
    public var rpIDHash: Data
    public var flags: UInt8
    public var counter: UInt32
    /// Present when flag AT (0x40) is set.
    public var aaguid: Data?
    public var credentialID: Data?

    /// The length of the fixed part.
    static let headerLength = 37
    /// An attestation's credential id is a SHA-256 key id; anything longer than this is refused.
    static let maxCredentialIDLength = 64

    /// Parses authenticator data.
    /// - Throws: `AppAttestError` with `code` when it is too short or its credential data is cut off.
    init(_ data: Data, code: AppAttestError.Code) throws(AppAttestError) {
        let bytes = [UInt8](data)
        guard bytes.count >= Self.headerLength else {
            throw AppAttestError(code, "the authenticator data has \(bytes.count) bytes, fewer than 37")
        }
        rpIDHash = Data(bytes[0..<32])
        flags = bytes[32]
        counter = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        guard flags & 0x40 != 0 else { return }
        guard bytes.count >= Self.headerLength + 18 else {
            throw AppAttestError(code, "the attested credential data is cut off")
        }
        aaguid = Data(bytes[37..<53])
        let length = Int(bytes[53]) << 8 | Int(bytes[54])
        guard length <= Self.maxCredentialIDLength, bytes.count >= 55 + length else {
            throw AppAttestError(code, "the credential id (\(length) bytes) is too long or cut off")
        }
        credentialID = Data(bytes[55..<55 + length])
    }
}
