-- 0002: every entry a view may be sent gets a number (OF-35), and each view
-- has a place in the record for each kind of entry. Numbers come from one
-- counter row that each import updates before it stores anything; in
-- PostgreSQL the row's lock then orders concurrent imports, so numbers are
-- handed out in commit order and a reader never sees a number before a
-- smaller one that is still to commit.

CREATE TABLE counters (
    name  TEXT   NOT NULL PRIMARY KEY,
    value BIGINT NOT NULL
);

INSERT INTO counters (name, value) VALUES ('entries', 0);

ALTER TABLE transactions ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE balance_assertions ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE prices ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE fx_rates ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE index_readings ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;

-- Entries stored before this migration are numbered table by table, in key
-- order, after one another.
UPDATE transactions SET seq = n.rn + (SELECT value FROM counters WHERE name = 'entries')
FROM (SELECT instance, source_id, ROW_NUMBER() OVER (ORDER BY instance, source_id) AS rn FROM transactions) AS n
WHERE transactions.instance = n.instance AND transactions.source_id = n.source_id;
UPDATE counters SET value = value + (SELECT COUNT(*) FROM transactions) WHERE name = 'entries';

UPDATE balance_assertions SET seq = n.rn + (SELECT value FROM counters WHERE name = 'entries')
FROM (SELECT instance, account_id, date, currency, isin, symbol, exchange,
    ROW_NUMBER() OVER (ORDER BY instance, account_id, date, currency, isin, symbol, exchange) AS rn FROM balance_assertions) AS n
WHERE balance_assertions.instance = n.instance AND balance_assertions.account_id = n.account_id
    AND balance_assertions.date = n.date AND balance_assertions.currency = n.currency AND balance_assertions.isin = n.isin
    AND balance_assertions.symbol = n.symbol AND balance_assertions.exchange = n.exchange;
UPDATE counters SET value = value + (SELECT COUNT(*) FROM balance_assertions) WHERE name = 'entries';

UPDATE prices SET seq = n.rn + (SELECT value FROM counters WHERE name = 'entries')
FROM (SELECT instance, date, isin, symbol, exchange, currency,
    ROW_NUMBER() OVER (ORDER BY instance, date, isin, symbol, exchange, currency) AS rn FROM prices) AS n
WHERE prices.instance = n.instance AND prices.date = n.date AND prices.isin = n.isin AND prices.symbol = n.symbol
    AND prices.exchange = n.exchange AND prices.currency = n.currency;
UPDATE counters SET value = value + (SELECT COUNT(*) FROM prices) WHERE name = 'entries';

UPDATE fx_rates SET seq = n.rn + (SELECT value FROM counters WHERE name = 'entries')
FROM (SELECT instance, date, base_currency, quote_currency,
    ROW_NUMBER() OVER (ORDER BY instance, date, base_currency, quote_currency) AS rn FROM fx_rates) AS n
WHERE fx_rates.instance = n.instance AND fx_rates.date = n.date AND fx_rates.base_currency = n.base_currency
    AND fx_rates.quote_currency = n.quote_currency;
UPDATE counters SET value = value + (SELECT COUNT(*) FROM fx_rates) WHERE name = 'entries';

UPDATE index_readings SET seq = n.rn + (SELECT value FROM counters WHERE name = 'entries')
FROM (SELECT instance, index_id, date, ROW_NUMBER() OVER (ORDER BY instance, index_id, date) AS rn FROM index_readings) AS n
WHERE index_readings.instance = n.instance AND index_readings.index_id = n.index_id AND index_readings.date = n.date;
UPDATE counters SET value = value + (SELECT COUNT(*) FROM index_readings) WHERE name = 'entries';

CREATE INDEX transactions_seq ON transactions (seq);
CREATE INDEX balance_assertions_seq ON balance_assertions (seq);
CREATE INDEX prices_seq ON prices (seq);
CREATE INDEX fx_rates_seq ON fx_rates (seq);
CREATE INDEX index_readings_seq ON index_readings (seq);

-- A view's place in the record: for each kind of entry, the number of the
-- last one the view has kept (0: none yet).
CREATE TABLE view_places (
    instance TEXT   NOT NULL,
    kind     TEXT   NOT NULL,
    seq      BIGINT NOT NULL,
    PRIMARY KEY (instance, kind)
);
