-- The story-worker (issue 7): its own least-privilege role, like the three workers of 0004, and
-- what the illustration state machine needs on each page.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'astro_story_worker') THEN
        BEGIN
            CREATE ROLE astro_story_worker NOLOGIN;
        EXCEPTION
        WHEN unique_violation OR duplicate_object THEN
            NULL;
        WHEN insufficient_privilege THEN
            RAISE EXCEPTION 'role astro_story_worker does not exist and % may not create roles', current_user
                USING HINT = 'create the worker roles first (e.g. CloudNativePG managed roles) '
                    'or migrate as a user with CREATEROLE';
        END;
    END IF;
END
$$;

-- Which story.illustrate job holds the page while it is `generating` (a redelivery of the same
-- job takes its pages back; another job may take them only once the claim is stale), who drew
-- the stored image, and how many times the page was attempted.
ALTER TABLE stories.pages
    ADD COLUMN illustration_job uuid,
    ADD COLUMN illustrator text,
    ADD COLUMN illustration_attempts integer NOT NULL DEFAULT 0 CHECK (illustration_attempts >= 0);

-- A child's reads are serialised by an advisory lock on this key, so two story.read jobs of one
-- child cannot both miss the streak they complete together.
CREATE FUNCTION stories.child_lock_key(child uuid) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN hashtextextended('child:' || child::text, 11);

GRANT SELECT, INSERT, UPDATE ON jobs, outbox TO astro_story_worker;
GRANT SELECT ON schema_migrations TO astro_story_worker;
-- A parent who only uses Magical Stories may not exist yet.
GRANT SELECT, INSERT ON users TO astro_story_worker;
GRANT USAGE ON SCHEMA stories TO astro_story_worker;
GRANT SELECT, INSERT, UPDATE ON stories.child_profiles, stories.stories, stories.pages, stories.collections,
    stories.collection_stories, stories.achievements TO astro_story_worker;
-- The reading history is append-only for the worker.
GRANT SELECT, INSERT ON stories.story_reads TO astro_story_worker;
GRANT EXECUTE ON FUNCTION stories.child_lock_key(uuid) TO astro_story_worker;

-- What an LLM-written story cost, as report_purchases records it for reports (migration 0003).
ALTER TABLE stories.stories
    ADD COLUMN llm_model text,
    ADD COLUMN prompt_tokens integer CHECK (prompt_tokens >= 0),
    ADD COLUMN completion_tokens integer CHECK (completion_tokens >= 0),
    ADD COLUMN cost_usd numeric(12, 6) CHECK (cost_usd >= 0);
