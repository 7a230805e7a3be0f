package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"petstore/internal/adminapi"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
)

// The admin listener answers a Host that is an IP address, localhost or a
// name of --admin-host, and refuses any other 421 in the Error shape,
// /metrics and the admin API alike: a page rebound to it by DNS sends its
// own name.
func TestAdminListenerAnswersOnlyItsOwnHostNames(t *testing.T) {
	t.Parallel()
	s := newTestServerWith(t, testOptions{metrics: newMetrics()})
	s.adminHosts = []string{"petstore-admin", "admin.internal"}
	s.adminHandler = newAdminServer(s.App)
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
