// Package ownerapi is the contract of openfief-core's owner API: its paths
// and the JSON it answers (docs/core.md). The core serves it; the CLI calls
// it through the API server's service proxy. It imports only the standard
// library, so the CLI links none of the core.
package ownerapi

import "time"

// The owner API's paths.
const (
	// PathStatus answers the status of every instance the core knows.
	PathStatus = "/v1/status"
	// PathPluginPrefix starts the per-instance paths:
	// /v1/plugins/<name>/status, /v1/plugins/<name>/import and
	// /v1/plugins/<key>/purge.
	PathPluginPrefix = "/v1/plugins/"
	// HeaderFileName carries an imported file's name (a hint only).
	HeaderFileName = "X-OpenFief-File-Name"
	// MaxImportBytes bounds an uploaded file (OF-10).
	MaxImportBytes = 32 << 20
	// ServicePort names the core Service's port of the owner API, which the
	// CLI proxies to.
	ServicePort = "owner"
	// ServiceName is the core's Service.
	ServiceName = "openfief-core"
)

// Backup and restore of the whole record (docs/operations.md).
const (
	// PathBackup streams a backup of the record (GET): a gzip'd stream
	// of JSON lines, written as it is read from one snapshot, sent with
	// chunked transfer encoding; the core holds at most a row and a
	// buffer of it. A failure after the first byte aborts the connection,
	// so the backup received ends without its trailer and no restore
	// takes it. ?stop=true makes it final: the core stops calling plugins
	// first and stays stopped until it restarts or a restore, so the backup
	// is its record's last state.
	PathBackup = "/v1/backup"
	// PathRestore restores a backup (POST, the backup as the body, read as
	// it arrives): the core stops calling plugins, replaces the record in
	// one transaction, and calls them again from the restored watermarks
	// and places. ?replace=true allows replacing a record that holds data.
	PathRestore = "/v1/restore"
	// BackupMediaType is a backup's Content-Type.
	BackupMediaType = "application/gzip"
	// MaxRestoreBytes bounds a restore's body (the compressed backup).
	MaxRestoreBytes int64 = 64 << 30
)

// BackupPath is the backup path; stop asks for a final backup.
func BackupPath(stop bool) string {
	if stop {
		return PathBackup + "?stop=true"
	}
	return PathBackup
}

// RestorePath is the restore path; replace allows replacing a record that
// holds data.
func RestorePath(replace bool) string {
	if replace {
		return PathRestore + "?replace=true"
	}
	return PathRestore
}

// RestoreResponse is what a restore answers.
type RestoreResponse struct {
	// Schema is the backup's schema version, Database where it was taken,
	// Core the version of the core that took it, Time when.
	Schema   int       `json:"schema"`
	Database string    `json:"database"`
	Core     string    `json:"core,omitempty"`
	Time     time.Time `json:"time"`
	// Rows counts the restored rows by table; RowsTotal all of them.
	Rows      map[string]int64 `json:"rows"`
	RowsTotal int64            `json:"rowsTotal"`
	// Replaced counts the rows the record held before, by table.
	Replaced map[string]int64 `json:"replaced,omitempty"`
}

// The owner's credential (OF-18): a TokenRequest token of the ServiceAccount
// ServiceAccount in the platform namespace, for the audience Audience, sent
// in HeaderOwnerToken. The API server's service proxy drops the
// Authorization header once it has authenticated the caller, so the token
// travels in a header of its own.
const (
	// Audience is the only audience the owner API accepts. No other
	// component asks for it, so a token minted for the owner is worth
	// nothing elsewhere, and no other token is worth anything here.
	Audience = "openfief-core-owner"
	// ServiceAccount is the owner's ServiceAccount. Whoever may create a
	// token for it (the Role OwnerRole in deploy/core) may act as owner.
	ServiceAccount = "openfief-owner"
	// OwnerRole is the Role an administrator binds to the owner.
	OwnerRole = "openfief-owner"
	// HeaderOwnerToken carries the owner's token on every request but
	// /healthz.
	HeaderOwnerToken = "X-OpenFief-Owner-Token"
	// TokenSeconds is how long a token the CLI mints lasts: the shortest
	// lifetime TokenRequest grants.
	TokenSeconds = 600
)

// OwnerUsername is the username the API server gives the owner's
// ServiceAccount in namespace.
func OwnerUsername(namespace string) string {
	return "system:serviceaccount:" + namespace + ":" + ServiceAccount
}

// Reasons the owner API gives when it refuses a request for its
// credential, in ErrorResponse.Reason.
const (
	// ReasonTokenRequired: no owner token in HeaderOwnerToken (401).
	ReasonTokenRequired = "OwnerTokenRequired"
	// ReasonTokenRefused: the API server did not authenticate the token for
	// Audience: expired, another audience, revoked, or not a token (401).
	ReasonTokenRefused = "OwnerTokenRefused"
	// ReasonNotOwner: the token is valid for Audience but belongs to
	// another identity than the owner's ServiceAccount (403).
	ReasonNotOwner = "NotOwner"
	// ReasonTokenUnverified: the core could not ask the API server now
	// (503); retry.
	ReasonTokenUnverified = "OwnerTokenUnverified"
)

