// The catalogue of error codes: every fixed code the project emits, defined once with its
// meaning and the HTTP status the gateway answers it with. Families (`ErrorCode.Family`) cover
// the codes built from another system's kind.

extension ErrorCode {
    // MARK: Request bodies (the gateway and every job)

    /// The body is not a JSON object.
    public static let invalidJSON = ErrorCode(fixed: "invalid-json")
    /// A required field is absent (or `null`).
    public static let missingField = ErrorCode(fixed: "missing-field")
    /// A field has the wrong JSON type (a string where a number is expected, …).
    public static let invalidFieldType = ErrorCode(fixed: "invalid-field-type")
    /// An id (`jobId`, `userId`, `profileId`, `partnerProfileId`, …) is not a UUID.
    public static let invalidID = ErrorCode(fixed: "invalid-id")
    /// A job body that does not decode; the message names the field.
    public static let invalidPayload = ErrorCode(fixed: "invalid-payload")
    /// A body member or query parameter the operation does not take.
    public static let unexpectedField = ErrorCode(fixed: "unexpected-field")
    /// Two members that exclude each other were both given.
    public static let conflictingFields = ErrorCode(fixed: "conflicting-fields")

    // MARK: Every job (the worker runtime)

    /// The job's `userId` is deleted or being deleted: the job fails, permanently, without running.
    /// The gateway answers a deleted user's token with it: 401, as the token is what became
    /// invalid (the app registers again).
    public static let userDeleted = ErrorCode(fixed: "user-deleted")
    /// An operator cancelled the job (`jobs.error` and `<type>.cancelled`).
    public static let cancelledByOperator = ErrorCode(fixed: "cancelled-by-operator")
    /// The body has no string field `jobId`.
    public static let missingJobID = ErrorCode(fixed: "missing-job-id")
    /// `jobId` is not a UUID.
    public static let invalidJobID = ErrorCode(fixed: "invalid-job-id")
    /// The `jobId` was already used for a job of another type.
    public static let jobIDReused = ErrorCode(fixed: "job-id-reused")
    /// The message is larger than the queue accepts.
    public static let messageTooLarge = ErrorCode(fixed: "message-too-large")
    /// The message was delivered more often than the runtime allows (a worker crashed on it each time).
    public static let deliveryLimit = ErrorCode(fixed: "delivery-limit")
    /// A transient failure outlived the job's attempts; the message quotes the last error.
    public static let retriesExhausted = ErrorCode(fixed: "retries-exhausted")
    /// A stored row or document does not decode (it decodes no better on a retry).
    public static let storedDataUnreadable = ErrorCode(fixed: "stored-data-unreadable")
    /// A value could not be encoded.
    public static let encodingError = ErrorCode(fixed: "encoding-error")
    /// The database schema is older than this build needs (migrations have not run).
    public static let schemaOutOfDate = ErrorCode(fixed: "schema-out-of-date")
    /// A maintenance setting is refused (the message names the variable).
    public static let invalidConfiguration = ErrorCode(fixed: "invalid-configuration")

    // MARK: Transient failures (retried; on retry copies' `x-astro-reason-code` and in the logs)

    /// The job was cancelled (the worker is shutting down): retried.
    public static let cancelled = ErrorCode(fixed: "cancelled")
    /// A failure of an unknown kind: retried a bounded number of times.
    public static let transientError = ErrorCode(fixed: "transient-error")
    /// A rate limit (ours, or an LLM's or image API's on every attempt).
    public static let rateLimited = ErrorCode(fixed: "rate-limited")
    /// An upstream server failed (5xx) on every attempt.
    public static let serverError = ErrorCode(fixed: "server-error")
    /// An upstream call got no answer in time on every attempt.
    public static let timeout = ErrorCode(fixed: "timeout")
    /// An upstream connection failed (refused, reset, DNS, TLS).
    public static let network = ErrorCode(fixed: "network")
    /// An upstream call's total deadline passed before an attempt succeeded.
    public static let deadlineExceeded = ErrorCode(fixed: "deadline-exceeded")
    /// RabbitMQ cannot be reached now.
    public static let brokerUnavailable = ErrorCode(fixed: "broker-unavailable")
    /// RabbitMQ refused an operation for good.
    public static let brokerError = ErrorCode(fixed: "broker-error")
    /// PostgreSQL cannot be reached now (a lost connection, a pool timeout).
    public static let databaseUnavailable = ErrorCode(fixed: "database-unavailable")
    /// A database failure without a SQLSTATE: retried.
    public static let databaseError = ErrorCode(fixed: "database-error")
    /// A serialization failure or deadlock: retried.
    public static let databaseConflict = ErrorCode(fixed: "database-conflict")
    /// A statement or lock timeout: retried.
    public static let databaseTimeout = ErrorCode(fixed: "database-timeout")
    /// A value could not be sent to PostgreSQL.
    public static let databaseEncodingError = ErrorCode(fixed: "database-encoding-error")
    /// A column could not be read as the type asked for.
    public static let databaseDecodingError = ErrorCode(fixed: "database-decoding-error")
    /// A cached chart result was deleted by retention before it was touched: retried, then computed.
    public static let chartResultVanished = ErrorCode(fixed: "chart-result-vanished")
    /// The ephemeris files cannot be read now.
    public static let ephemerisUnavailable = ErrorCode(fixed: "ephemeris-unavailable")

    // MARK: Birth data and `chart.calculate` (`ChartInputError`)

