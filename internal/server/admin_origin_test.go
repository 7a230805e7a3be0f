package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"petstore/internal/adminapi"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/testkit"
)

// The admin API answers no other origin's page: Sec-Fetch-Site cross-site
// or same-site, or an Origin not the listener's, is refused 403
// cross_origin before the token is looked at; a client that sends neither
// header (curl, petstore admin, a portal's server) and the console (same
// origin) are answered.
func TestAdminAPIRefusesAPageOfAnotherOriginAndAnswersItsOwn(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	token := s.mustCreateAdmin("owner", domain.AllAdminScopes)
	doc := readAdminOpenAPI(t)
	for _, tc := range []struct {
		name    string
		header  []string
		refused bool
	}{
		{"a client that is not a browser: no Sec-Fetch-Site, no Origin", nil, false},
		{"the console's own fetch", []string{"Sec-Fetch-Site", "same-origin"}, false},
		{"the console's own POST, with its Origin", []string{"Sec-Fetch-Site", "same-origin", "Origin", "http://localhost:9090"}, false},
		{"an address typed into the browser", []string{"Sec-Fetch-Site", "none"}, false},
		{"Origin the listener's, in capitals, from a browser without Sec-Fetch-Site", []string{"Origin", "HTTP://LOCALHOST:9090"}, false},
		{"Origin the listener's over https (a proxy in front ends TLS)", []string{"Origin", "https://localhost:9090"}, false},

		{"a page of another site", []string{"Sec-Fetch-Site", "cross-site"}, true},
		{"a page of another port on the same host", []string{"Sec-Fetch-Site", "same-site"}, true},
		{"Origin of another port", []string{"Origin", "http://localhost:9091"}, true},
		{"Origin of another host", []string{"Origin", "http://evil.example"}, true},
		{"Origin of the listener's host without its port", []string{"Origin", "http://localhost"}, true},
		{"Origin that is not a URL", []string{"Origin", "localhost:9090"}, true},
		{"Origin null (a sandboxed frame, a data: URL)", []string{"Origin", "null"}, true},
		{"same-origin said, another Origin sent", []string{"Sec-Fetch-Site", "same-origin", "Origin", "http://evil.example"}, true},
		{"a cross-site page with the listener's own Origin", []string{"Sec-Fetch-Site", "cross-site", "Origin", "http://localhost:9090"}, true},
	} {
		for _, rt := range []struct{ operation, method, target string }{
			{"whoami", "GET", "/admin/v1/whoami"},
			{"listKeys", "GET", "/admin/v1/keys"},
			{"createKey", "POST", "/admin/v1/keys"},
			{"getAdminOpenAPI", "GET", "/admin/v1/openapi.yaml"},
		} {
			body := ""
			if rt.method == "POST" {
				body = `{"plan":"free","name":"made from ` + rt.operation + `"}`
			}
			w := s.admin(rt.method, rt.target, token, body, tc.header...)
			if tc.refused {
				wantError(t, w, http.StatusForbidden, httpapi.CodeCrossOrigin, "another origin")
				doc.checkAnswer(t, rt.operation, w)
				continue
			}
			if w.Code >= 300 {
				t.Errorf("%s: %s %s: HTTP status %d, want it answered; body: %.300s", tc.name, rt.method, rt.target, w.Code, w.Body)
			}
		}
	}
}

// A request with no credential is refused 401 and never counted toward the
// address's ban: any web page can make a browser send one, from the
// owners' own address (127.0.0.1 behind an SSH tunnel). One that presents
// a credential, even an empty Bearer, is counted.
func TestAdminRequestsWithoutACredentialNeverBanTheAddress(t *testing.T) {
	t.Parallel()
	s := newTestServerWith(t, testOptions{banAfter: 2})
	token := s.mustCreateAdmin("owner", domain.AllAdminScopes)
	const owners = "127.0.0.1:50000"
	for i := range 3 * domain.AnonymousLimits.PerMinute {
		w := s.adminFrom(owners, "")
		wantError(t, w, http.StatusUnauthorized, httpapi.CodeUnauthorized, "no admin token")
		if i == 0 && w.Header().Get("WWW-Authenticate") != adminapi.Challenge {
			t.Errorf("WWW-Authenticate %q, want %q", w.Header().Get("WWW-Authenticate"), adminapi.Challenge)
		}
	}
	if w := s.adminFrom(owners, token); w.Code != http.StatusOK {
		t.Fatalf("the owner's token after %d requests without one from its address: HTTP status %d, want 200; body: %s",
			3*domain.AnonymousLimits.PerMinute, w.Code, w.Body)
	}
	const guesser = "198.51.100.7:4000"
	for range domain.AnonymousLimits.PerMinute + 5 {
		s.adminFrom(guesser, "", "Authorization", "Bearer ")
	}
	wantError(t, s.adminFrom(guesser, token), http.StatusTooManyRequests, httpapi.CodeTemporarilyBanned)
}

// adminFrom sends GET /admin/v1/keys to the admin listener's handler from
// the TCP peer addr, with token and the header's name, value pairs.
func (s *testServer) adminFrom(addr, token string, header ...string) *httptest.ResponseRecorder {
	return testkit.FromPeer(onAdminHost(s.adminHandler), addr, "/admin/v1/keys", token, header...)
}
