package server

// Errors that point to the fix: a refusal names the mistake made, and
// where the thing asked for is to be found.

import (
	"net/http"
	"strings"
	"testing"

	"petstore/internal/adminapi"
	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/keyring"
)

func TestAdmin401SaysWhichMistakeItIs(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	admin := s.mustCreateAdmin("portal", domain.AllAdminScopes)
	key := s.mustCreateKey("free")
	mistyped := admin[:len(admin)-1] + string(admin[len(admin)-1]^1)
	tests := []struct {
		name, authorization string
		reason              keyring.Reason
		mentions            string
	}{
		{"no Authorization header", "", keyring.Missing, "has no admin token"},
		{"Bearer and nothing after it", "Bearer ", keyring.Missing, "no admin token after it"},
		{"the token without Bearer", admin, keyring.Malformed, "without Bearer"},
		{"a bare word", "letmein", keyring.Malformed, "one word"},
		{"Basic authentication", "Basic cG9ydGFsOnNlY3JldA==", keyring.Malformed, "Basic"},
		{"another scheme", "Token " + admin, keyring.Malformed, "Bearer scheme"},
		{"a mistyped token", "Bearer " + mistyped, keyring.Malformed, "mistyped"},
		{"a token cut short", "Bearer " + admin[:20], keyring.Malformed, "cut short"},
		{"a staging token on production", "Bearer " + domain.NewSecret(domain.AdminPrefixes["staging"]), keyring.WrongEnvironment, "other environment"},
		{"a token of the right shape that does not exist", "Bearer " + domain.NewSecret(domain.AdminPrefixes["production"]), keyring.Invalid, "no such token"},
		{"a pet key", "Bearer " + key, keyring.Malformed, "psk_"},
		{"a pet key without Bearer", key, keyring.Malformed, "psk_"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, failure := adminapi.Credential(tc.authorization, "production")
			if tc.reason == keyring.Invalid {
				failure = adminapi.Unknown // only the database tells
			}
			if failure.Reason != tc.reason {
				t.Errorf("reason %s, want %s", keyring.ReasonNames[failure.Reason], keyring.ReasonNames[tc.reason])
			}
			w := s.admin("GET", "/admin/v1/keys", "", "", "Authorization", tc.authorization)
			wantError(t, w, http.StatusUnauthorized, httpapi.CodeUnauthorized, tc.mentions)
			if petKey := strings.Contains(tc.authorization, "psk_"); strings.Contains(w.Body.String(), "psk_") != petKey {
				t.Errorf("a pet key sent: %v; the answer mentions psk_: %v: %s", petKey, !petKey, w.Body)
			}
		})
	}
}

func TestAWrongListenerIsNamed(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	admin := s.mustCreateAdmin("portal", domain.AllAdminScopes)
	t.Run("an admin token on /v1", func(t *testing.T) {
		wantError(t, s.do("GET", "/v1/pets", admin, ""), http.StatusUnauthorized, httpapi.CodeUnauthorized, "admin token", "--admin-addr", "/admin/v1")
	})
	for _, target := range []string{"/admin/v1/keys", "/admin/v1", "/admin/v1/openapi.yaml"} {
		t.Run(target+" on the public listener", func(t *testing.T) {
			wantError(t, s.do("GET", target, admin, ""), http.StatusNotFound, httpapi.CodeNotFound, "--admin-addr")
		})
	}
	t.Run("another path on the public listener", func(t *testing.T) {
		w := s.do("GET", "/nothing", "", "")
		if wantError(t, w, http.StatusNotFound, httpapi.CodeNotFound); strings.Contains(w.Body.String(), "admin") {
			t.Errorf("an unknown path is sent to the admin listener: %s", w.Body)
		}
	})
}
