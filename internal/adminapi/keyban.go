package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"petstore/internal/domain"
	"petstore/internal/manage"
)

// A key's ban where the owner looks (docs/admin.md, "Console"): on the key's
// object, in the list and alone, and on its limits now.

// KeyBan is the ban in force of a key: what it bans, the key's budget
// (key:ID, the first key of a roll, so every key of the roll), since when
// and until when, unless lifted.
type KeyBan struct {
	Subject string    `json:"subject"`
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
}

// AdminKey is a key as the admin API shows it: keys list --json's object
// and its ban in force (null when none).
type AdminKey struct {
	manage.ListedKey
	Ban *KeyBan `json:"ban"`
}

// keyBans are the keys' bans in force by budget, with those this server
// started and has not stored yet: one read, however many keys.
func (d Deps) keyBans(ctx context.Context) (map[int64]KeyBan, error) {
	if err := d.StoreBans(ctx); err != nil {
		return nil, err
	}
	bans, err := d.Bans.Bans(ctx)
	if err != nil {
		return nil, err
	}
	byBudget := make(map[int64]KeyBan)
	for _, b := range bans {
		if b.Subject.KeyID != 0 {
			byBudget[b.Subject.KeyID] = KeyBan{Subject: b.Subject.String(), Since: b.Since, Until: b.Until}
		}
	}
	return byBudget, nil
}

// withBans is rows (the listed keys among keys) with each key's ban.
func withBans(rows []manage.ListedKey, keys []domain.Key, bans map[int64]KeyBan) []AdminKey {
	budgets := make(map[int64]int64, len(keys))
	for _, k := range keys {
		budgets[k.ID] = k.BudgetID
	}
	out := make([]AdminKey, len(rows))
	for i, row := range rows {
		out[i].ListedKey = row
		if b, ok := bans[budgets[row.ID]]; ok {
			out[i].Ban = &b
		}
	}
	return out
}

// listedWithBans is shown (of all the keys) as the admin API lists keys:
// each with today's usage and its ban.
func (d Deps) listedWithBans(ctx context.Context, all, shown []domain.Key) ([]AdminKey, error) {
	rows, err := manage.ListedKeys(ctx, d.Usage, d.Env, all, shown, d.Now())
	if err != nil {
		return nil, err
	}
	bans, err := d.keyBans(ctx)
	if err != nil {
		return nil, err
	}
	return withBans(rows, shown, bans), nil
}

// keyLimits is GET /v1/rate_limit's object with the key's ban beside its
// windows.
type keyLimits struct {
	status json.RawMessage
	ban    *KeyBan
}

func (l keyLimits) MarshalJSON() ([]byte, error) {
	ban, err := json.Marshal(l.ban)
	if err != nil {
		return nil, err
	}
	// The status's object, without its closing brace and newline.
	b := bytes.TrimSuffix(l.status, []byte("\n"))
	b = b[: len(b)-1 : len(b)-1]
	return append(append(append(b, `,"ban":`...), ban...), '}'), nil
}
