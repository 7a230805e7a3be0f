package publicapi_test

import (
	"net/http"
	"petstore/internal/domain"
	"petstore/internal/keyring"
	"petstore/internal/metrics"
	"petstore/internal/servertest"
	"petstore/internal/testkit"
	"testing"
)

// databaseCalls counts m's database calls by operation.
func databaseCalls(t *testing.T, m *metrics.Metrics) map[string]uint64 {
	t.Helper()
	calls := map[string]uint64{}
	for _, metric := range testkit.Scrape(t, m.Handler())["petstore_database_call_duration_seconds"].GetMetric() {
		calls[testkit.LabelsOf(metric)["operation"]] = metric.GetHistogram().GetSampleCount()
	}
	return calls
}

// Made-up keys with a valid checksum from one address (docs/api.md:
// the checksum, and the client address's limit before the 401): each is looked up in the database until the address is
// limited, and none after; the keys this server holds still work from that
// address (a shared NAT), and so does a key made since, after one reload.
func TestMadeUpKeysFromALimitedAddressCostNoLookUp(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		opts.Redis = opts.Postgres // as replica mode needs
		m := servertest.NewMetrics()
		opts.Metrics = m
		s := servertest.Start(t, opts)
		known := s.MustCreateKey("business")
		if err := s.Keys().Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}

		const flood = 2000
		answered := map[int]int{}
		before := databaseCalls(t, m)["KeyByHash"]
		for range flood {
			answered[s.Do("GET", "/v1/pets", domain.NewKeyToken("production"), "").Code]++
		}
		lookups := databaseCalls(t, m)["KeyByHash"] - before
		// The Free plan's minute for the address: 60 401s, then 429s.
		if answered[http.StatusUnauthorized] != 60 || answered[http.StatusTooManyRequests] != flood-60 {
			t.Fatalf("%d made-up keys answered %v, want 60 401s and the rest 429", flood, answered)
		}
		t.Logf("%d made-up keys from one address: %d key look-ups", flood, lookups)
		if lookups != 60 {
			t.Errorf("%d made-up keys from one address cost %d key look-ups, want 60: one for each until the address was limited", flood, lookups)
		}

		if w := s.Do("GET", "/v1/pets", known, ""); w.Code != http.StatusOK {
			t.Errorf("a key this server holds, from the banned address: %d %s, want 200", w.Code, w.Body)
		}
		// A key made since the keys were loaded: once the keyring's look
		// at the version is older than sharedRefreshAge, one reload finds
		// it, without a look-up.
		fresh := s.MustCreateKey("pro")
		s.Clock.Advance(keyring.SharedRefreshAge)
		before = databaseCalls(t, m)["KeyByHash"]
		if w := s.Do("GET", "/v1/pets", fresh, ""); w.Code != http.StatusOK {
			t.Errorf("a key made since the last reload, from the banned address: %d %s, want 200", w.Code, w.Body)
		}
		if n := databaseCalls(t, m)["KeyByHash"] - before; n != 0 {
			t.Errorf("the new key cost %d look-ups, want 0 (found by the reload)", n)
		}
		versions := databaseCalls(t, m)["KeysVersion"]
		for range 100 {
			s.Do("GET", "/v1/pets", domain.NewKeyToken("production"), "")
		}
		if n := databaseCalls(t, m)["KeysVersion"] - versions; n != 0 {
			t.Errorf("100 more made-up keys within %v read the keys' version %d times, want 0", keyring.SharedRefreshAge, n)
		}
	})
}
