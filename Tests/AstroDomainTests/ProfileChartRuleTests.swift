import Foundation
import Testing

@testable import AstroDomain

/// `ProfileChartRule`: every outcome, and the order in which refusals are found.
@Suite struct ProfileChartRuleTests {
    let caller = UserID(UUID())
    let other = UserID(UUID())
    let profile = ProfileID(UUID())
    let partner = ProfileID(UUID())

    func mine(_ zodiac: String? = "tropical") -> ProfileChartFacts {
        ProfileChartFacts(owner: caller, chartZodiac: zodiac)
    }

    func check(
        _ profileFacts: ProfileChartFacts?,
        partner partnerFacts: ProfileChartFacts? = nil,
        two: Bool = false
    )
        -> ProfileChartRefusal?
    {
        ProfileChartRule.check(
            caller: caller,
            profileID: profile,
            profile: profileFacts,
            partnerID: two ? partner : nil,
            partner: partnerFacts
        )
    }

    @Test func oneProfileOfTheCallerWithAChartPasses() {
        #expect(check(mine()) == nil)
        #expect(check(mine("sidereal:lahiri")) == nil)
    }

    @Test func twoProfilesOfTheCallerInOneZodiacPass() {
        #expect(check(mine(), partner: mine(), two: true) == nil)
        #expect(check(mine("sidereal:raman"), partner: mine("sidereal:raman"), two: true) == nil)
    }

    @Test func anUnknownOrAnotherUsersProfileIsProfileNotFound() {
        for facts in [nil, ProfileChartFacts(owner: other, chartZodiac: "tropical")] {
            let refusal = check(facts)
            #expect(refusal?.code == .profileNotFound)
            #expect(refusal?.field == "profileId")
            #expect(refusal?.role == .profile)
        }
    }

    /// Another user's profile answers exactly as an unknown one, so ids cannot be probed.
    @Test func anotherUsersProfileSaysNothingMoreThanAnUnknownOne() {
        #expect(check(nil) == check(ProfileChartFacts(owner: other, chartZodiac: nil)))
        #expect(
            check(mine(), partner: nil, two: true)
                == check(mine(), partner: ProfileChartFacts(owner: other, chartZodiac: "tropical"), two: true)
        )
    }

    @Test func aProfileWithoutAChartIsChartNotFound() {
        let refusal = check(mine(nil))
        #expect(refusal?.code == .chartNotFound)
        #expect(refusal?.field == "profileId")
        #expect(refusal?.jobError == JobError(code: .chartNotFound, message: refusal?.message ?? ""))
    }

    @Test func thePartnerBeingTheProfileIsSameProfile() {
        let refusal = ProfileChartRule.check(
            caller: caller,
            profileID: profile,
            profile: mine(),
            partnerID: profile,
            partner: mine()
        )
        #expect(refusal?.code == .sameProfile)
        #expect(refusal?.field == "partnerProfileId")
    }

    @Test func anUnknownOrAnotherUsersPartnerIsPartnerNotFound() {
        for facts in [nil, ProfileChartFacts(owner: other, chartZodiac: "tropical")] {
            let refusal = check(mine(), partner: facts, two: true)
            #expect(refusal?.code == .partnerNotFound)
            #expect(refusal?.field == "partnerProfileId")
        }
    }

    @Test func aPartnerWithoutAChartIsPartnerChartNotFound() {
        let refusal = check(mine(), partner: mine(nil), two: true)
        #expect(refusal?.code == .partnerChartNotFound)
        #expect(refusal?.field == "partnerProfileId")
    }

    @Test func twoZodiacsAreZodiacMismatch() {
        let refusal = check(mine("tropical"), partner: mine("sidereal:lahiri"), two: true)
        #expect(refusal?.code == .zodiacMismatch)
        #expect(refusal?.field == "partnerProfileId")
        #expect(refusal?.message.contains("tropical") == true && refusal?.message.contains("sidereal:lahiri") == true)
        // Two sidereal charts of different ayanamsas are different zodiacs too.
        #expect(check(mine("sidereal:lahiri"), partner: mine("sidereal:raman"), two: true)?.code == .zodiacMismatch)
    }

    /// Facts given for a partner the request does not name are not looked at.
    @Test func aPartnerNotNamedIsIgnored() {
        #expect(check(mine(), partner: ProfileChartFacts(owner: other, chartZodiac: nil), two: false) == nil)
    }

    /// The profile is judged before the partner, ownership before charts, charts before zodiacs.
    @Test func refusalsComeInOrder() {
        #expect(check(nil, partner: nil, two: true)?.code == .profileNotFound)
        #expect(check(mine(nil), partner: nil, two: true)?.code == .chartNotFound)
        #expect(check(mine(), partner: mine(nil), two: true)?.code == .partnerChartNotFound)
        let same = ProfileChartRule.check(caller: caller, profileID: profile, profile: nil, partnerID: profile)
        #expect(same?.code == .sameProfile)
    }

    @Test func everyCodeOfTheRuleIsCatalogued() {
        let codes: [ErrorCode] = [
            .sameProfile, .profileNotFound, .chartNotFound, .partnerNotFound, .partnerChartNotFound, .zodiacMismatch,
        ]
        for code in codes { #expect(code.definition != nil) }
    }
}