    /// A name is empty or longer than 50 characters after trimming.
    public static let invalidName = ErrorCode(fixed: "invalid-name")
    /// The location name is longer than 200 characters.
    public static let invalidLocationName = ErrorCode(fixed: "invalid-location-name")
    /// A text field holds a control character (NUL, escape, …), a line separator or a bidirectional override.
    public static let invalidCharacters = ErrorCode(fixed: "invalid-characters")
    /// The birth date is not a real `yyyy-MM-dd` calendar date.
    public static let invalidBirthDate = ErrorCode(fixed: "invalid-birth-date")
    /// The birth date is outside 1900-01-01 … 2100-12-31.
    public static let birthDateOutOfRange = ErrorCode(fixed: "birth-date-out-of-range")
    /// The birth time is not `HH:mm` on a 24-hour clock.
    public static let invalidBirthTime = ErrorCode(fixed: "invalid-birth-time")
    /// The latitude is outside −90…90 (or not a finite number).
    public static let latitudeOutOfRange = ErrorCode(fixed: "latitude-out-of-range")
    /// The longitude is outside −180…180 (or not a finite number).
    public static let longitudeOutOfRange = ErrorCode(fixed: "longitude-out-of-range")
    /// The time zone (a birth place's, a story child's) is not an IANA identifier known to the
    /// time zone database.
    public static let unknownTimezone = ErrorCode(fixed: "unknown-timezone")
    /// The house system is not one of the seven supported.
    public static let unknownHouseSystem = ErrorCode(fixed: "unknown-house-system")
    /// `dstPolicy` is neither `earlier` nor `later`.
    public static let invalidDSTPolicy = ErrorCode(fixed: "invalid-dst-policy")
    /// A requested point is not one of `MeanNode`, `TrueNode`, `Chiron`, `MeanLilith`.
    public static let unknownPoint = ErrorCode(fixed: "unknown-point")
    /// `sidereal` names no supported ayanamsa.
    public static let unknownAyanamsa = ErrorCode(fixed: "unknown-ayanamsa")
    /// The local birth time falls in a clock change gap and no `dstPolicy` was given.
    public static let nonexistentLocalTime = ErrorCode(fixed: "nonexistent-local-time")
    /// The local birth time happened twice (clocks went back) and no `dstPolicy` was given.
    public static let ambiguousLocalTime = ErrorCode(fixed: "ambiguous-local-time")
    /// The user already has another profile of this name.
    public static let duplicateProfileName = ErrorCode(fixed: "duplicate-profile-name")
    /// A `chart.calculate` update names a profile id of another user.
    public static let profileOfAnotherUser = ErrorCode(fixed: "profile-of-another-user")
    /// The profile was deleted: an update of it leaves it deleted; a report of it was not stored.
    public static let profileDeleted = ErrorCode(fixed: "profile-deleted")
    /// The ephemeris could not compute a position for this input.
    public static let calculationFailed = ErrorCode(fixed: "calculation-failed")

    // MARK: Profiles and their charts (`ProfileChartRule`)

    /// The profile is unknown, deleted or another user's (one code for the three, so ids cannot be probed).
    public static let profileNotFound = ErrorCode(fixed: "profile-not-found")
    /// The profile has no stored chart yet (`chart.calculate` has not stored one).
    public static let chartNotFound = ErrorCode(fixed: "chart-not-found")
    /// The profile's stored chart cannot be read.
    public static let chartUnreadable = ErrorCode(fixed: "chart-unreadable")
    /// `partnerProfileId` names the profile itself.
    public static let sameProfile = ErrorCode(fixed: "same-profile")
    /// The partner profile is unknown, deleted or another user's (one code for the three).
    public static let partnerNotFound = ErrorCode(fixed: "partner-not-found")
    /// The partner profile has no stored chart yet.
    public static let partnerChartNotFound = ErrorCode(fixed: "partner-chart-not-found")
    /// The partner profile's stored chart cannot be read.
    public static let partnerChartUnreadable = ErrorCode(fixed: "partner-chart-unreadable")
    /// The two charts are in different zodiacs (tropical and sidereal): they have no synastry.
    public static let zodiacMismatch = ErrorCode(fixed: "zodiac-mismatch")
    /// A partner profile with a report area other than `relationships`.
    public static let partnerNotAllowed = ErrorCode(fixed: "partner-not-allowed")

    // MARK: Chart results (`ChartJobError`, `chart.synastry`, `chart.transits`, `chart.return`, `chart.render`)

