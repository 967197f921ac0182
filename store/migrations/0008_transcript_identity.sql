-- Which file a transcript's offset is in (device and inode): a transcript
-- replaced by another file, even a longer one, is read again from its
-- start rather than from an offset that means nothing in it.
ALTER TABLE transcripts ADD COLUMN file_id TEXT NOT NULL DEFAULT '';
