package main

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/server"
	"petstore/internal/servertest"
	"petstore/internal/testkit"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestAdminListenerServesMetricsBesideThePublicOneAndShutsDown(t *testing.T) {
	t.Parallel()
	p := runServing(t, map[string]string{"PETSTORE_ADMIN_ADDR": "127.0.0.1:0"},
		"--addr", "127.0.0.1:0", "--db", t.TempDir()+"/petstore.db")
	public, stderr := p.url, p.stderr
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	testkit.WaitHealthy(t, client, public)
	adminAt := testkit.AdminServing.FindStringSubmatch(stderr.String())
	if adminAt == nil {
		t.Fatalf("no admin= address on the serving line:\n%s", stderr)
	}
	admin := "http://" + adminAt[1]
	if admin == public {
		t.Fatalf("admin and public listeners share %s", admin)
	}

	get := func(url string) (int, string) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	get(public + "/v1/pets") // a 401
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		if code, _ := get(public + path); code != http.StatusNotFound {
			t.Errorf("public GET %s: %d, want 404", path, code)
		}
		if code, _ := get(admin + path); code != http.StatusOK {
			t.Errorf("admin GET %s: %d, want 200", path, code)
		}
	}
	_, text := get(admin + "/metrics")
	families, err := func() (map[string]*dto.MetricFamily, error) {
		p := expfmt.NewTextParser(model.UTF8Validation)
		return p.TextToMetricFamilies(strings.NewReader(text))
	}()
	if err != nil {
		t.Fatal(err)
	}
	counts := testkit.RequestCounts(t, families)
	if counts["GET /v1/pets 401"] != 1 || counts["GET / 404"] != 2 {
		t.Errorf("request counts %v, want the public 401 once and the public 404s of /metrics and /debug/pprof/", counts)
	}
	if families["petstore_auth_failures_total"] == nil {
		t.Errorf("no petstore_auth_failures_total in:\n%s", text)
	}
	if created := testkit.CounterValues(t, families, "petstore_audit_events_total", "action")[domain.AuditKeyCreated]; created != 1 {
		t.Errorf("petstore_audit_events_total{action=%q} = %v, want the bootstrap key's 1", domain.AuditKeyCreated, created)
	}

	p.stop(t)
	if _, err := client.Get(admin + "/metrics"); err == nil {
		t.Error("the admin listener still answers after shutdown")
	}
}

func TestWithoutAdminAddrNothingListensBesideThePublicAddress(t *testing.T) {
	t.Parallel()
	p := runServing(t, nil, "--addr", "127.0.0.1:0", "--db", t.TempDir()+"/petstore.db")
	if testkit.AdminServing.MatchString(p.stderr.String()) {
		t.Errorf("an admin listener was started without --admin-addr:\n%s", p.stderr)
	}
}

