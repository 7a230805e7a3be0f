package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"petstore/internal/adminapi"

	"petstore/internal/testkit"
)

func TestAdminHostFlagTakesNamesWithoutAPort(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--admin-host", "petstore-admin"}, // no admin listener to name
		{"serve", "--admin-addr", "127.0.0.1:0", "--admin-host", "petstore-admin:9090"},
	} {
		res := viaRun(t, nil, args...)
		wantFailure(t, res, 2)
		if !strings.Contains(res.Stderr, "--admin-host") {
			t.Errorf("petstore %s: standard error %q does not name --admin-host", strings.Join(args, " "), res.Stderr)
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
	adminAt := testkit.AdminServing.FindStringSubmatch(p.stderr.String())
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