    /// `angleMaxOrb` is outside 0…8 degrees.
    public static let invalidOrb = ErrorCode(fixed: "invalid-orb")
    /// A transit range that is empty, reversed, longer than 366 days or outside 1900–2101, or an instant
    /// outside 1900-01-01 … 2101-01-01.
    public static let invalidRange = ErrorCode(fixed: "invalid-range")
    /// A solar-return year outside 1900…2100, missing, or given to a progression.
    public static let invalidYear = ErrorCode(fixed: "invalid-year")
    /// An instant or date that is not ISO 8601 (`YYYY-MM-DD` or `YYYY-MM-DDTHH:MM[:SS]Z`).
    public static let invalidDate = ErrorCode(fixed: "invalid-date")
    /// A `place` with a latitude, longitude, time zone or location name BirthData refuses.
    public static let invalidPlace = ErrorCode(fixed: "invalid-place")
    /// `kind` is neither `solar-return` nor `progressed`.
    public static let invalidKind = ErrorCode(fixed: "invalid-kind")
    /// `wheel` is not `natal`, `synastry` or `transits`.
    public static let invalidWheel = ErrorCode(fixed: "invalid-wheel")
    /// A theme (of a wheel, of a story) that is not one of those offered.
    public static let invalidTheme = ErrorCode(fixed: "invalid-theme")
    /// The stored chart cannot be used for this computation (a feature the engine lacks, such as a sidereal
    /// composite).
    public static let unsupportedChart = ErrorCode(fixed: "unsupported-chart")
    /// The rendered SVG is larger than `ChartResultLimits.maxSVGBytes`.
    public static let svgTooLarge = ErrorCode(fixed: "svg-too-large")
    /// The user's computed chart results within 24 hours reached `CHART_RESULT_DAILY_QUOTA`.
    public static let chartQuotaExceeded = ErrorCode(fixed: "chart-quota-exceeded")
    /// A chart the relationship engine cannot use (no synastry of the two charts).
    public static let invalidChart = ErrorCode(fixed: "invalid-chart")
    /// A composite or Davison chart of sidereal charts (a result document's `compositeError`/`davisonError`).
    public static let unsupportedZodiac = ErrorCode(fixed: "unsupported-zodiac")
    /// Birthplaces exactly antipodal: no Davison midpoint (a result document's `davisonError`).
    public static let antipodalPlaces = ErrorCode(fixed: "antipodal-places")
    /// A relationship option outside its bounds.
    public static let invalidOption = ErrorCode(fixed: "invalid-option")
    /// The engine's transit range or target date is outside 1900…2100 (inside `invalid-range` messages).
    public static let transitRangeInvalid = ErrorCode(fixed: "transit-range-invalid")
    /// The engine's transit range is longer than it searches (inside `invalid-range` messages).
    public static let transitRangeTooLong = ErrorCode(fixed: "transit-range-too-long")
    /// The engine's transit orb is out of bounds (inside `invalid-range` messages).
    public static let transitOrbInvalid = ErrorCode(fixed: "transit-orb-invalid")
    /// A wheel ring holds more bodies than `WheelModel.maxBodiesPerRing`.
    public static let wheelTooManyBodies = ErrorCode(fixed: "wheel-too-many-bodies")
    /// A wheel has more aspect lines than `WheelModel.maxAspects`.
    public static let wheelTooManyAspects = ErrorCode(fixed: "wheel-too-many-aspects")
    /// A wheel longitude, cusp, angle or orb is not finite.
    public static let wheelBadNumber = ErrorCode(fixed: "wheel-bad-number")
    /// A wheel ring has neither 12 house cusps nor none.
    public static let wheelBadCusps = ErrorCode(fixed: "wheel-bad-cusps")
    /// A wheel aspect names a body not in its ring.
    public static let wheelUnknownBody = ErrorCode(fixed: "wheel-unknown-body")
    /// Two bodies of one wheel ring have the same key.
    public static let wheelDuplicateKey = ErrorCode(fixed: "wheel-duplicate-key")

    // MARK: Purchase verification (`billing.verify-purchase`, `billing.store-notification`)

    /// The signed token is empty.
    public static let emptyToken = ErrorCode(fixed: "empty-token")
    /// The signed token is larger than a StoreKit JWS can be.
    public static let tokenTooLarge = ErrorCode(fixed: "token-too-large")
    /// The token is not a compact JWS.
    public static let malformedJWS = ErrorCode(fixed: "malformed-jws")
    /// The JWS is not signed with ES256.
    public static let unsupportedAlgorithm = ErrorCode(fixed: "unsupported-algorithm")
    /// The JWS header has no `x5c` certificate chain.
    public static let missingCertificateChain = ErrorCode(fixed: "missing-certificate-chain")
    /// The certificate chain does not have three certificates.
    public static let invalidChainLength = ErrorCode(fixed: "invalid-chain-length")
    /// A certificate of the chain cannot be parsed.
    public static let malformedCertificate = ErrorCode(fixed: "malformed-certificate")
    /// The chain does not lead to Apple's root.
    public static let untrustedCertificateChain = ErrorCode(fixed: "untrusted-certificate-chain")
    /// A certificate lacks Apple's App Store marker extension.
    public static let missingMarkerExtension = ErrorCode(fixed: "missing-marker-extension")
    /// A certificate was not valid when the payload was signed.
    public static let certificateNotValidAtSignedDate = ErrorCode(fixed: "certificate-not-valid-at-signed-date")
    /// The JWS signature does not verify.
    public static let invalidSignature = ErrorCode(fixed: "invalid-signature")
    /// The signed payload is not the JSON expected (or lacks a required member).
    public static let malformedPayload = ErrorCode(fixed: "malformed-payload")
    /// A transaction where a notification is expected, or the other way round.
    public static let wrongPayloadKind = ErrorCode(fixed: "wrong-payload-kind")
    /// The payload is for another app's bundle id.
    public static let bundleIDMismatch = ErrorCode(fixed: "bundle-id-mismatch")
    /// The payload is from another App Store environment (sandbox, production).
    public static let environmentMismatch = ErrorCode(fixed: "environment-mismatch")
    /// The payload is for another App Apple ID.
    public static let appAppleIDMismatch = ErrorCode(fixed: "app-apple-id-mismatch")
    /// A notification's signed transaction does not verify.
    public static let invalidNotificationTransaction = ErrorCode(fixed: "invalid-notification-transaction")
    /// The transaction's `appAccountToken` is not the user's.
    public static let accountMismatch = ErrorCode(fixed: "account-mismatch")
    /// The transaction has no `appAccountToken`.
    public static let accountTokenMissing = ErrorCode(fixed: "account-token-missing")
    /// The product id is not in the catalog.
    public static let unknownProduct = ErrorCode(fixed: "unknown-product")
    /// The transaction's quantity is not a positive count the catalog can grant.
    public static let invalidQuantity = ErrorCode(fixed: "invalid-quantity")
    /// The signed transaction is not the one the request names.
    public static let transactionIDMismatch = ErrorCode(fixed: "transaction-id-mismatch")
    /// The transaction was already redeemed by another user; nothing was granted.
    public static let transactionOwnedByAnotherUser = ErrorCode(fixed: "transaction-owned-by-another-user")
    /// The transaction was refunded or revoked.
    public static let transactionRevoked = ErrorCode(fixed: "transaction-revoked")
    /// A transaction id alone cannot be verified (no App Store Server API key).
    public static let verificationByIDUnavailable = ErrorCode(fixed: "verification-by-id-unavailable")
    /// A restore names only a transaction id; moving credits needs StoreKit's signed transaction.
    public static let restoreNeedsSignedTransaction = ErrorCode(fixed: "restore-needs-signed-transaction")
    /// The restored purchase was never redeemed here by the user its `appAccountToken` names.
    public static let restorePurchaseUnknown = ErrorCode(fixed: "restore-purchase-unknown")
    /// Every credit of the restored purchase is spent or revoked.
    public static let restoreNothingToTransfer = ErrorCode(fixed: "restore-nothing-to-transfer")
    /// The billing-worker has no App Store Server API key (`billing.recover-notifications`).
    public static let appStoreAPINotConfigured = ErrorCode(fixed: "app-store-api-not-configured")
    /// The recovery window's `since` is not before its `until`.
    public static let invalidWindow = ErrorCode(fixed: "invalid-window")
    /// The notification history of the window has more pages than one job reads.
    public static let historyTooLong = ErrorCode(fixed: "history-too-long")