func TestMetricsCountWhatEachClientWasAnswered(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		m := server.NewMetrics(server.ReadBuildInfo().Metrics())
		opts.Metrics, opts.BanAfter = m, 3
		s := servertest.Start(t, opts)
		ctx := context.Background()
		pro := s.MustCreateKey("pro")
		free := s.MustCreateKey("free")
		revoked := s.MustCreateKey("free")
		hash := domain.HashKey(revoked)
		rk, _, err := s.Store().KeyByHash(ctx, hash[:])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Store().RevokeKey(ctx, rk.ID, servertest.Actor); err != nil {
			t.Fatal(err)
		}
		terms := s.KeyTerms("free")
		terms.ExpiresAt = s.Clock.Now().Add(-time.Second)
		_, expired := s.MustCreate(terms)
		if err := s.Keys().Refresh(ctx); err != nil {
			t.Fatal(err)
		}

		// What the client saw, counted as the metrics should count it.
		answered := map[string]uint64{}
		decisions := map[string]float64{}
		send := func(method, target, route, authorization, body string, wantStatus int) {
			t.Helper()
			var header []string
			if authorization != "" {
				header = []string{"Authorization", authorization}
			}
			w := s.Do(method, target, "", body, header...)
			if wantStatus != 0 && w.Code != wantStatus {
				t.Fatalf("%s %s: %d, want %d: %s", method, target, w.Code, wantStatus, w.Body)
			}
			label := method
			if !slices.Contains([]string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}, method) {
				label = "other"
			}
			answered[label+" "+route+" "+strconv.Itoa(w.Code)]++
			if !strings.HasPrefix(route, "/v1") {
				return // not rate limited
			}
			switch {
			case w.Code != http.StatusTooManyRequests:
				decisions["allowed"]++
			case strings.Contains(w.Body.String(), `"temporarily_banned"`):
				decisions["banned"]++
			default:
				decisions["limited"]++
			}
		}
		bearer := func(key string) string { return "Bearer " + key }

		tests := []struct {
			name          string
			method        string
			target        string
			route         string
			authorization string
			body          string
			times         int
			wantStatus    int
		}{
			{"list", "GET", "/v1/pets", "/v1/pets", bearer(pro), "", 5, 200},
			{"list as HEAD", "HEAD", "/v1/pets", "/v1/pets", bearer(pro), "", 1, 200},
			{"create", "POST", "/v1/pets", "/v1/pets", bearer(pro), `{"name":"Rex","categoryId":1}`, 2, 201},
			{"bad limit", "GET", "/v1/pets?limit=0", "/v1/pets", bearer(pro), "", 3, 400},
			{"get", "GET", "/v1/pets/1", "/v1/pets/{petId}", bearer(pro), "", 2, 200},
			{"bad pet id", "GET", "/v1/pets/abc", "/v1/pets/{petId}", bearer(pro), "", 1, 400},
			{"unknown pet", "GET", "/v1/pets/999", "/v1/pets/{petId}", bearer(pro), "", 1, 404},
			{"method not allowed", "DELETE", "/v1/pets", "/v1/pets", bearer(pro), "", 1, 405},
			{"unknown method", "BREW", "/v1/pets", "/v1/pets", bearer(pro), "", 1, 405},
			{"unknown path", "GET", "/v1/nothing/here", "/v1/", bearer(pro), "", 1, 404},
			{"no key", "GET", "/v1/pets", "/v1/pets", "", "", 2, 401},
			{"nothing after Bearer", "GET", "/v1/pets", "/v1/pets", "Bearer ", "", 1, 401},
			{"another scheme", "GET", "/v1/pets", "/v1/pets", "Basic dXNlcjpwYXNz", "", 1, 401},
			{"not a key", "GET", "/v1/pets", "/v1/pets", "Bearer psk_live_abc", "", 1, 401},
			{"unknown key", "GET", "/v1/pets", "/v1/pets", bearer(domain.NewKeyToken("production")), "", 3, 401},
			{"revoked key", "GET", "/v1/pets/1", "/v1/pets/{petId}", bearer(revoked), "", 1, 401},
			{"staging key", "GET", "/v1/pets", "/v1/pets", bearer(domain.NewKeyToken("staging")), "", 1, 401},
			{"expired key", "GET", "/v1/pets", "/v1/pets", bearer(expired), "", 2, 401},
			{"own limits, spending nothing", "GET", "/v1/rate_limit", "/v1/rate_limit", bearer(pro), "", 2, 200},
			{"document without a key", "GET", "/v1/openapi.yaml", "/v1/openapi.yaml", "", "", 1, 200},
			{"outside /v1", "GET", "/nothing", "/", "", "", 1, 404},
			{"a Free key's minute", "GET", "/v1/pets", "/v1/pets", bearer(free), "", 60, 200},
			// Then 429 rate_limited: the first refusal and banAfter (3) more
			// during the wait; then 429 temporarily_banned.
			{"over the limit", "GET", "/v1/pets", "/v1/pets", bearer(free), "", 10, 429},
			{"own limits while banned", "GET", "/v1/rate_limit", "/v1/rate_limit", bearer(free), "", 1, 429},
		}
		for _, tt := range tests {
			for range tt.times {
				send(tt.method, tt.target, tt.route, tt.authorization, tt.body, tt.wantStatus)
			}
		}
		if decisions["limited"] != 4 || decisions["banned"] != 7 {
			t.Fatalf("the client saw %v limited and %v banned, want 4 and 7", decisions["limited"], decisions["banned"])
		}

		families := testkit.Scrape(t, m.Handler())
		got := testkit.RequestCounts(t, families)
		for series, n := range answered {
			if got[series] != n {
				t.Errorf("request_duration count{%s} = %d, want %d", series, got[series], n)
			}
		}
		for series, n := range got {
			if _, ok := answered[series]; !ok {
				t.Errorf("request_duration count{%s} = %d, and no such request was sent", series, n)
			}
		}
		if got["other /v1/pets 405"] != 1 {
			t.Errorf("a made-up method is not counted as method=\"other\": %v", got)
		}

		gotDecisions := testkit.CounterValues(t, families, "petstore_ratelimit_decisions_total", "decision")
		for _, d := range []string{"allowed", "limited", "banned"} {
			if gotDecisions[d] != decisions[d] {
				t.Errorf("ratelimit_decisions_total{decision=%q} = %v, want %v", d, gotDecisions[d], decisions[d])
			}
		}

		wantFailures := map[string]float64{
			"missing": 3, "malformed": 2, "invalid": 3, "revoked": 1, "wrong_environment": 1, "expired": 2,
		}
		gotFailures := testkit.CounterValues(t, families, "petstore_auth_failures_total", "reason")
		if len(gotFailures) != len(wantFailures) {
			t.Errorf("auth_failures_total reasons %v, want exactly %v", gotFailures, wantFailures)
		}
		var failures float64
		for reason, n := range wantFailures {
			failures += n
			if gotFailures[reason] != n {
				t.Errorf("auth_failures_total{reason=%q} = %v, want %v", reason, gotFailures[reason], n)
			}
		}
		var answered401 uint64
		for series, n := range answered {
			if strings.HasSuffix(series, " 401") {
				answered401 += n
			}
		}
		if failures != float64(answered401) {
			t.Errorf("auth failures add up to %v, and %d requests were answered 401", failures, answered401)
		}

		if pets := families["petstore_pets"]; pets == nil || pets.GetMetric()[0].GetGauge().GetValue() != 2 {
			t.Errorf("petstore_pets = %v, want the 2 pets created", pets)
		}
	})
}
