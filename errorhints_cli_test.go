package main

// Errors that point to the fix: a refusal names the mistake made, and
// where the thing asked for is to be found.

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestKeysUpdateExpiresListsNeverAmongTheForms(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "keys.db")
	mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "free", "--name", "acme")
	id := strconv.FormatInt(keyIDByNameVia(t, viaRun, db, "acme"), 10)
	res := viaRun(t, nil, "keys", "update", "--db", db, id, "--expires", "nevr")
	wantFailure(t, res, 2)
	for _, form := range []string{"RFC 3339", "duration", "never"} {
		if !strings.Contains(res.stderr, form) {
			t.Errorf("keys update --expires nevr: standard error %q does not list %s", res.stderr, form)
		}
	}
	// keys create has no never to give: a key without --expires never expires.
	res = viaRun(t, nil, "keys", "create", "--db", db, "--plan", "free", "--expires", "nevr")
	wantFailure(t, res, 2)
	if strings.Contains(res.stderr, "or never") {
		t.Errorf("keys create --expires nevr offers never: %q", res.stderr)
	}
}
