import Foundation

/// Reports for two (issue 20, part 7): a `relationships` report.request may name another
/// profile of the same user as `partnerProfileId`. The rejection codes are shared by the gateway
/// (before publishing) and the billing-worker (before spending a credit); CONTRACT.md lists them.
public enum PartnerRule {
    /// A partner with an area other than `relationships`.
    public static let notAllowed = "partner-not-allowed"
    /// The partner is the report's own profile.
    public static let sameProfile = "same-profile"
    /// The partner is unknown, deleted or another user's: one code, so ids cannot be probed.
    public static let notFound = "partner-not-found"
    /// The partner profile has no stored chart yet.
    public static let chartNotFound = "partner-chart-not-found"

    /// The rejection a request's partner earns without looking at any stored data: `nil` when
    /// there is no partner, or it may be used (ownership is checked against the database).
    public static func staticRejection(
        profileID: ProfileID,
        partnerProfileID: ProfileID?,
        area: ReportArea
    ) -> String? {
        guard let partnerProfileID else { return nil }
        if area != .relationships { return notAllowed }
        if partnerProfileID == profileID { return sameProfile }
        return nil
    }
}

extension ReportRequest {
    /// `PartnerRule.staticRejection` for this request.
    public var partnerRejection: String? {
        PartnerRule.staticRejection(profileID: profileID, partnerProfileID: partnerProfileID, area: area)
    }
}
