package servertest

import (
	"context"
	"net/http/httptest"
	"strings"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
	"petstore/internal/testkit"
)

// What a test does to its server at once that the server does in the
// background or its clients over time.

// FlushUsage writes the usage history the server counted, as its flush
// every limits.UsageFlushEvery does.
func (s *Server) FlushUsage() {
	s.T.Helper()
	if err := s.Keys().FlushUsage(context.Background(), s.Store().AddUsageHistory); err != nil {
		s.T.Fatal(err)
	}
}

// FlushAudit writes the bans the server started, with their events, as its
// flush every limits.UsageFlushEvery does.
func (s *Server) FlushAudit() {
	s.T.Helper()
	if err := s.FlushBans(context.Background()); err != nil {
		s.T.Fatal(err)
	}
}

// MustCreateKeyExpiring makes a Free key that expires at expires and
// returns it with its token.
func (s *Server) MustCreateKeyExpiring(expires time.Time) (domain.Key, string) {
	s.T.Helper()
	terms := s.KeyTerms("free")
	terms.ExpiresAt = expires
	return s.MustCreate(terms)
}

// Roll rolls key id with overlap through the store, as keys roll does,
// and has the keyring know it at once.
func (s *Server) Roll(id int64, overlap time.Duration) (old, rolled domain.Key, token string) {
	s.T.Helper()
	ctx := context.Background()
	token = domain.NewKeyToken(s.Env)
	hash := domain.HashKey(token)
	old, rolled, err := s.Store().RollKey(ctx, id, hash[:], overlap, Actor)
	if err != nil {
		s.T.Fatalf("roll key %d: %v", id, err)
	}
	if err := s.Keys().Refresh(ctx); err != nil {
		s.T.Fatal(err)
	}
	return old, rolled, token
}

// BanOf sends requests with key until it is banned, at most limit.
func (s *Server) BanOf(key string, limit int) {
	s.T.Helper()
	for range limit {
		w := s.Do("GET", "/v1/pets", key, "")
		if strings.Contains(w.Body.String(), httpapi.CodeTemporarilyBanned) {
			return
		}
	}
	s.T.Fatalf("no ban after %d requests", limit)
}

// AddEndpoint adds an endpoint for rc taking events (none: all), and has
// rc trust its secret.
func (s *Server) AddEndpoint(rc *testkit.Receiver, events ...string) domain.WebhookEndpoint {
	s.T.Helper()
	terms, err := manage.NewEndpointTerms(rc.URL(), events)
	if err != nil {
		s.T.Fatal(err)
	}
	e, err := s.Store().AddWebhookEndpoint(context.Background(), terms, Actor, s.Env)
	if err != nil {
		s.T.Fatal(err)
	}
	rc.Trust(e.Secret)
	return e
}

// From sends GET target with key to the public handler from the client
// address addr (HOST:PORT).
func (s *Server) From(addr, target, key string, header ...string) *httptest.ResponseRecorder {
	return testkit.FromPeer(s.Handler(), addr, target, key, header...)
}

// WithWebhooks is o with --webhook-allow-private: webhooks may go to the
// test's receivers on loopback.
func (o Options) WithWebhooks() Options {
	o.WebhookAllowPrivate = true
	return o
}

// DeliverDue makes the webhook attempts that are due now and waits for
// them.
func (s *Server) DeliverDue() { s.App.DeliverDue(context.Background()) }

// AddPets creates a pet of each status ("" for none) through the API with
// key and returns them as answered.
func (s *Server) AddPets(key string, statuses ...string) []testkit.Pet {
	s.T.Helper()
	return testkit.AddPets(s.T, s.Do, key, statuses...)
}