    // MARK: Credits and reports (`report.request`, `report.generate`, `billing.refund-credit`)

    /// The user has no credit for the report's area.
    public static let insufficientCredits = ErrorCode(fixed: "insufficient-credits")
    /// There is no such credit.
    public static let creditNotFound = ErrorCode(fixed: "credit-not-found")
    /// The credit was not spent by this user on this profile, area and language.
    public static let creditMismatch = ErrorCode(fixed: "credit-mismatch")
    /// The credit was refunded or never spent on this request.
    public static let creditNotHeld = ErrorCode(fixed: "credit-not-held")
    /// The refund names a credit this request did not spend.
    public static let creditNotConsumedByRequest = ErrorCode(fixed: "credit-not-consumed-by-request")
    /// The report was delivered: its credit is not refunded.
    public static let reportAlreadyDelivered = ErrorCode(fixed: "report-already-delivered")
    /// A refund's reason: the report already exists, so the second credit spent on it goes back.
    public static let reportAlreadyWritten = ErrorCode(fixed: "report-already-written")
    /// The report-worker has no synastry knowledge base for a report for two.
    public static let pairReportsUnavailable = ErrorCode(fixed: "pair-reports-unavailable")
    /// The LLM's answer was refused twice (too short, wrong language, unsafe, …).
    public static let llmRejectedAnswer = ErrorCode(fixed: "llm-rejected-answer")
    /// An LLM or image call was not made (the daily budget or the user's bound): the built-in writer or
    /// illustrator does the work.
    public static let paidCallRefused = ErrorCode(fixed: "paid-call-refused")

    // MARK: User deletion and export

    /// The user's export is over `USER_EXPORT_MAX_BYTES` or 10,000 files (409 when its download
    /// is asked for: the export exists but could not be built).
    public static let exportTooLarge = ErrorCode(fixed: "export-too-large")
    /// There is no such export.
    public static let unknownExport = ErrorCode(fixed: "unknown-export")
    /// A file named for the export cannot be packed.
    public static let invalidExportFile = ErrorCode(fixed: "invalid-export-file")
    /// The export is still being packed.
    public static let exportNotReady = ErrorCode(fixed: "export-not-ready")
    /// The export is past its `expires_at`.
    public static let exportExpired = ErrorCode(fixed: "export-expired")

    // MARK: Stories

    /// The age group is not one of those offered.
    public static let invalidAgeGroup = ErrorCode(fixed: "invalid-age-group")
    /// A story needs `childProfileId` or `childName`.
    public static let childRequired = ErrorCode(fixed: "child-required")
    /// The child profile is unknown, deleted or another user's.
    public static let childNotFound = ErrorCode(fixed: "child-not-found")
    /// The story collection is unknown or another user's.
    public static let collectionNotFound = ErrorCode(fixed: "collection-not-found")
    /// The story theme is not one of those offered.
    public static let unknownTheme = ErrorCode(fixed: "unknown-theme")
    /// The page count is outside the bounds of a story.
    public static let invalidPageCount = ErrorCode(fixed: "invalid-page-count")
    /// A name or text the content rules refuse for a child's story.
    public static let unsuitableContent = ErrorCode(fixed: "unsuitable-content")
    /// The story is unknown or another user's.
    public static let storyNotFound = ErrorCode(fixed: "story-not-found")
    /// The pages to illustrate are not pages of the story.
    public static let invalidPages = ErrorCode(fixed: "invalid-pages")
    /// Pages that have no illustration to erase or redraw.
    public static let pagesNotIllustrated = ErrorCode(fixed: "pages-not-illustrated")
    /// An illustration could not be stored.
    public static let storageFailed = ErrorCode(fixed: "storage-failed")
    /// A read time in the future.
    public static let invalidReadTime = ErrorCode(fixed: "invalid-read-time")
    /// An erasure names more stories than one job erases.
    public static let tooManyStories = ErrorCode(fixed: "too-many-stories")
    /// The image API's answer is not an image this service can use.
    public static let imageInvalidAnswer = ErrorCode(fixed: "image-invalid-answer")
    /// The image prompt resource is missing or unreadable.
    public static let imagePromptMissing = ErrorCode(fixed: "image-prompt-missing")

