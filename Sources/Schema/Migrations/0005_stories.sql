-- Magical Stories (issue 7), the second product on the same backend, in a schema of its own so
-- its names never clash with the astrology tables. Delete rules as the seed's model has them:
-- deleting a story deletes its pages, takes it out of every collection, and leaves the
-- achievements it earned with no story.
CREATE SCHEMA stories;

-- A child a parent (public.users) reads to.
CREATE TABLE stories.child_profiles (
    id                  uuid PRIMARY KEY,
    user_id             uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name                text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 50),
    date_of_birth       date,
    interests           text[] NOT NULL DEFAULT '{}',
    preferred_themes    text[] NOT NULL DEFAULT '{}',
    favorite_characters text[] NOT NULL DEFAULT '{}',
    -- Reading streaks count the child's days, so they need the child's zone (IANA name).
    timezone            text NOT NULL DEFAULT 'UTC',
    created_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, name)
);

-- Age groups: 0 preschool (3-5), 1 elementary (6-8), 2 preteen (9-10).
CREATE TABLE stories.stories (
    id               uuid PRIMARY KEY,
    user_id          uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    child_profile_id uuid REFERENCES stories.child_profiles (id) ON DELETE SET NULL,
    title            text NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
    child_name       text NOT NULL CHECK (char_length(child_name) BETWEEN 1 AND 50),
    age_group        smallint NOT NULL CHECK (age_group BETWEEN 0 AND 2),
    theme            text NOT NULL,
    main_character   text NOT NULL,
    language         text NOT NULL CHECK (language IN ('en', 'uk')),
    read_count       integer NOT NULL DEFAULT 0 CHECK (read_count >= 0),
    last_read_at     timestamptz,
    is_favorite      boolean NOT NULL DEFAULT false,
    notes            text,
    -- Which writer and which version of its data or prompts wrote it.
    writer           text NOT NULL,
    writer_version   text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stories_user_idx ON stories.stories (user_id, created_at);
CREATE INDEX stories_child_idx ON stories.stories (child_profile_id) WHERE child_profile_id IS NOT NULL;

CREATE TABLE stories.pages (
    id                  uuid PRIMARY KEY,
    story_id            uuid NOT NULL REFERENCES stories.stories (id) ON DELETE CASCADE,
    page_number         integer NOT NULL CHECK (page_number >= 1),
    text                text NOT NULL CHECK (char_length(text) >= 1),
    -- Relative to the illustration storage root; set once the image is stored.
    illustration_path   text,
    illustration_status text NOT NULL DEFAULT 'notStarted'
        CHECK (illustration_status IN ('notStarted', 'generating', 'generated', 'failed')),
    illustration_error  text,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (story_id, page_number),
    CHECK ((illustration_status = 'generated') = (illustration_path IS NOT NULL))
);

CREATE TABLE stories.collections (
    id                  uuid PRIMARY KEY,
    user_id             uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    child_profile_id    uuid REFERENCES stories.child_profiles (id) ON DELETE CASCADE,
    name                text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    description         text NOT NULL DEFAULT '',
    growth_category     text NOT NULL CHECK (growth_category IN (
        'emotionalIntelligence', 'cognitiveDevelopment', 'confidenceLeadership', 'socialResponsibility'
    )),
    target_age_group    smallint NOT NULL CHECK (target_age_group BETWEEN 0 AND 2),
    -- The share of its stories read at least once, 0…1, kept by story.read.
    completion_progress double precision NOT NULL DEFAULT 0 CHECK (completion_progress BETWEEN 0 AND 1),
    created_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE stories.collection_stories (
    collection_id uuid NOT NULL REFERENCES stories.collections (id) ON DELETE CASCADE,
    story_id      uuid NOT NULL REFERENCES stories.stories (id) ON DELETE CASCADE,
    position      integer NOT NULL DEFAULT 0,
    added_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, story_id)
);
CREATE INDEX collection_stories_story_idx ON stories.collection_stories (story_id);

-- Every reading, once per job: the history streaks and theme counts are computed from.
CREATE TABLE stories.story_reads (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    story_id         uuid NOT NULL REFERENCES stories.stories (id) ON DELETE CASCADE,
    child_profile_id uuid NOT NULL REFERENCES stories.child_profiles (id) ON DELETE CASCADE,
    read_at          timestamptz NOT NULL,
    job_id           uuid NOT NULL UNIQUE
);
CREATE INDEX story_reads_child_idx ON stories.story_reads (child_profile_id, read_at);

-- An achievement is awarded once per child: rule_key names the rule (e.g. stories-completed-5,
-- theme-mastery:space), and the unique key makes a redelivered story.read award nothing new.
CREATE TABLE stories.achievements (
    id               uuid PRIMARY KEY,
    child_profile_id uuid NOT NULL REFERENCES stories.child_profiles (id) ON DELETE CASCADE,
    rule_key         text NOT NULL,
    name             text NOT NULL,
    description      text NOT NULL DEFAULT '',
    type             text NOT NULL CHECK (type IN (
        'readingStreak', 'storiesCompleted', 'themeMastery', 'collectionCompleted', 'specialMilestone'
    )),
    earned_at        timestamptz,
    icon             text NOT NULL DEFAULT '',
    progress         double precision NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 1),
    story_id         uuid REFERENCES stories.stories (id) ON DELETE SET NULL,
    UNIQUE (child_profile_id, rule_key),
    CHECK (earned_at IS NULL OR progress = 1)
);
