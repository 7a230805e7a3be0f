package publicapi

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/petcopy"
)

// An Idempotency-Key (IETF draft-ietf-httpapi-idempotency-key-header) makes a
// createPet safe to retry: the first response is kept for
// domain.IdempotencyTTL and replayed to any retry with the same key and body
// from the same API key.
const maxIdempotencyKeyLen = 255

// idempotencyKey returns the request's Idempotency-Key, bare or as a quoted
// structured-field string, or ok=false when there is none.
func idempotencyKey(h http.Header) (key string, ok bool, err error) {
	values := h.Values("Idempotency-Key")
	if len(values) == 0 {
		return "", false, nil
	}
	if len(values) > 1 {
		return "", false, httpapi.Errorf(httpapi.CodeInvalidRequest, "Idempotency-Key must be given once")
	}
	key = values[0]
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		if key, ok = unquoteSFString(key[1 : len(key)-1]); !ok {
			return "", false, httpapi.Errorf(httpapi.CodeInvalidRequest, `Idempotency-Key is a malformed quoted string: only \" and \\ may be escaped`)
		}
	}
	if len(key) < 1 || len(key) > maxIdempotencyKeyLen || strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		return "", false, httpapi.Errorf(httpapi.CodeInvalidRequest, "Idempotency-Key must be 1 to %d printable ASCII characters", maxIdempotencyKeyLen)
	}
	return key, true, nil
}

// unquoteSFString undoes the escapes of an RFC 8941 string's inside.
func unquoteSFString(s string) (string, bool) {
	if !strings.ContainsAny(s, `\"`) {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return "", false
		case '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", false
			}
			b.WriteByte(s[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// inflight holds the Idempotency-Keys whose first request is still running,
// so that a concurrent duplicate is told 409 instead of creating a second pet.
type inflight struct {
	mu   sync.Mutex
	keys map[inflightKey]struct{}
}

type inflightKey struct {
	apiKeyID int64
	key      string
}

func newInflight() *inflight { return &inflight{keys: make(map[inflightKey]struct{})} }

// begin claims k; done releases it. ok is false when k is already claimed.
func (f *inflight) begin(k inflightKey) (done func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, busy := f.keys[k]; busy {
		return nil, false
	}
	f.keys[k] = struct{}{}
	return func() {
		f.mu.Lock()
		delete(f.keys, k)
		f.mu.Unlock()
	}, true
}

var errIdempotencyInFlight = httpapi.Errorf(httpapi.CodeIdempotencyConflict,
	"a request with this Idempotency-Key is still being processed; retry once it has completed")

// createOnce creates p unless this API key's Idempotency-Key already did,
// in which case it returns that first pet and replayed=true.
func createOnce(ctx context.Context, pets *petcopy.Cache, idem *inflight, now func() time.Time, apiKeyID int64, key string, p domain.Pet) (pet domain.Pet, replayed bool, err error) {
	done, ok := idem.begin(inflightKey{apiKeyID, key})
	if !ok {
		return domain.Pet{}, false, errIdempotencyInFlight
	}
	defer done()
	hash := httpapi.RequestHash(p)
	if pet, found, err := replay(ctx, pets.Store(), now, apiKeyID, key, hash); found || err != nil {
		return pet, found, err
	}
	pet, err = pets.Create(ctx, p, &domain.IdempotencyRecord{KeyID: apiKeyID, Key: key, RequestHash: hash})
	if errors.Is(err, domain.ErrIdempotencyTaken) {
		// The key's record was committed first by another server, or by
		// an earlier try of this request whose answer was lost (a 503 that
		// could not say whether it was stored) and that reached the
		// database late: its pet is the one to answer with.
		if pet, found, err := replay(ctx, pets.Store(), now, apiKeyID, key, hash); found || err != nil {
			return pet, found, err
		}
		return domain.Pet{}, false, errIdempotencyInFlight
	}
	return pet, false, err
}

// replay returns the pet that a live record of the Idempotency-Key created,
// with found=true, when there is one for the same body.
func replay(ctx context.Context, store petcopy.Store, now func() time.Time, apiKeyID int64, key string, hash []byte) (pet domain.Pet, found bool, err error) {
	rec, found, err := store.IdempotencyRecord(ctx, apiKeyID, key, now().Add(-domain.IdempotencyTTL))
	if err != nil || !found {
		return domain.Pet{}, false, err
	}
	if !bytes.Equal(rec.RequestHash, hash) {
		return domain.Pet{}, false, httpapi.Errorf(httpapi.CodeIdempotencyMismatch,
			"this Idempotency-Key was used with a different body; use a new key for a new pet")
	}
	pet, err = store.GetPet(ctx, rec.PetID)
	return pet, err == nil, err
}
