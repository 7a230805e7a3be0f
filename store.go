package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Pet is an animal of the store. An empty Status means none was given.
type Pet struct {
	ID         int64
	Name       string
	CategoryID int64
	Status     string
}

// storage is where the service keeps pets, API keys, daily usage, the
// audit trail and idempotency records: a SQLite file (sqliteStore,
// store_sqlite.go) or a PostgreSQL database shared by several servers
// (pgStore, store_postgres.go). It is one small interface per aggregate;
// each part of the server takes only the ones it uses, and the SQL stays
// behind them. Their errors say what went wrong in the domain's terms (a
// domainError): a pet or key not found, an Idempotency-Key taken, or the
// database unavailable right now and why, which a caller may retry.
type storage interface {
	petStore
	idempotencyStore
	keyStore
	usageStore
	usageHistoryStore
	auditStore
	adminTokenStore
	webhookStorage // webhook_store.go
	banStore
	lifecycle
}

// petStore keeps the pets.
type petStore interface {
	// CreatePets stores a batch of pets in one transaction, in id order.
	// An error returned means none was stored; otherwise each insert has
	// its id or its own Err.
	CreatePets(ctx context.Context, batch []petInsert) error
	// GetPet returns the pet with the given id, or a not_found Error.
	GetPet(ctx context.Context, id int64) (Pet, error)
	// ListPets returns up to limit pets with ids above after, in id order,
	// only those with status when it is not empty.
	ListPets(ctx context.Context, status string, after int64, limit int) ([]Pet, error)
	// ScanPets calls fn for up to limit pets with ids above after, in id
	// order; the byte slices are valid only during the call.
	ScanPets(ctx context.Context, after int64, limit int, fn func(id int64, name []byte, categoryID int64, status []byte)) (int, error)
	// PetsAdded receives when other servers may have stored pets (never
	// on SQLite, where this server is the only one): the reader looks for
	// them. Notices that come while one waits unread are one.
	PetsAdded() <-chan struct{}
}

// idempotencyStore keeps the records that replay a create.
type idempotencyStore interface {
	IdempotencyRecord(ctx context.Context, keyID int64, key string, since time.Time) (idempotencyRecord, bool, error)
	PruneIdempotency(ctx context.Context, cutoff time.Time) (int64, error)
}

// keyStore keeps the API keys. Each change of a key and its audit event by
// actor are stored as one change.
type keyStore interface {
	// CreateKey stores k (its Hash set, its ExpiresAt when it has one)
	// and returns it with its id.
	CreateKey(ctx context.Context, k apiKey, actor string) (apiKey, error)
	// CreateFirstKey stores k as CreateKey does, but only when the store
	// holds no key at all, as one change: servers that start at once on an
	// empty database make one first key between them. created is false,
	// and nothing is stored, when a key exists.
	CreateFirstKey(ctx context.Context, k apiKey, actor string) (_ apiKey, created bool, err error)
	// RevokeKey marks key id revoked. Revoking a revoked key changes
	// nothing (revoked is false) and leaves no event; an unknown id is
	// not_found.
	RevokeKey(ctx context.Context, id int64, actor string) (revoked bool, err error)
	// RollKey replaces key id by a new key with hash, as one change: the
	// new key has the old one's name, plan, figures, environment, scopes,
	// expiry and budget, and the old one expires overlap from now (sooner
	// when it already would). A revoked, expired or already rolled key is
	// refused (invalid_request), an unknown id is not_found.
	RollKey(ctx context.Context, id int64, hash []byte, overlap time.Duration, actor string) (old, rolled apiKey, err error)
	// UpdateKey changes key id in place to what change makes of it (the
	// same secret), as one change with its key.updated event; an unknown id
	// is not_found, and change's refusal comes back as it is.
	UpdateKey(ctx context.Context, id int64, change func(apiKey) (apiKey, error), actor string) (before, after apiKey, err error)
	Keys(ctx context.Context) ([]apiKey, error)
	KeyByHash(ctx context.Context, hash []byte) (apiKey, bool, error)
	// KeysVersion changes whenever a key is created or changed, by any
	// process sharing the database.
	KeysVersion(ctx context.Context) (int64, error)
	// SetLastUsed records the minute each key was last used in, in one
	// write, never moving a key's last use back. It is not a key change:
	// KeysVersion stays.
	SetLastUsed(ctx context.Context, uses []lastUse) error
}

// usageStore keeps each key's requests a day, which the limiters add to.
type usageStore interface {
	Usage(ctx context.Context, keyID int64, day string) (int64, error)
	AddUsage(ctx context.Context, counts []usageCount) error
}

// auditStore reads the audit trail, which is append only: each change
// writes its events in its own transaction (insertAuditEvents).
type auditStore interface {
	// AuditEvents returns the events filter picks, oldest first.
	AuditEvents(ctx context.Context, filter auditFilter) ([]auditEvent, error)
	// AuditCounts counts the events of the trail by action.
	AuditCounts(ctx context.Context) (map[string]int64, error)
}

