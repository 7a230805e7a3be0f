package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
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
