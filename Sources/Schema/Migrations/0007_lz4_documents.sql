-- Charts (about 6 KB of JSON) and reports are compressed when stored; pglz, the default, was
-- the largest single cost of a chart's insert (perf of `astroctl bench e2e --type chart`:
-- pglz_compress ~11% of PostgreSQL's CPU). lz4 compresses several times faster for a slightly
-- larger result. Existing values keep their compression until rewritten. A server built without
-- lz4 keeps pglz: the change is an optimisation, not a requirement.
DO $$
BEGIN
    ALTER TABLE birth_charts ALTER COLUMN chart_data SET COMPRESSION lz4;
    ALTER TABLE report_purchases ALTER COLUMN report_text SET COMPRESSION lz4;
EXCEPTION
    WHEN feature_not_supported OR invalid_parameter_value THEN
        RAISE NOTICE 'lz4 is not available in this PostgreSQL build: documents stay compressed with pglz';
END
$$;
