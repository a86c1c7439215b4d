-- 0003: an instance is a Plugin's name and its UID (OF-38). An uninstalled
-- instance's rows are kept under a key that no Plugin can be named (its
-- name, '~' and a tag), so a new Plugin of the same name starts with
-- nothing. uid is '' for an instance stored before this migration (the
-- core adopts it for the Plugin of that name that exists now); removed_at
-- is when the instance was marked removed, '' while it is live.

ALTER TABLE instances ADD COLUMN uid TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN removed_at TEXT NOT NULL DEFAULT '';
