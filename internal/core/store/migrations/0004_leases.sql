-- 0004: which replica of the core serves each instance (D-row on leases).
-- A replica holds an instance while expires_ms (milliseconds since the
-- epoch, by the database's clock) is ahead; epoch grows each time the lease
-- changes hands, and every write of a fenced replica checks its owner and
-- epoch in the same transaction. address is where the holder's owner API
-- answers, so another replica can pass it an owner's import. A single core
-- on SQLite never writes here.

CREATE TABLE leases (
    instance   TEXT   NOT NULL PRIMARY KEY,
    owner      TEXT   NOT NULL,
    epoch      BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    address    TEXT   NOT NULL DEFAULT ''
);