// StatusPath is the status path of plugin name.
func StatusPath(name string) string { return PathPluginPrefix + name + "/status" }

// ImportPath is the import path of plugin name; preview asks for a preview.
func ImportPath(name string, preview bool) string {
	p := PathPluginPrefix + name + "/import"
	if preview {
		p += "?mode=preview"
	}
	return p
}

// PurgePath is the purge path of a removed instance's key; preview asks
// what would be deleted, deleting nothing.
func PurgePath(key string, preview bool) string {
	p := PathPluginPrefix + key + "/purge"
	if preview {
		p += "?mode=preview"
	}
	return p
}

// InstanceStatus is one instance's sync state.
type InstanceStatus struct {
	// Plugin is the instance's Plugin name.
	Plugin string `json:"plugin"`
	// Instance is what the instance's data is kept under: the Plugin name
	// while it is installed; for a removed instance (its Plugin uninstalled
	// or replaced by a new one of the same name) a key of its own,
	// name~tag, which a purge takes.
	Instance string `json:"instance,omitempty"`
	// Removed is true for a removed instance's kept data; RemovedAt says
	// since when.
	Removed   bool       `json:"removed,omitempty"`
	RemovedAt *time.Time `json:"removedAt,omitempty"`
	// UID is the instance's Plugin UID, when the core knows it.
	UID string `json:"uid,omitempty"`
	// Scheduled is true while the core calls the instance (it runs as a
	// connector under a grant).
	Scheduled bool `json:"scheduled"`
	// View is true while the core exports the record to the instance (it
	// runs as a view under a grant); its last and next sync are then its
	// last and next export, and an instance that is both a connector and a
	// view shows whichever comes first.
	View      bool       `json:"view,omitempty"`
	LastSync  *time.Time `json:"lastSync,omitempty"`
	LastOK    bool       `json:"lastOK"`
	LastError string     `json:"lastError,omitempty"`
	NextSync  *time.Time `json:"nextSync,omitempty"`
	// IntervalSeconds is how often the core calls the instance while
	// Scheduled: a connector's sync interval, or for a view only the
	// longest it goes without an export; 0 when the core does not say.
	IntervalSeconds int64  `json:"intervalSeconds,omitempty"`
	Watermark       string `json:"watermark,omitempty"`
	// Lag is, for a running view, how many entries of the kinds its grant
	// allows it has not been sent yet; nil for anything else or when the
	// core cannot count them.
	Lag *int64 `json:"lag,omitempty"`
	// RowsTotal is every row stored for the instance; Rows by table.
	RowsTotal int       `json:"rowsTotal"`
	Rows      RowCounts `json:"rows"`
}

// RowCounts are the rows stored for an instance, by table.
type RowCounts struct {
	Batches       int `json:"batches"`
	Transactions  int `json:"transactions"`
	Postings      int `json:"postings"`
	Balances      int `json:"balances"`
	Prices        int `json:"prices"`
	FxRates       int `json:"fxRates"`
	IndexReadings int `json:"indexReadings"`
	Problems      int `json:"problems"`
}

// ImportResponse is what an import or preview answers: the rows newly
// stored, or in a preview the rows the delivery holds.
type ImportResponse struct {
	Plugin        string `json:"plugin"`
	Preview       bool   `json:"preview"`
	Transactions  int    `json:"transactions"`
	Postings      int    `json:"postings"`
	Balances      int    `json:"balances"`
	Prices        int    `json:"prices"`
	FxRates       int    `json:"fxRates"`
	IndexReadings int    `json:"indexReadings"`
	Problems      int    `json:"problems"`
	// Duplicate is true when the same batch had been imported before.
	Duplicate bool `json:"duplicate"`
}

// PurgeResponse is what a purge or its preview answers: the rows deleted,
// or in a preview the rows a purge would delete, by table.
type PurgeResponse struct {
	// Instance is the removed instance's key.
	Instance string    `json:"instance"`
	Preview  bool      `json:"preview"`
	Rows     RowCounts `json:"rows"`
	// ViewPlaces counts a view's places (one per kind of entry).
	ViewPlaces int `json:"viewPlaces"`
	// RowsTotal is every row above together.
	RowsTotal int `json:"rowsTotal"`
}

// ErrorResponse is every error answer's body.
type ErrorResponse struct {
	Error string `json:"error"`
	// Reason names a refusal of the owner's credential (Reason...); empty
	// for every other error.
	Reason string `json:"reason,omitempty"`
}
