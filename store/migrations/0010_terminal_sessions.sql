-- A Claude Code session running in a terminal under `tether claude` is
-- observed through its hooks like any terminal's (source 'hooks'), and the
-- phone may take it over: terminal marks it. (A column rather than a new
-- source value: the source's CHECK cannot change without rebuilding the
-- table, which the transcripts' foreign key forbids inside a migration.)
ALTER TABLE sessions ADD COLUMN terminal INTEGER NOT NULL DEFAULT 0 CHECK (terminal IN (0, 1));