    // MARK: Sample jobs

    /// A sample job asked to crash where crashing is not enabled.
    public static let crashNotAllowed = ErrorCode(fixed: "crash-not-allowed")
    /// A sample job's note is longer than 1000 characters.
    public static let invalidNote = ErrorCode(fixed: "invalid-note")

    // MARK: Gateway (HTTP only)

    /// No such resource for this caller (another user's ids answer this too).
    public static let notFound = ErrorCode(fixed: "not-found")
    /// The path exists, the method does not.
    public static let methodNotAllowed = ErrorCode(fixed: "method-not-allowed")
    /// The request body did not arrive in time.
    public static let requestTimeout = ErrorCode(fixed: "request-timeout")
    /// The request body is larger than the gateway accepts.
    public static let bodyTooLarge = ErrorCode(fixed: "body-too-large")
    /// The gateway failed; the request can be retried.
    public static let internalError = ErrorCode(fixed: "internal-error")
    /// The gateway is starting or stopping.
    public static let notReady = ErrorCode(fixed: "not-ready")
    /// No bearer access token.
    public static let missingToken = ErrorCode(fixed: "missing-token")
    /// The access token is malformed or too large.
    public static let invalidToken = ErrorCode(fixed: "invalid-token")
    /// The access token is signed with an algorithm the gateway does not take.
    public static let unsupportedTokenAlgorithm = ErrorCode(fixed: "unsupported-token-algorithm")
    /// The access token names a key the gateway does not have.
    public static let unknownTokenKey = ErrorCode(fixed: "unknown-token-key")
    /// The access token's signature does not verify.
    public static let invalidTokenSignature = ErrorCode(fixed: "invalid-token-signature")
    /// The access token has expired.
    public static let tokenExpired = ErrorCode(fixed: "token-expired")
    /// The access token is not valid yet.
    public static let tokenNotYetValid = ErrorCode(fixed: "token-not-yet-valid")
    /// The access token claims a longer lifetime than the gateway issues.
    public static let tokenLifetimeExceeded = ErrorCode(fixed: "token-lifetime-exceeded")
    /// The access token is for another issuer or audience.
    public static let invalidTokenAudience = ErrorCode(fixed: "invalid-token-audience")
    /// The refresh token is unknown, used or expired.
    public static let invalidRefreshToken = ErrorCode(fixed: "invalid-refresh-token")
    /// The `Idempotency-Key` header is not a key the gateway accepts.
    public static let invalidIdempotencyKey = ErrorCode(fixed: "invalid-idempotency-key")
    /// The `Idempotency-Key` was used with another request.
    public static let idempotencyKeyReused = ErrorCode(fixed: "idempotency-key-reused")
    /// A pagination cursor the gateway did not issue.
    public static let invalidCursor = ErrorCode(fixed: "invalid-cursor")
    /// A page size outside its bounds.
    public static let invalidLimit = ErrorCode(fixed: "invalid-limit")
    /// A query parameter the operation refuses.
    public static let invalidQuery = ErrorCode(fixed: "invalid-query")
    /// `format` is not one the operation offers.
    public static let invalidFormat = ErrorCode(fixed: "invalid-format")
    /// `wait` is not a number of seconds within its bounds.
    public static let invalidWait = ErrorCode(fixed: "invalid-wait")
    /// A child id in the path is not a UUID.
    public static let invalidChildID = ErrorCode(fixed: "invalid-child-id")
    /// The body's profile id is not the path's.
    public static let profileIDMismatch = ErrorCode(fixed: "profile-id-mismatch")
    /// `signedTransaction` is not a compact JWS.
    public static let invalidSignedTransaction = ErrorCode(fixed: "invalid-signed-transaction")
    /// `transactionId` is not 1–64 digits.
    public static let invalidTransactionID = ErrorCode(fixed: "invalid-transaction-id")
    /// The report area is not one of those offered.
    public static let unknownArea = ErrorCode(fixed: "unknown-area")
    /// The language of a report or a story is not one of those offered.
    public static let unknownLanguage = ErrorCode(fixed: "unknown-language")
    /// `force` is not a boolean.
    public static let invalidForce = ErrorCode(fixed: "invalid-force")
    /// The consent text version is not one the gateway knows.
    public static let invalidTextVersion = ErrorCode(fixed: "invalid-text-version")
    /// The consent's `answeredAt` is not an ISO 8601 instant, or is in the future.
    public static let invalidAnsweredAt = ErrorCode(fixed: "invalid-answered-at")
    /// `DELETE /v1/profiles/{id}` while a paid report is written for the profile.
    public static let reportInProgress = ErrorCode(fixed: "report-in-progress")
    /// The user's daily quota of stories is reached (with `Retry-After`).
    public static let storyQuotaExceeded = ErrorCode(fixed: "story-quota-exceeded")
    /// The user's daily quota of redrawn pages is reached (with `Retry-After`).
    public static let redrawQuotaExceeded = ErrorCode(fixed: "redraw-quota-exceeded")
    /// The user has as many event streams open as allowed.
    public static let tooManyStreams = ErrorCode(fixed: "too-many-streams")
    /// The address has as many event streams open as allowed.
    public static let tooManyAddressStreams = ErrorCode(fixed: "too-many-address-streams")
    /// `Last-Event-ID` names an event the stream no longer has: the client reloads its state.
    public static let unknownLastEventID = ErrorCode(fixed: "unknown-last-event-id")
    /// The event stream cannot be served now.
    public static let eventsUnavailable = ErrorCode(fixed: "events-unavailable")
    /// No more event streams can be opened on this gateway now.
    public static let streamsUnavailable = ErrorCode(fixed: "streams-unavailable")
    /// A stored illustration cannot be served.
    public static let illustrationUnavailable = ErrorCode(fixed: "illustration-unavailable")
    /// The page has no illustration.
    public static let notIllustrated = ErrorCode(fixed: "not-illustrated")
    /// The App Attest key id is not 32 bytes of base64.
    public static let invalidKeyID = ErrorCode(fixed: "invalid-key-id")
    /// The App Attest attestation is not base64.
    public static let invalidAttestation = ErrorCode(fixed: "invalid-attestation")
    /// The App Attest challenge is missing or too long.
    public static let invalidChallenge = ErrorCode(fixed: "invalid-challenge")
    /// Apple's App Attest attestation was refused (the detail names why).
    public static let attestationInvalid = ErrorCode(fixed: "attestation-invalid")
    /// The App Attest challenge is unknown, used or expired.
    public static let challengeInvalid = ErrorCode(fixed: "challenge-invalid")
    /// The operation needs an App Attest assertion header.
    public static let assertionRequired = ErrorCode(fixed: "assertion-required")
    /// The App Attest assertion was refused.
    public static let assertionInvalid = ErrorCode(fixed: "assertion-invalid")
    /// The device's App Attest key is not registered.
    public static let deviceNotAttested = ErrorCode(fixed: "device-not-attested")
    /// The App Attest key is already registered.
    public static let deviceKeyRegistered = ErrorCode(fixed: "device-key-registered")
    /// An App Store notification body without `signedPayload`.
    public static let invalidNotification = ErrorCode(fixed: "invalid-notification")
    /// An App Store notification whose signature does not verify.
    public static let notificationUnverified = ErrorCode(fixed: "notification-unverified")
    /// This gateway verifies no App Store notifications (a development gateway without
    /// `BILLING_ENVIRONMENT`). Catalogued, not the `appstore-<kind>` family: no App Store call failed.
    public static let appStoreNotificationsOff = ErrorCode(fixed: "appstore-notifications-off")
    /// An event stream's `reset`: the gateway's own event subscription was interrupted, so events
    /// may be missing; the client refetches with GETs.
    public static let eventsInterrupted = ErrorCode(fixed: "events-interrupted")

