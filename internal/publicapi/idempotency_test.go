package publicapi_test

import (
	"net/http"
	"net/http/httptest"
	"petstore/internal/servertest"
	"petstore/internal/testkit"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests check docs/api.md's Idempotency-Key ("Idempotency") on POST /v1/pets.

func TestIdempotentRetry(t *testing.T) {
	t.Parallel()
	const (
		body      = `{"name":"Rex","categoryId":1,"status":"available"}`
		otherBody = `{"name":"Max","categoryId":1,"status":"available"}`
	)
	tests := []struct {
		name         string
		firstKey     string // Idempotency-Key of the first request
		retryKey     string // Idempotency-Key of the retry
		retryBody    string
		otherAPIKey  bool          // the retry comes from another API key
		wait         time.Duration // between the first request and the retry
		wantStatus   int
		wantCode     string // for an error
		wantReplayed bool   // the retry returns the first response
		wantPets     int
	}{
		{"same key and same body", "abc", "abc", body, false, 0, 201, "", true, 1},
		{"same key and same body, an hour later", "abc", "abc", body, false, time.Hour, 201, "", true, 1},
		{"same key and same body, a second before 24 hours", "abc", "abc", body, false, 24*time.Hour - time.Second, 201, "", true, 1},
		{"quoted key, then the same key bare", `"abc"`, "abc", body, false, 0, 201, "", true, 1},
		{"bare key, then the same key quoted", "abc", `"abc"`, body, false, 0, 201, "", true, 1},
		{"quoted key with an escaped quote, then bare", `"a\"b"`, `a"b`, body, false, 0, 201, "", true, 1},
		{"same key and a different body", "abc", "abc", otherBody, false, 0, 422, "idempotency_mismatch", false, 1},
		{"same key and a different body, quoted", "abc", `"abc"`, otherBody, false, 0, 422, "idempotency_mismatch", false, 1},
		{"same key from another API key", "abc", "abc", body, true, 0, 201, "", false, 2},
		{"same key after 24 hours", "abc", "abc", body, false, 24*time.Hour + time.Second, 201, "", false, 2},
		{"same key and a different body after 24 hours", "abc", "abc", otherBody, false, 24*time.Hour + time.Second, 201, "", false, 2},
		{"another key, same body", "abc", "abd", body, false, 0, 201, "", false, 2},
		{"keys differ only in case", "abc", "ABC", body, false, 0, 201, "", false, 2},
		{"no key on the retry", "abc", "", body, false, 0, 201, "", false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := servertest.Start(t, servertest.Options{})
			key := s.MustCreateKey("business")
			first := s.Do("POST", "/v1/pets", key, body, "Idempotency-Key", tt.firstKey)
			if first.Code != http.StatusCreated {
				t.Fatalf("first request: HTTP status = %d, want 201; body: %s", first.Code, first.Body)
			}
			firstPet := testkit.ReadPet(t, first.Body.Bytes())

			s.Clock.Advance(tt.wait)
			retryAPIKey := key
			if tt.otherAPIKey {
				retryAPIKey = s.MustCreateKey("business")
			}
			retry := s.Do("POST", "/v1/pets", retryAPIKey, tt.retryBody, "Idempotency-Key", tt.retryKey)

			switch {
			case tt.wantCode != "":
				servertest.WantError(t, retry, tt.wantStatus, tt.wantCode, "Idempotency-Key")
			case tt.wantReplayed:
				if retry.Code != first.Code {
					t.Errorf("retry: HTTP status = %d, want the first one's %d; body: %s", retry.Code, first.Code, retry.Body)
				}
				if retry.Body.String() != first.Body.String() {
					t.Errorf("retry body = %s, want the first one's %s", retry.Body, first.Body)
				}
				if got, want := retry.Header().Get("Location"), first.Header().Get("Location"); got != want {
					t.Errorf("retry Location = %q, want the first one's %q", got, want)
				}
				testkit.WantJSON(t, retry)
			default:
				if retry.Code != tt.wantStatus {
					t.Fatalf("retry: HTTP status = %d, want %d; body: %s", retry.Code, tt.wantStatus, retry.Body)
				}
				if p := testkit.ReadPet(t, retry.Body.Bytes()); p.ID == firstPet.ID {
					t.Errorf("retry got the first pet's id %d, want a new pet", p.ID)
				}
			}
			if got := testkit.PetCount(s.T, s.Do, key); got != tt.wantPets {
				t.Errorf("pets = %d, want %d", got, tt.wantPets)
			}
		})
	}
}

