-- A worker inserts its jobs' outbox rows already claimed for its own relay (one statement
-- fewer per row than claiming them afterwards). The claim names the inserting connection's
-- backend: should that process die, its connections end with it, and any relay may take the rows
-- at once instead of waiting out the lease.
ALTER TABLE outbox ADD COLUMN claimed_by_pid integer;
