import Foundation

/// Reports for two (issue 20, part 7): a `relationships` report.request may name another
/// profile of the same user as `partnerProfileId`. The rejection codes are shared by the gateway
/// (before publishing) and the billing-worker (before spending a credit); CONTRACT.md lists them.
/// The codes are the catalogue's (`ErrorCode.partnerNotAllowed`, …).
public enum PartnerRule {
    /// A partner with an area other than `relationships`.
    public static let notAllowed: ErrorCode = .partnerNotAllowed
    /// The partner is the report's own profile.
    public static let sameProfile: ErrorCode = .sameProfile
    /// The partner is unknown, deleted or another user's: one code, so ids cannot be probed.
    public static let notFound: ErrorCode = .partnerNotFound
    /// The partner profile has no stored chart yet.
    public static let chartNotFound: ErrorCode = .partnerChartNotFound

    /// The rejection a request's partner earns without looking at any stored data: `nil` when
    /// there is no partner, or it may be used (ownership is checked against the database).
    public static func staticRejection(
        profileID: ProfileID,
        partnerProfileID: ProfileID?,
        area: ReportArea
    ) -> ErrorCode? {
        guard let partnerProfileID else { return nil }
        if area != .relationships { return notAllowed }
        if partnerProfileID == profileID { return sameProfile }
        return nil
    }
}

extension ReportRequest {
    /// `PartnerRule.staticRejection` for this request.
    public var partnerRejection: ErrorCode? {
        PartnerRule.staticRejection(profileID: profileID, partnerProfileID: partnerProfileID, area: area)
    }
}
