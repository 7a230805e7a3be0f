package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"petstore/internal/adminapi"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
)

// The admin listener answers a Host that is an IP address, localhost or a
// name of --admin-host, and refuses any other 421 in the Error shape,
// /metrics and the admin API alike: a page rebound to it by DNS sends its
// own name.
func TestAdminListenerAnswersOnlyItsOwnHostNames(t *testing.T) {
	s := newTestServerWith(t, testOptions{metrics: newMetrics()})
	s.adminHosts = []string{"petstore-admin", "admin.internal"}
	s.adminHandler = newAdminServer(s.app)
	token := s.mustCreateAdmin("portal", domain.AllAdminScopes)
	doc := readAdminOpenAPI(t)
	tests := []struct {
		host     string
		accepted bool
	}{
		{"127.0.0.1", true},
		{"127.0.0.1:9090", true},
		{"10.0.0.5:9090", true},
		{"[::1]", true},
		{"[::1]:9090", true},
		{"::1", true},
		{"[fe80::1%25eth0]:9090", true},
		{"localhost", true},
		{"localhost:9090", true},
		{"LOCALHOST:9090", true},
		{"localhost.", true},
		{"petstore-admin", true},
		{"petstore-admin:9090", true},
		{"Admin.Internal:9090", true},
		{"admin.internal.", true},

		{"", false},
		{"rebind.example", false},
		{"rebind.example:9090", false},
		{"localhost.rebind.example:9090", false},
		{"127.0.0.1.nip.io:9090", false},
		{"petstore-admin.rebind.example", false},
		{"internal", false},
		{"2130706433:9090", false}, // 127.0.0.1 as a number: a name here, not an address
		{"[rebind.example]:9090", false},
	}
	for _, tc := range tests {
		if got := adminapi.HostAllowed(tc.host, s.adminHosts); got != tc.accepted {
			t.Errorf("Host %q: accepted %v, want %v", tc.host, got, tc.accepted)
		}
		for _, target := range []string{"/metrics", "/admin/v1/keys"} {
			req := httptest.NewRequest("GET", target, nil)
			req.Host = tc.host
			req.Header.Set("Authorization", "Bearer "+token)
			w := httptest.NewRecorder()
			s.adminHandler.ServeHTTP(w, req)
			switch {
			case tc.accepted && w.Code != http.StatusOK:
				t.Errorf("GET %s with Host %q: HTTP status %d, want 200; body: %.200s", target, tc.host, w.Code, w.Body)
			case !tc.accepted:
				wantError(t, w, http.StatusMisdirectedRequest, httpapi.CodeMisdirectedRequest, "--admin-host")
				if target == "/admin/v1/keys" {
					doc.checkAnswer(t, "listKeys", w)
				}
			}
		}
	}
}

func TestAdminHostFlagTakesNamesWithoutAPort(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--admin-host", "petstore-admin"}, // no admin listener to name
		{"serve", "--admin-addr", "127.0.0.1:0", "--admin-host", "petstore-admin:9090"},
	} {
		res := viaRun(t, nil, args...)
		wantFailure(t, res, 2)
		if !strings.Contains(res.stderr, "--admin-host") {
			t.Errorf("petstore %s: standard error %q does not name --admin-host", strings.Join(args, " "), res.stderr)
		}
	}
	for _, tc := range []struct {
		value string
		want  []string
	}{
		{"petstore-admin", []string{"petstore-admin"}},
		{"Admin.Internal., petstore-admin", []string{"admin.internal", "petstore-admin"}},
		{"admin.internal:9090", nil},
		{"http://admin.internal", nil},
		{"admin.internal,", nil},
		{"", nil},
	} {
		got, err := adminapi.ParseHosts(tc.value)
		if tc.want == nil && err == nil {
			t.Errorf("--admin-host %q is taken as %q", tc.value, got)
		}
		if tc.want != nil && (err != nil || strings.Join(got, ",") != strings.Join(tc.want, ",")) {
			t.Errorf("--admin-host %q: %q %v, want %q", tc.value, got, err, tc.want)
		}
	}
}

// The binary, with PETSTORE_ADMIN_HOST: a name of its own is answered, a
// rebinding page's name is refused, over TCP.
func TestAdminHostFromTheEnvironmentOverTCP(t *testing.T) {
	t.Parallel()
	p := runServing(t, map[string]string{"PETSTORE_ADMIN_ADDR": "127.0.0.1:0", "PETSTORE_ADMIN_HOST": "petstore-admin"},
		"--addr", "127.0.0.1:0", "--db", t.TempDir()+"/petstore.db")
	adminAt := cliAdmin.FindStringSubmatch(p.stderr.String())
	if adminAt == nil {
		t.Fatalf("no admin= address on the serving line:\n%s", p.stderr)
	}
	for _, tc := range []struct {
		host, want string
	}{
		{"petstore-admin:9090", "HTTP/1.1 200 "},
		{adminAt[1], "HTTP/1.1 200 "},
		{"rebind.example:9090", "HTTP/1.1 421 "},
	} {
		req := "GET /metrics HTTP/1.1\r\nHost: " + tc.host + "\r\nConnection: close\r\n\r\n"
		got, _, err := rawExchange(adminAt[1], req, 5*time.Second)
		if err != nil || !bytes.HasPrefix(got, []byte(tc.want)) {
			t.Errorf("GET /metrics with Host %s: %v %.80q, want %s", tc.host, err, got, tc.want)
		}
	}
	p.stop(t)
}