// banStore keeps the bans the servers started, and their lifts.
type banStore interface {
	// AddBans stores bans the server started, each with its key.banned
	// event, in one write.
	AddBans(ctx context.Context, started []startedBan) error
	// LiftBan ends subject's ban now, with its ban.lifted event by actor,
	// as one change; a key names its budget's ban. No ban in force is
	// not_found.
	LiftBan(ctx context.Context, subject callerID, actor, env string) (ban, error)
	// Bans returns the bans in force, those that began first first.
	Bans(ctx context.Context) ([]ban, error)
	// BanChanges returns the bans stored or lifted after version (0: every
	// one the table holds), in the order of their writes.
	BanChanges(ctx context.Context, version int64) ([]ban, error)
}

// lifecycle is the engine as a whole: what it is, its background work,
// its snapshot for petstore copy, its health and its end.
type lifecycle interface {
	// Shared tells whether other servers write to this database too
	// (PostgreSQL): a copy of its pets in memory is then only a prefix of
	// the table, and a read past its end must go to the database.
	Shared() bool
	// Namespace tells this database apart from others whose servers share
	// one Redis: "" for a SQLite file, which one server alone serves; on
	// PostgreSQL a name for its database and schema.
	Namespace() string
	// Maintain runs the engine's own background work until ctx ends,
	// logging what fails: on PostgreSQL it follows the pets other servers
	// store (PetsAdded); on SQLite it checkpoints the WAL into the
	// database file. Work that waits on the database ends within timeout
	// (--db-timeout).
	Maintain(ctx context.Context, timeout time.Duration, logger *slog.Logger)
	// Snapshot reads everything the store holds, as it is at this moment,
	// for petstore copy. The caller closes it.
	Snapshot(ctx context.Context) (snapshot, error)
	Ping(ctx context.Context) error
	Close() error
}

// usageHistoryStore keeps the usage history (usage.go): each budget's
// requests by UTC day and outcome.
type usageHistoryStore interface {
	// AddUsageHistory adds each row's counts to its budget's day, in one
	// write.
	AddUsageHistory(ctx context.Context, rows []usageDay) error
	// UsageHistory returns budgetID's days from day from on, oldest first,
	// only those it has.
	UsageHistory(ctx context.Context, budgetID int64, from string) ([]usageDay, error)
	// PruneUsageHistory deletes the days before day before.
	PruneUsageHistory(ctx context.Context, before string) (int64, error)
}

// adminTokenStore keeps the admin tokens (admin.go), each change with its
// audit event by actor.
type adminTokenStore interface {
	// CreateAdminToken stores t (its Hash set) and returns it with its id.
	CreateAdminToken(ctx context.Context, t adminToken, actor string) (adminToken, error)
	AdminTokens(ctx context.Context) ([]adminToken, error)
	AdminTokenByHash(ctx context.Context, hash []byte) (adminToken, bool, error)
	// RevokeAdminToken marks token id revoked; revoked is false, and
	// nothing changes, when it was already; an unknown id is not_found.
	RevokeAdminToken(ctx context.Context, id int64, actor string) (revoked bool, err error)
}

// snapshot is what a store held at one moment, table by table (copyTables
// names them and their columns, the same in both engines).
type snapshot interface {
	// Rows streams the rows of table, their values in the order of columns.
	Rows(ctx context.Context, table string, columns []string) (rowStream, error)
	// Count is how many rows table holds.
	Count(ctx context.Context, table string) (int64, error)
	// LastID is the highest id table ever gave, even one whose row is gone
	// (ids are never given twice); 0 when it gave none.
	LastID(ctx context.Context, table string) (int64, error)
	Close() error
}

// copyTarget is a database petstore copy fills: an empty PostgreSQL one
// (openCopyTarget).
type copyTarget interface {
	// CopyFrom moves everything src holds in, and adds copiedEvent (the
	// copy's keys.copied, given its counts), as one change.
	CopyFrom(ctx context.Context, src snapshot, copiedEvent auditEvent) (copied, error)
	Close() error
}

// rowStream is the rows of one table of a snapshot: Values after each Next
// that is true, then Err. It is what pgx's CopyFrom reads.
type rowStream interface {
	Next() bool
	Values() ([]any, error)
	Err() error
	Close()
}

// openStorage opens the database --db names: a PostgreSQL URL or a SQLite
// file (created when create is set).
func openStorage(ctx context.Context, db string, create bool, now func() time.Time) (storage, error) {
	if isPostgresURL(db) {
		return openPostgres(ctx, db, now)
	}
	return openSQLite(ctx, db, create, now)
}

