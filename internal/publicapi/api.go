package publicapi

import (
	"time"

	"petstore/internal/keyring"
	"petstore/internal/limits"
	"petstore/internal/petcopy"
)

// Deps is what the /v1 handlers and their steps need: the copy of the
// pets they read and create through, the keys, the limiter and what it
// noticed on the way, never the whole store.
type Deps struct {
	Pets    *petcopy.Cache
	Keys    *keyring.Ring
	Limiter limits.Limiter
	// StartedBans takes each ban a request started, on its way to the
	// database; Quota notices a key's day crossing 80% and 100%.
	StartedBans *limits.StartedBans
	Quota       *limits.QuotaWatch
	Now         func() time.Time
	// TrustProxy (--trust-proxy): a request's client address is the first
	// X-Forwarded-For hop, not the TCP peer (httpapi.ClientAddr).
	TrustProxy bool
}
