-- Reports written by an LLM record what they cost (issue 5): the model, token usage and the
-- price of those tokens; reports of the built-in writer leave them NULL.
ALTER TABLE report_purchases
    ADD COLUMN llm_model         text,
    ADD COLUMN prompt_tokens     integer CHECK (prompt_tokens >= 0),
    ADD COLUMN completion_tokens integer CHECK (completion_tokens >= 0),
    ADD COLUMN cost_usd          numeric(12, 6) CHECK (cost_usd >= 0),
    ADD CONSTRAINT report_purchases_usage_with_model CHECK (
        (llm_model IS NULL AND prompt_tokens IS NULL AND completion_tokens IS NULL AND cost_usd IS NULL)
        OR llm_model IS NOT NULL
    );
