-- What a session's agent runs with (the model and permission mode the
-- phone chose; empty: the agent's own default) and what it has used so far
-- (tokens and cost summed over its turns), so that both outlive a restart
-- and a sandbox stopped for idleness.
ALTER TABLE sessions ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN permission_mode TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN max_thinking_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cache_creation_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
