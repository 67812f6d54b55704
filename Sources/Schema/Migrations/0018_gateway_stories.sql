-- The gateway's Magical Stories routes (issue 16): a caller's children, stories, pages and
-- achievements, read through the gateway's role (0014). The story-worker writes all of them; the
-- gateway only reads, and only the columns its answers show or its checks need: not what a story
-- cost (llm_model, tokens, cost_usd), which writer or illustrator made it, the illustration
-- claims and errors, notes, nor a child's birth date and interests. Every query the gateway
-- makes is scoped to the caller's user id (a story's pages and a child's achievements through
-- their owner), so row-level security is not needed here, as it is not for the story-worker.
-- Stories jobs themselves are published by the gateway and read back through jobs (0014's policy
-- already shows it story.generate, story.illustrate and story.read).

GRANT USAGE ON SCHEMA stories TO astro_gateway;
GRANT SELECT (id, user_id, name, timezone, created_at) ON stories.child_profiles TO astro_gateway;
GRANT SELECT (id, user_id, child_profile_id, title, child_name, age_group, theme, main_character, language,
    read_count, last_read_at, is_favorite, created_at) ON stories.stories TO astro_gateway;
GRANT SELECT (story_id, page_number, text, illustration_status, illustration_path) ON stories.pages TO astro_gateway;
GRANT SELECT (id, child_profile_id, rule_key, name, description, type, icon, progress, earned_at, story_id)
    ON stories.achievements TO astro_gateway;