// idempotencyRecord ties an Idempotency-Key of one API key to the pet its
// first request created.
type idempotencyRecord struct {
	KeyID       int64
	Key         string
	RequestHash []byte
	PetID       int64
	CreatedAt   time.Time
}

// petInsert is one pet to store, with the idempotency record that will
// replay it (nil without an Idempotency-Key). CreatePets sets the pet's ID,
// or Err.
type petInsert struct {
	Pet  Pet
	Idem *idempotencyRecord
	Err  error
}

// errIdempotencyTaken: a live record holds the Idempotency-Key already.
var errIdempotencyTaken = &domainError{kind: kindConflict, message: "idempotency key already used"}

// domainError is what went wrong, in the domain's terms and free of HTTP.
// The stores, the key rules and the limiter return it; each edge decides
// what to say of it: writeError a status and a client's text, the commands
// a message and their exit status.
type domainError struct {
	kind    errorKind
	message string    // says it to a person ("no pet has id 7"); unavailable has none
	cause   error     // what went wrong underneath, for the log
	db      dbFailure // unavailable: why
	unsure  bool      // unavailable: a create reached the database, which may have stored it
}

type errorKind uint8

const (
	kindNotFound    errorKind = iota + 1 // no such pet or key
	kindInvalid                          // the rules refuse it: a revoked key cannot be rolled
	kindConflict                         // it clashes with what is stored: an Idempotency-Key taken
	kindUnavailable                      // the database cannot serve it now, for the reason in db
)

func (e *domainError) Error() string {
	if e.kind == kindUnavailable {
		return "the database is unavailable (" + dbFailureNames[e.db] + "): " + e.cause.Error()
	}
	return e.message
}

func (e *domainError) Unwrap() error { return e.cause }

func errNotFound(format string, args ...any) error {
	return &domainError{kind: kindNotFound, message: fmt.Sprintf(format, args...)}
}

func errConflict(format string, args ...any) error {
	return &domainError{kind: kindConflict, message: fmt.Sprintf(format, args...)}
}

func errInvalid(format string, args ...any) error {
	return &domainError{kind: kindInvalid, message: fmt.Sprintf(format, args...)}
}

// dbFailure is why the database could not serve a request: the cause label
// of petstore_database_unavailable_total.
type dbFailure uint8

const (
	dbTimeout       dbFailure = iota + 1 // no answer by the deadline (--db-timeout)
	dbPoolExhausted                      // no connection free by the deadline, or too many creates already waiting
	dbRefused                            // the database refused or cut the connection, or the disk refused the write
	dbFailures                           // how many causes there are, plus one
)

var dbFailureNames = [dbFailures]string{dbTimeout: "timeout", dbPoolExhausted: "pool_exhausted", dbRefused: "refused"}

// errDatabase is the database unable to serve a request right now, for the
// reason failure; cause is what went wrong underneath.
func errDatabase(failure dbFailure, cause error) error {
	return &domainError{kind: kindUnavailable, db: failure, cause: cause}
}

// errOutcomeUnknown is a create that reached the database, which then
// failed to say whether it committed: the pet may be stored.
func errOutcomeUnknown(failure dbFailure, cause error) error {
	return &domainError{kind: kindUnavailable, db: failure, cause: cause, unsure: true}
}

// dbFailureOf is why err says the database could not serve a request, or 0
// when it does not.
func dbFailureOf(err error) dbFailure {
	// AsType, not As, whose target escapes: an allocation on each call
	// with an error, and dbHealth.saw calls this with every store call's.
	if e, ok := errors.AsType[*domainError](err); ok {
		return e.db
	}
	return 0
}

// apiKey is a stored API key. The key itself is never kept, only its hash.
type apiKey struct {
	ID        int64
	Hash      []byte
	Name      string
	Plan      string
	PerMinute int64
	PerDay    int64
	Env       string
	Scopes    scopeSet
	CreatedAt time.Time
	RevokedAt time.Time // zero while the key is active
	ExpiresAt time.Time // zero: the key never expires
	// BudgetID is the key whose rate-limit budget this key spends: its own
	// id, or after a roll the first key of the chain, so that the old and
	// the new key share one minute bucket, one day count and one ban.
	BudgetID   int64
	RolledTo   int64     // the key this one was rolled to; 0 when none
	LastUsedAt time.Time // the minute it was last used in; zero: never
	// ExternalID is a portal's own reference for the key (its customer,
	// its account), unique among the keys not revoked; "" when none.
	ExternalID string
}

// expiredAt tells whether the key has expired at now.
func (k *apiKey) expiredAt(now time.Time) bool {
	return !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt)
}

// lastUse says that key KeyID was used in the minute that starts at Minute.
type lastUse struct {
	KeyID  int64
	Minute time.Time
}

// usageCount is the number of requests a key made on one UTC day.
type usageCount struct {
	KeyID int64
	Day   string // YYYY-MM-DD
	Count int64
}
