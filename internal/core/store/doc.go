// Package store is the core's record of what connectors delivered (D-49):
// import batches, transactions with their postings, balance assertions,
// prices, FX rates, index readings and ingest problems, plus each plugin
// instance's watermark and sync status (OF-8).
//
// One schema serves two databases: SQLite through a pure-Go driver, one
// file, by default; PostgreSQL when a postgres:// DSN is given. Versioned SQL
// files embedded in the binary migrate either in order, inside one
// transaction, recorded in schema_migrations.
//
// A delivery is validated with the SDK's delivery rules and the store's own
// (sizes, balance, text), then stored as one batch, all or nothing. Every row
// is keyed by its instance and its natural key (a transaction by its
// source_id), so importing the same delivery again stores nothing twice
// (D-18). Amounts stay the decimal strings the contract carries, never
// floating point. The store reads no clock: callers pass times in.
package store
