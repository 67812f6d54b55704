/// What the caller's query found for one profile a request names.
public struct ProfileChartFacts: Sendable, Hashable {
    /// The user the profile belongs to.
    public var owner: UserID
    /// The stored chart's zodiac as stored (`tropical`, `sidereal:lahiri`; `tropical` for a chart
    /// that names none); `nil` when the profile has no chart yet.
    public var chartZodiac: String?

    public init(owner: UserID, chartZodiac: String?) {
        self.owner = owner
        self.chartZodiac = chartZodiac
    }
}

/// Which profile of a request a refusal is about.
public enum ProfileRole: Sendable, Hashable {
    case profile
    case partner

    /// The request's field that names it.
    public var field: String { self == .profile ? "profileId" : "partnerProfileId" }
}

/// Why a request's profiles may not be used: the code, the field at fault and a message that
/// names it (and never says whether an id exists for another user).
public struct ProfileChartRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: ErrorCode
    public var role: ProfileRole
    public var message: String

    public init(code: ErrorCode, role: ProfileRole, message: String) {
        self.code = code
        self.role = role
        self.message = message
    }

    /// The request's field that names the profile at fault.
    public var field: String { role.field }
    /// The refusal as a job error.
    public var jobError: JobError { JobError(code: code, message: message) }
    public var description: String { "\(code): \(message)" }
}

/// The rule every request about one profile or two (a report, a report for two, a chart result)
/// obeys, wherever it is checked (the gateway before publishing, the billing-worker before
/// spending a credit, the report- and chart-workers before computing): both profiles are the
/// caller's, both have a computed chart, and two charts share a zodiac.
///
/// One code per condition, whoever asks: an unknown, deleted or another user's profile is
/// `profile-not-found` (`partner-not-found` for the partner), a profile without a chart yet is
/// `chart-not-found` (`partner-chart-not-found`), the partner being the profile itself is
/// `same-profile`, and two zodiacs are `zodiac-mismatch`.
public enum ProfileChartRule {
    /// Checks what the caller's query found.
    /// - Parameters:
    ///   - caller: the user the request is for.
    ///   - profileID: the request's profile.
    ///   - profile: what the query found for it; `nil` when there is no such row.
    ///   - partnerID: the request's partner profile, if it names one.
    ///   - partner: what the query found for the partner; `nil` when there is no such row (or no
    ///     partner).
    /// - Returns: `nil` when the request may go on, else the one refusal, checked in this order:
    ///   same profile, the profile's ownership, its chart, the partner's ownership, its chart, the
    ///   zodiacs.
    public static func check(
        caller: UserID,
        profileID: ProfileID,
        profile: ProfileChartFacts?,
        partnerID: ProfileID? = nil,
        partner: ProfileChartFacts? = nil
    ) -> ProfileChartRefusal? {
        if let partnerID, partnerID == profileID {
            return ProfileChartRefusal(
                code: .sameProfile,
                role: .partner,
                message: "partnerProfileId: names the profile itself; a report or chart for two needs two profiles"
            )
        }
        guard let profile, profile.owner == caller else {
            return ProfileChartRefusal(
                code: .profileNotFound,
                role: .profile,
                message: "profileId: user \(caller) has no profile \(profileID)"
            )
        }
        guard let zodiac = profile.chartZodiac else {
            return ProfileChartRefusal(
                code: .chartNotFound,
                role: .profile,
                message: "profileId: profile \(profileID) has no chart yet; wait for its chart.calculate job"
            )
        }
        guard let partnerID else { return nil }
        guard let partner, partner.owner == caller else {
            return ProfileChartRefusal(
                code: .partnerNotFound,
                role: .partner,
                message: "partnerProfileId: user \(caller) has no profile \(partnerID)"
            )
        }
        guard let partnerZodiac = partner.chartZodiac else {
            return ProfileChartRefusal(
                code: .partnerChartNotFound,
                role: .partner,
                message: "partnerProfileId: profile \(partnerID) has no chart yet; wait for its chart.calculate job"
            )
        }
        guard zodiac == partnerZodiac else {
            return ProfileChartRefusal(
                code: .zodiacMismatch,
                role: .partner,
                message: "partnerProfileId: the charts are in different zodiacs (\(zodiac), \(partnerZodiac))"
            )
        }
        return nil
    }
}
