-- Children's data is kept no longer than needed (issue 19, part 4): a child's profile and the
-- stories read to them (pages, illustrations, readings, achievements) that nobody opened for
-- CHILD_DATA_RETENTION (default 365 days) are deleted by the maintenance task.
--
-- "Opened" is `last_opened_at`, on stories and on children:
--   * set to the migration's moment for what exists (the period counts from the upgrade, so no
--     family loses a story the day this is deployed) and to now() for every new row;
--   * moved forward when a story is read (`story.read` sets last_read_at: a trigger follows it,
--     so the story-worker's statement does not change) and when a reading is recorded for a
--     child (a trigger on story_reads);
--   * moved forward by the gateway when the app opens a story (GET /v1/stories/{id}) or a
--     child's achievements, at most once a day per row (a conditional UPDATE that writes nothing
--     when the row was opened within the day, so a read stays a read).
--
-- Retention still has no DELETE right on the stories schema (0021: people's data is not for
-- the maintenance role to delete at will). It may only call `stories.expire_unopened`, which
-- deletes one bounded batch of what was not opened since a cutoff at least 30 days back (the
-- database refuses a nearer one, whatever the task's settings say), and hands the deleted
-- stories' illustration files to the story-worker: one `story.erase-illustrations` job per user
-- (at most 500 stories each), queued in the outbox as the billing-worker's, whose relay and
-- broker user already publish that job for user.delete.

ALTER TABLE stories.stories ADD COLUMN last_opened_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE stories.child_profiles ADD COLUMN last_opened_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX stories_last_opened_idx ON stories.stories (last_opened_at);
CREATE INDEX child_profiles_last_opened_idx ON stories.child_profiles (last_opened_at);

-- A reading opens the story: last_opened_at follows last_read_at.
CREATE FUNCTION stories.story_read_opens() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.last_read_at IS NOT NULL AND NEW.last_read_at > NEW.last_opened_at THEN
        NEW.last_opened_at := least(NEW.last_read_at, now());
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER stories_read_opens BEFORE UPDATE OF last_read_at ON stories.stories
    FOR EACH ROW EXECUTE FUNCTION stories.story_read_opens();

-- A reading recorded for a child opens the child. SECURITY DEFINER: the inserting role need
-- not be granted the column.
CREATE FUNCTION stories.child_read_opens() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, stories AS $$
BEGIN
    UPDATE stories.child_profiles SET last_opened_at = now()
    WHERE id = NEW.child_profile_id AND last_opened_at < now() - interval '1 hour';
    RETURN NEW;
END
$$;
CREATE TRIGGER story_reads_open_child AFTER INSERT ON stories.story_reads
    FOR EACH ROW EXECUTE FUNCTION stories.child_read_opens();

-- The gateway marks what the app opens.
GRANT SELECT (last_opened_at), UPDATE (last_opened_at) ON stories.stories, stories.child_profiles TO astro_gateway;

-- One batch of children's retention: at most `batch` stories not opened since `cutoff` are
-- deleted (their pages, collection entries and readings go by the foreign keys; achievements
-- lose the story), then, when fewer than `batch` stories were due, at most `batch` children not
-- opened since `cutoff` that have no story left (their readings, achievements and collections
-- go with them). Rows a worker holds are skipped (SKIP LOCKED): the next run takes them.
-- Returns the rows deleted per table. Refuses (22023, nothing deleted) a cutoff nearer than 30
-- days or a batch outside 1…10000.
CREATE FUNCTION stories.expire_unopened(cutoff timestamptz, batch integer)
RETURNS TABLE (stories integer, pages integer, children integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public, stories AS $$
DECLARE
    doomed uuid[];
    owners uuid[];
BEGIN
    IF cutoff IS NULL OR cutoff > now() - interval '30 days' THEN
        RAISE EXCEPTION 'expire_unopened: the cutoff % is less than 30 days ago', cutoff USING ERRCODE = '22023';
    END IF;
    IF batch IS NULL OR batch NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'expire_unopened: batch % is outside 1…10000', batch USING ERRCODE = '22023';
    END IF;
    SELECT coalesce(array_agg(s.id), '{}'), coalesce(array_agg(s.user_id), '{}') INTO doomed, owners FROM (
        SELECT id, user_id FROM stories.stories WHERE last_opened_at < cutoff
        ORDER BY last_opened_at LIMIT batch FOR UPDATE SKIP LOCKED
    ) AS s;
    SELECT count(*)::integer INTO pages FROM stories.pages WHERE story_id = ANY (doomed);
    DELETE FROM stories.stories WHERE id = ANY (doomed);
    GET DIAGNOSTICS stories = ROW_COUNT;
    -- The files: one job per user and 500 stories, published by the billing-worker's relay.
    INSERT INTO outbox (exchange, routing_key, body, mandatory, job_id, producer)
    SELECT 'astro.jobs', 'story.erase-illustrations',
        convert_to(jsonb_build_object('jobId', g.job_id, 'userId', g.user_id, 'storyIds', g.ids)::text, 'UTF8'),
        true, g.job_id, 'astro_billing_worker'
    FROM (
        SELECT gen_random_uuid() AS job_id, n.user_id, array_agg(n.id) AS ids
        FROM (
            SELECT d.id, d.user_id, (row_number() OVER (PARTITION BY d.user_id ORDER BY d.id) - 1) / 500 AS chunk
            FROM unnest(doomed, owners) AS d (id, user_id)
        ) AS n
        GROUP BY n.user_id, n.chunk
    ) AS g;
    children := 0;
    IF stories < batch THEN
        DELETE FROM stories.child_profiles WHERE id = ANY (ARRAY(
            SELECT c.id FROM stories.child_profiles AS c
            WHERE c.last_opened_at < cutoff
                AND NOT EXISTS (SELECT 1 FROM stories.stories AS s WHERE s.child_profile_id = c.id)
            ORDER BY c.last_opened_at LIMIT batch FOR UPDATE SKIP LOCKED
        ));
        GET DIAGNOSTICS children = ROW_COUNT;
    END IF;
    RETURN NEXT;
END
$$;
REVOKE ALL ON FUNCTION stories.expire_unopened(timestamptz, integer) FROM PUBLIC;
GRANT USAGE ON SCHEMA stories TO astro_maintenance;
GRANT EXECUTE ON FUNCTION stories.expire_unopened(timestamptz, integer) TO astro_maintenance;
-- A dry run counts what is due: ids, owners' links and timestamps only, no personal value.
GRANT SELECT (id, child_profile_id, last_opened_at) ON stories.stories TO astro_maintenance;
GRANT SELECT (id, last_opened_at) ON stories.child_profiles TO astro_maintenance;
GRANT SELECT (story_id) ON stories.pages TO astro_maintenance;
