-- 0001: the core's record of deliveries (D-18, D-49). Portable SQL only:
-- the same file migrates SQLite and PostgreSQL. Amounts, prices, rates and
-- quantities are the contract's decimal strings (TEXT), dates YYYY-MM-DD,
-- times RFC 3339 in UTC ('' when unset). Every key starts with the instance,
-- so one instance never overwrites another's rows.

CREATE TABLE instances (
    instance       TEXT   NOT NULL PRIMARY KEY,
    watermark      TEXT   NOT NULL DEFAULT '',
    last_sync_at   TEXT   NOT NULL DEFAULT '',
    last_sync_ok   BIGINT NOT NULL DEFAULT 0,
    last_error     TEXT   NOT NULL DEFAULT '',
    next_sync_at   TEXT   NOT NULL DEFAULT '',
    batches        BIGINT NOT NULL DEFAULT 0,
    transactions   BIGINT NOT NULL DEFAULT 0,
    postings       BIGINT NOT NULL DEFAULT 0,
    balances       BIGINT NOT NULL DEFAULT 0,
    prices         BIGINT NOT NULL DEFAULT 0,
    fx_rates       BIGINT NOT NULL DEFAULT 0,
    index_readings BIGINT NOT NULL DEFAULT 0,
    problems       BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE batches (
    instance         TEXT NOT NULL REFERENCES instances (instance),
    batch_id         TEXT NOT NULL,
    kind             TEXT NOT NULL,
    institution_id   TEXT NOT NULL,
    institution_name TEXT NOT NULL,
    watermark        TEXT NOT NULL,
    PRIMARY KEY (instance, batch_id)
);

CREATE TABLE transactions (
    instance    TEXT NOT NULL,
    source_id   TEXT NOT NULL,
    batch_id    TEXT NOT NULL,
    date        TEXT NOT NULL,
    value_date  TEXT NOT NULL,
    description TEXT NOT NULL,
    payee       TEXT NOT NULL,
    PRIMARY KEY (instance, source_id),
    FOREIGN KEY (instance, batch_id) REFERENCES batches (instance, batch_id)
);

CREATE TABLE postings (
    instance            TEXT   NOT NULL,
    source_id           TEXT   NOT NULL,
    idx                 BIGINT NOT NULL,
    account_id          TEXT   NOT NULL,
    amount              TEXT   NOT NULL,
    currency            TEXT   NOT NULL,
    isin                TEXT   NOT NULL,
    symbol              TEXT   NOT NULL,
    exchange            TEXT   NOT NULL,
    instrument_currency TEXT   NOT NULL,
    instrument_name     TEXT   NOT NULL,
    quantity            TEXT   NOT NULL,
    memo                TEXT   NOT NULL,
    PRIMARY KEY (instance, source_id, idx),
    FOREIGN KEY (instance, source_id) REFERENCES transactions (instance, source_id)
);

CREATE TABLE balance_assertions (
    instance            TEXT NOT NULL,
    batch_id            TEXT NOT NULL,
    account_id          TEXT NOT NULL,
    date                TEXT NOT NULL,
    currency            TEXT NOT NULL,
    isin                TEXT NOT NULL,
    symbol              TEXT NOT NULL,
    exchange            TEXT NOT NULL,
    instrument_currency TEXT NOT NULL,
    instrument_name     TEXT NOT NULL,
    amount              TEXT NOT NULL,
    quantity            TEXT NOT NULL,
    PRIMARY KEY (instance, account_id, date, currency, isin, symbol, exchange),
    FOREIGN KEY (instance, batch_id) REFERENCES batches (instance, batch_id)
);

CREATE TABLE prices (
    instance            TEXT NOT NULL,
    batch_id            TEXT NOT NULL,
    date                TEXT NOT NULL,
    isin                TEXT NOT NULL,
    symbol              TEXT NOT NULL,
    exchange            TEXT NOT NULL,
    instrument_currency TEXT NOT NULL,
    instrument_name     TEXT NOT NULL,
    currency            TEXT NOT NULL,
    price               TEXT NOT NULL,
    PRIMARY KEY (instance, date, isin, symbol, exchange, currency),
    FOREIGN KEY (instance, batch_id) REFERENCES batches (instance, batch_id)
);

CREATE TABLE fx_rates (
    instance       TEXT NOT NULL,
    batch_id       TEXT NOT NULL,
    date           TEXT NOT NULL,
    base_currency  TEXT NOT NULL,
    quote_currency TEXT NOT NULL,
    rate           TEXT NOT NULL,
    source_ref     TEXT NOT NULL,
    PRIMARY KEY (instance, date, base_currency, quote_currency),
    FOREIGN KEY (instance, batch_id) REFERENCES batches (instance, batch_id)
);

CREATE TABLE index_readings (
    instance TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    index_id TEXT NOT NULL,
    date     TEXT NOT NULL,
    value    TEXT NOT NULL,
    name     TEXT NOT NULL,
    PRIMARY KEY (instance, index_id, date),
    FOREIGN KEY (instance, batch_id) REFERENCES batches (instance, batch_id)
);

-- problem_key is the SHA-256 of the problem's fields, so the same problem
-- reported again is stored once.
CREATE TABLE problems (
    instance    TEXT NOT NULL,
    problem_key TEXT NOT NULL,
    batch_id    TEXT NOT NULL,
    severity    TEXT NOT NULL,
    code        TEXT NOT NULL,
    message     TEXT NOT NULL,
    source_id   TEXT NOT NULL,
    location    TEXT NOT NULL,
    PRIMARY KEY (instance, problem_key),
    FOREIGN KEY (instance, batch_id) REFERENCES batches (instance, batch_id)
);
