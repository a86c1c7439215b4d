// Package webdavcsv is the adapter of the webdav-csv view plugin: it keeps
// the household's record, as the core exports it (OF-35), as monthly CSV
// files in a WebDAV folder of the owner's choosing (Nextcloud, a NAS), for
// spreadsheets and for backups the owner can read without OpenFief (OF-37).
//
// Files. Under the configured folder, one file per month and kind of entry,
// the month being the entry's date: <YYYY>/<YYYY-MM>-fx-rates.csv,
// -prices.csv, -index-readings.csv, -transactions.csv and -balances.csv.
// Each starts with a fixed header (Header): sequence first, then the
// connector instance that delivered the entry (source), its institution's
// ID and name, then the entry's fields. Amounts, prices, rates and
// quantities are the contract's exact decimal strings, never floats. A
// transaction has one row per posting, its own fields repeated on each,
// with the posting's number.
//
// Export. A page is checked whole first (a kind or date the view cannot
// file refuses it before anything is written), then grouped by file. For
// each file, in path order: GET it (404 is a new file), read it (at most
// MaxFileBytes, strict CSV, the kind's header exactly), leave out the
// entries whose sequence it holds already (delivery is at least once, so a
// repeated page writes nothing twice), append the others in sequence order,
// and PUT it back. The PUT carries If-Match with the GET's entity tag (or
// If-None-Match "*" for a new file), so two writers never lose each
// other's rows: on 412 the file is read again once. A missing year folder,
// and the configured folder itself, are created with MKCOL. Export answers
// OK only once every file of the page is written.
//
// Errors. The network or a 5xx, 408, 423 or 429 answer is
// connect.CodeUnavailable, so the core sends the page again later. Refused
// credentials (401, 403), a redirect (never followed), a file the view did
// not write or one too large (left untouched), and the Secret's files
// missing are connect.CodeFailedPrecondition; errors name the folder and
// the file, never the password.
//
// Credentials are read on every Export from the webdav-credentials Secret's
// files username and password (DefaultCredentialsDir), so a rotated Secret
// applies without a restart; they are never logged or returned.
//
// Spreadsheets. Cells are neutralised against formula injection
// (Neutralise), for every way a spreadsheet may split the line: on the
// comma, on a semicolon (the list separator in comma-decimal locales such
// as Polish), on a tab, or on a carriage return or line feed inside a
// quoted cell. The cell and each piece of it after one of those
// characters that starts with = + - @ (or a full-width form), possibly
// behind white space, control or format characters or double quotes,
// gets a single quote at its start: "Coffee;=cmd|' /C calc'!A0" is written
// as "Coffee;'=cmd|' /C calc'!A0". A value that is a plain decimal such as
// -12.50 stays a number.
package webdavcsv