// TestIdempotencyKeyReplayedTwice checks that a replay is not itself a new
// first response: the third request still gets the first pet.
func TestIdempotencyKeyReplayedTwice(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		const body = `{"name":"Rex","categoryId":1}`
		var bodies []string
		for i := 0; i < 3; i++ {
			w := s.Do("POST", "/v1/pets", key, body, "Idempotency-Key", "order-7")
			if w.Code != http.StatusCreated {
				t.Fatalf("request %d: HTTP status = %d, want 201; body: %s", i+1, w.Code, w.Body)
			}
			bodies = append(bodies, w.Body.String())
		}
		if bodies[1] != bodies[0] || bodies[2] != bodies[0] {
			t.Errorf("bodies differ: %q", bodies)
		}
		if got := testkit.PetCount(s.T, s.Do, key); got != 1 {
			t.Errorf("pets = %d, want 1", got)
		}
	})
}

func TestIdempotencyKeyValidation(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		const body = `{"name":"Rex","categoryId":1}`

		tests := []struct {
			name       string
			values     []string // the Idempotency-Key header's values, as sent
			wantStatus int
		}{
			{"empty key", []string{""}, 400},
			{"empty quoted key", []string{`""`}, 400},
			{"key of 256 characters", []string{strings.Repeat("k", 256)}, 400},
			{"quoted key of 256 characters", []string{`"` + strings.Repeat("k", 256) + `"`}, 400},
			{"key with a non-ASCII character", []string{"clé"}, 400},
			{"key with a control character", []string{"a\x01b"}, 400},
			{"key given twice", []string{"abc", "abd"}, 400},
			{"key of 1 character", []string{"k"}, 201},
			{"key of 255 characters", []string{strings.Repeat("k", 255)}, 201},
			{"quoted key of 255 characters", []string{`"` + strings.Repeat("q", 255) + `"`}, 201},
			{"key with spaces and punctuation", []string{"order 7/2026: #1"}, 201},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := testkit.PetCount(s.T, s.Do, key)
				req := httptest.NewRequest("POST", "/v1/pets", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				req.Header["Idempotency-Key"] = tt.values
				w := apiSend(s, req)
				want := before
				if tt.wantStatus == 201 {
					if w.Code != http.StatusCreated {
						t.Fatalf("HTTP status = %d, want 201; body: %s", w.Code, w.Body)
					}
					want++
				} else {
					servertest.WantError(t, w, tt.wantStatus, "invalid_request", "Idempotency-Key")
				}
				if got := testkit.PetCount(s.T, s.Do, key); got != want {
					t.Errorf("pets = %d, want %d", got, want)
				}
			})
		}
	})
}

// TestRejectedRequestDoesNotUseUpTheKey: a body refused with 400 stores no
// response, so the key then works for a valid body.
func TestRejectedRequestDoesNotUseUpTheKey(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		w := s.Do("POST", "/v1/pets", key, `{"name":"","categoryId":1}`, "Idempotency-Key", "k1")
		servertest.WantError(t, w, http.StatusBadRequest, "invalid_request", "name")
		w = s.Do("POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`, "Idempotency-Key", "k1")
		if w.Code != http.StatusCreated {
			t.Fatalf("HTTP status = %d, want 201; body: %s", w.Code, w.Body)
		}
		if got := testkit.PetCount(s.T, s.Do, key); got != 1 {
			t.Errorf("pets = %d, want 1", got)
		}
	})
}

// TestConcurrentRequestsWithOneIdempotencyKey fires 20 identical requests at
// once: exactly one pet is made, and every answer is that pet (201, first or
// replayed) or 409 idempotency_conflict.
func TestConcurrentRequestsWithOneIdempotencyKey(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		const n = 20
		const body = `{"name":"Rex","categoryId":1,"status":"pending"}`

		responses := make([]*httptest.ResponseRecorder, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				responses[i] = s.Do("POST", "/v1/pets", key, body, "Idempotency-Key", "same-for-all")
			}()
		}
		close(start)
		wg.Wait()

		var id int64
		created := 0
		for i, w := range responses {
			switch w.Code {
			case http.StatusCreated:
				created++
				p := testkit.ReadPet(t, w.Body.Bytes())
				if id == 0 {
					id = p.ID
				}
				if p.ID != id {
					t.Errorf("response %d: id %d, another response has %d", i, p.ID, id)
				}
			case http.StatusConflict:
				servertest.WantError(t, w, http.StatusConflict, "idempotency_conflict")
			default:
				t.Errorf("response %d: HTTP status = %d, want 201 or 409; body: %s", i, w.Code, w.Body)
			}
		}
		if created == 0 {
			t.Errorf("no response was 201")
		}
		t.Logf("%d responses 201 (the first and its replays), %d 409", created, n-created)
		if got := testkit.PetCount(s.T, s.Do, key); got != 1 {
			t.Errorf("pets = %d, want exactly 1", got)
		}
	})
}
