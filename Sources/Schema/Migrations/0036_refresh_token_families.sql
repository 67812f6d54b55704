-- Refresh token families (issue 29): a refresh token presented a second time revokes every token
-- descended from the same registration.
--
-- Until now a rotation deleted the presented token, so a second use of it found nothing and was
-- only refused: a thief who used a stolen token first kept the fresh one, and the victim's later
-- 401 revoked nothing. Now a rotation marks the presented token used (`used_at`) and gives its
-- successor the same `family_id`; presenting a used token deletes the whole family, the thief's
-- token included (OAuth 2.0 Security BCP, refresh token rotation). A used row is kept until its
-- own `expires_at` (the maintenance task's retention deletes it then): beyond that the token is
-- refused as expired anyway.
--
-- The volatile default gives each existing row a family of its own (ADD COLUMN with a volatile
-- default rewrites the table, which is small: one live row per device).
ALTER TABLE gateway_refresh_tokens
    ADD COLUMN family_id uuid NOT NULL DEFAULT gen_random_uuid(),
    ADD COLUMN used_at timestamptz;
CREATE INDEX gateway_refresh_tokens_family ON gateway_refresh_tokens (family_id);

GRANT UPDATE (used_at) ON gateway_refresh_tokens TO astro_gateway;