    /// Every fixed code with the HTTP status the gateway answers it with, in the order of the
    /// definitions above (CONTRACT.md "Error codes" lists each; a test checks both ways).
    public static let catalogue: [Definition] = [
        // Request bodies (the gateway and every job)
        Definition(.invalidJSON, httpStatus: 400),
        Definition(.missingField, httpStatus: 422),
        Definition(.invalidFieldType, httpStatus: 422),
        Definition(.invalidID, httpStatus: 422),
        Definition(.invalidPayload, httpStatus: 422),
        Definition(.unexpectedField, httpStatus: 400),
        Definition(.conflictingFields, httpStatus: 422),
        // Every job (the worker runtime)
        Definition(.userDeleted, httpStatus: 401),
        Definition(.cancelledByOperator, httpStatus: 409),
        Definition(.missingJobID, httpStatus: 400),
        Definition(.invalidJobID, httpStatus: 400),
        Definition(.jobIDReused, httpStatus: 409),
        Definition(.messageTooLarge, httpStatus: 413),
        Definition(.deliveryLimit, httpStatus: 500),
        Definition(.retriesExhausted, httpStatus: 503),
        Definition(.storedDataUnreadable, httpStatus: 500),
        Definition(.encodingError, httpStatus: 500),
        Definition(.schemaOutOfDate, httpStatus: 503),
        Definition(.invalidConfiguration, httpStatus: 500),
        // Transient failures (retried; on retry copies' `x-astro-reason-code` and in the logs)
        Definition(.cancelled, httpStatus: 503),
        Definition(.transientError, httpStatus: 503),
        Definition(.rateLimited, httpStatus: 429),
        Definition(.serverError, httpStatus: 502),
        Definition(.timeout, httpStatus: 504),
        Definition(.network, httpStatus: 502),
        Definition(.deadlineExceeded, httpStatus: 504),
        Definition(.brokerUnavailable, httpStatus: 503),
        Definition(.brokerError, httpStatus: 500),
        Definition(.databaseUnavailable, httpStatus: 503),
        Definition(.databaseError, httpStatus: 503),
        Definition(.databaseConflict, httpStatus: 503),
        Definition(.databaseTimeout, httpStatus: 503),
        Definition(.databaseEncodingError, httpStatus: 500),
        Definition(.databaseDecodingError, httpStatus: 500),
        Definition(.chartResultVanished, httpStatus: 503),
        Definition(.ephemerisUnavailable, httpStatus: 503),
        // Birth data and `chart.calculate` (`ChartInputError`)
        Definition(.invalidName, httpStatus: 422),
        Definition(.invalidLocationName, httpStatus: 422),
        Definition(.invalidCharacters, httpStatus: 422),
        Definition(.invalidBirthDate, httpStatus: 422),
        Definition(.birthDateOutOfRange, httpStatus: 422),
        Definition(.invalidBirthTime, httpStatus: 422),
        Definition(.latitudeOutOfRange, httpStatus: 422),
        Definition(.longitudeOutOfRange, httpStatus: 422),
        Definition(.unknownTimezone, httpStatus: 422),
        Definition(.unknownHouseSystem, httpStatus: 422),
        Definition(.invalidDSTPolicy, httpStatus: 422),
        Definition(.unknownPoint, httpStatus: 422),
        Definition(.unknownAyanamsa, httpStatus: 422),
        Definition(.nonexistentLocalTime, httpStatus: 422),
        Definition(.ambiguousLocalTime, httpStatus: 422),
        Definition(.duplicateProfileName, httpStatus: 409),
        Definition(.profileOfAnotherUser, httpStatus: 404),
        Definition(.profileDeleted, httpStatus: 410),
        Definition(.calculationFailed, httpStatus: 500),
        // Profiles and their charts (`ProfileChartRule`)
        Definition(.profileNotFound, httpStatus: 404),
        Definition(.chartNotFound, httpStatus: 409),
        Definition(.chartUnreadable, httpStatus: 500),
        Definition(.sameProfile, httpStatus: 422),
        Definition(.partnerNotFound, httpStatus: 404),
        Definition(.partnerChartNotFound, httpStatus: 409),
        Definition(.partnerChartUnreadable, httpStatus: 500),
        Definition(.zodiacMismatch, httpStatus: 422),
        Definition(.partnerNotAllowed, httpStatus: 422),
        // Chart results (`ChartJobError`, `chart.synastry`, `chart.transits`, `chart.return`, `chart.render`)
        Definition(.invalidOrb, httpStatus: 422),
        Definition(.invalidRange, httpStatus: 422),
        Definition(.invalidYear, httpStatus: 422),
        Definition(.invalidDate, httpStatus: 422),
        Definition(.invalidPlace, httpStatus: 422),
        Definition(.invalidKind, httpStatus: 422),
        Definition(.invalidWheel, httpStatus: 422),
        Definition(.invalidTheme, httpStatus: 422),
        Definition(.unsupportedChart, httpStatus: 422),
        Definition(.svgTooLarge, httpStatus: 422),
        Definition(.chartQuotaExceeded, httpStatus: 429),
        Definition(.invalidChart, httpStatus: 422),
        Definition(.unsupportedZodiac, httpStatus: 422),
        Definition(.antipodalPlaces, httpStatus: 422),
        Definition(.invalidOption, httpStatus: 422),
        Definition(.transitRangeInvalid, httpStatus: 422),
        Definition(.transitRangeTooLong, httpStatus: 422),
        Definition(.transitOrbInvalid, httpStatus: 422),
        Definition(.wheelTooManyBodies, httpStatus: 422),
        Definition(.wheelTooManyAspects, httpStatus: 422),
        Definition(.wheelBadNumber, httpStatus: 422),
        Definition(.wheelBadCusps, httpStatus: 422),
        Definition(.wheelUnknownBody, httpStatus: 422),
        Definition(.wheelDuplicateKey, httpStatus: 422),
        // Purchase verification (`billing.verify-purchase`, `billing.store-notification`)
        Definition(.emptyToken, httpStatus: 422),
        Definition(.tokenTooLarge, httpStatus: 422),
        Definition(.malformedJWS, httpStatus: 422),
        Definition(.unsupportedAlgorithm, httpStatus: 422),
        Definition(.missingCertificateChain, httpStatus: 422),
        Definition(.invalidChainLength, httpStatus: 422),
        Definition(.malformedCertificate, httpStatus: 422),
        Definition(.untrustedCertificateChain, httpStatus: 422),
        Definition(.missingMarkerExtension, httpStatus: 422),
        Definition(.certificateNotValidAtSignedDate, httpStatus: 422),
        Definition(.invalidSignature, httpStatus: 422),
        Definition(.malformedPayload, httpStatus: 422),
        Definition(.wrongPayloadKind, httpStatus: 422),
        Definition(.bundleIDMismatch, httpStatus: 422),
        Definition(.environmentMismatch, httpStatus: 422),
        Definition(.appAppleIDMismatch, httpStatus: 422),
        Definition(.invalidNotificationTransaction, httpStatus: 422),
        Definition(.accountMismatch, httpStatus: 403),
        Definition(.accountTokenMissing, httpStatus: 422),
        Definition(.unknownProduct, httpStatus: 422),
        Definition(.invalidQuantity, httpStatus: 422),
        Definition(.transactionIDMismatch, httpStatus: 422),
        Definition(.transactionOwnedByAnotherUser, httpStatus: 409),
        Definition(.transactionRevoked, httpStatus: 409),
        Definition(.verificationByIDUnavailable, httpStatus: 503),
        Definition(.restoreNeedsSignedTransaction, httpStatus: 422),
        Definition(.restorePurchaseUnknown, httpStatus: 404),
        Definition(.restoreNothingToTransfer, httpStatus: 409),
        Definition(.appStoreAPINotConfigured, httpStatus: 503),
        Definition(.invalidWindow, httpStatus: 422),
        Definition(.historyTooLong, httpStatus: 422),
        // Credits and reports (`report.request`, `report.generate`, `billing.refund-credit`)
        Definition(.insufficientCredits, httpStatus: 409),
        Definition(.creditNotFound, httpStatus: 404),
        Definition(.creditMismatch, httpStatus: 409),
        Definition(.creditNotHeld, httpStatus: 409),
        Definition(.creditNotConsumedByRequest, httpStatus: 409),
        Definition(.reportAlreadyDelivered, httpStatus: 409),
        Definition(.reportAlreadyWritten, httpStatus: 409),
        Definition(.pairReportsUnavailable, httpStatus: 503),
        Definition(.llmRejectedAnswer, httpStatus: 502),
        Definition(.paidCallRefused, httpStatus: 429),
        // User deletion and export
        Definition(.exportTooLarge, httpStatus: 409),
        Definition(.unknownExport, httpStatus: 404),
        Definition(.invalidExportFile, httpStatus: 422),
        Definition(.exportNotReady, httpStatus: 409),
        Definition(.exportExpired, httpStatus: 410),
        // Stories
        Definition(.invalidAgeGroup, httpStatus: 422),
        Definition(.childRequired, httpStatus: 422),
        Definition(.childNotFound, httpStatus: 404),
        Definition(.collectionNotFound, httpStatus: 404),
        Definition(.unknownTheme, httpStatus: 422),
        Definition(.invalidPageCount, httpStatus: 422),
        Definition(.unsuitableContent, httpStatus: 422),
        Definition(.storyNotFound, httpStatus: 404),
        Definition(.invalidPages, httpStatus: 422),
        Definition(.pagesNotIllustrated, httpStatus: 409),
        Definition(.storageFailed, httpStatus: 500),
        Definition(.invalidReadTime, httpStatus: 422),
        Definition(.tooManyStories, httpStatus: 422),
        Definition(.imageInvalidAnswer, httpStatus: 502),
        Definition(.imagePromptMissing, httpStatus: 500),
        // Sample jobs
        Definition(.crashNotAllowed, httpStatus: 422),
        Definition(.invalidNote, httpStatus: 422),
        // Gateway (HTTP only)
        Definition(.notFound, httpStatus: 404),
        Definition(.methodNotAllowed, httpStatus: 405),
        Definition(.requestTimeout, httpStatus: 408),
        Definition(.bodyTooLarge, httpStatus: 413),
        Definition(.internalError, httpStatus: 500),
        Definition(.notReady, httpStatus: 503),
        Definition(.missingToken, httpStatus: 401),
        Definition(.invalidToken, httpStatus: 401),
        Definition(.unsupportedTokenAlgorithm, httpStatus: 401),
        Definition(.unknownTokenKey, httpStatus: 401),
        Definition(.invalidTokenSignature, httpStatus: 401),
        Definition(.tokenExpired, httpStatus: 401),
        Definition(.tokenNotYetValid, httpStatus: 401),
        Definition(.tokenLifetimeExceeded, httpStatus: 401),
        Definition(.invalidTokenAudience, httpStatus: 401),
        Definition(.invalidRefreshToken, httpStatus: 401),
        Definition(.invalidIdempotencyKey, httpStatus: 400),
        Definition(.idempotencyKeyReused, httpStatus: 422),
        Definition(.invalidCursor, httpStatus: 400),
        Definition(.invalidLimit, httpStatus: 400),
        Definition(.invalidQuery, httpStatus: 400),
        Definition(.invalidFormat, httpStatus: 400),
        Definition(.invalidWait, httpStatus: 400),
        Definition(.invalidChildID, httpStatus: 400),
        Definition(.profileIDMismatch, httpStatus: 400),
        Definition(.invalidSignedTransaction, httpStatus: 422),
        Definition(.invalidTransactionID, httpStatus: 422),
        Definition(.unknownArea, httpStatus: 422),
        Definition(.unknownLanguage, httpStatus: 422),
        Definition(.invalidForce, httpStatus: 422),
        Definition(.invalidTextVersion, httpStatus: 422),
        Definition(.invalidAnsweredAt, httpStatus: 422),
        Definition(.reportInProgress, httpStatus: 409),
        Definition(.storyQuotaExceeded, httpStatus: 429),
        Definition(.redrawQuotaExceeded, httpStatus: 429),
        Definition(.tooManyStreams, httpStatus: 429),
        Definition(.tooManyAddressStreams, httpStatus: 429),
        Definition(.unknownLastEventID, httpStatus: 409),
        Definition(.eventsUnavailable, httpStatus: 503),
        Definition(.streamsUnavailable, httpStatus: 503),
        Definition(.illustrationUnavailable, httpStatus: 500),
        Definition(.notIllustrated, httpStatus: 404),
        Definition(.invalidKeyID, httpStatus: 400),
        Definition(.invalidAttestation, httpStatus: 400),
        Definition(.invalidChallenge, httpStatus: 400),
        Definition(.attestationInvalid, httpStatus: 422),
        Definition(.challengeInvalid, httpStatus: 422),
        Definition(.assertionRequired, httpStatus: 401),
        Definition(.assertionInvalid, httpStatus: 401),
        Definition(.deviceNotAttested, httpStatus: 401),
        Definition(.deviceKeyRegistered, httpStatus: 409),
        Definition(.invalidNotification, httpStatus: 400),
        Definition(.notificationUnverified, httpStatus: 403),
        Definition(.appStoreNotificationsOff, httpStatus: 503),
        Definition(.eventsInterrupted, httpStatus: 503),
    ]
}
