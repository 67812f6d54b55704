-- A chart compressed with lz4 (~3.7 KB) was still moved out of line into the TOAST table (two
-- chunks, each a heap insert and an index insert) because rows over 2 kB are. MAIN keeps the
-- compressed value in the row unless the row could not fit in a page at all; perf of the chart
-- benchmark showed toast_save_datum at ~3% of all CPU.
ALTER TABLE birth_charts ALTER COLUMN chart_data SET STORAGE MAIN;
