package domain

import (
	"fmt"
	"time"
)

// expiryMarks are how long before a key's expiry key.expiring is sent.
var expiryMarks = []struct {
	before time.Duration
	days   int
}{{24 * time.Hour, 1}, {7 * 24 * time.Hour, 7}}

// StaleExpiry is how long after a key expired its key.expired is still
// sent: a server started on an old database does not announce ends long
// past.
const StaleExpiry = 7 * 24 * time.Hour

// ExpiryNotices are the notices due at now for keys: key.expiring at the
// nearest mark passed while the expiry is ahead (a mark already past when
// the key was made is skipped), key.expired once it passed. Revoked keys
// and the old keys of a roll (whose end key.rolled announced) get none.
func ExpiryNotices(keys []Key, now time.Time) ([]WebhookNotice, error) {
	var notices []WebhookNotice
	for _, k := range keys {
		if k.ExpiresAt.IsZero() || !k.RevokedAt.IsZero() || k.RolledTo != 0 {
			continue
		}
		data := map[string]any{"keyId": k.ID, "keyName": k.Name, "plan": k.Plan, "expires": k.ExpiresAt}
		var typ, mark string
		if !now.Before(k.ExpiresAt) {
			if now.Sub(k.ExpiresAt) > StaleExpiry {
				continue
			}
			typ, mark = WebhookKeyExpired, fmt.Sprintf("expired:%d:%d", k.ID, k.ExpiresAt.Unix())
		} else {
			for _, m := range expiryMarks {
				at := k.ExpiresAt.Add(-m.before)
				if !now.Before(at) && k.CreatedAt.Before(at) {
					typ, mark = WebhookKeyExpiring, fmt.Sprintf("expiring:%d:%d:%d", k.ID, k.ExpiresAt.Unix(), m.days)
					data["daysBefore"] = m.days
					break
				}
			}
		}
		if typ == "" {
			continue
		}
		ev, err := NewWebhookEvent(typ, now, data)
		if err != nil {
			return nil, err
		}
		notices = append(notices, WebhookNotice{Mark: mark, Event: ev, ForgetAt: k.ExpiresAt.Add(KeepExpiryMarks)})
	}
	return notices, nil
}

// How long the marks of notices are kept: a quota mark past its day (and
// a day for the servers whose clocks differ), an expiry mark past the last
// time its key's key.expired could be sent (StaleExpiry after the expiry),
// and a day more.
const (
	KeepQuotaMarks  = 48 * time.Hour
	KeepExpiryMarks = StaleExpiry + 24*time.Hour
)
