package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"petstore/internal/servertest"
)

func TestKeysCreateAndUpdateSetAndClearAnExternalID(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		db := opts.DBAt(t, filepath.Join(t.TempDir(), "keys.db"))
		mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "free", "--external-id", "acct_1")
		mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", "free")
		externalIDs := func() string {
			var ids []string
			for _, k := range listKeysJSON(t, viaRun, db) {
				id := ""
				if k.ExternalID != nil {
					id = *k.ExternalID
				}
				ids = append(ids, fmt.Sprintf("%d=%s", k.ID, id))
			}
			return strings.Join(ids, " ")
		}
		if got := externalIDs(); got != "1=acct_1 2=" {
			t.Fatalf("keys list after keys create: %s, want 1=acct_1 2=", got)
		}
		res := viaRun(t, nil, "keys", "create", "--db", db, "--plan", "free", "--external-id", "acct_1")
		wantFailure(t, res, 1)
		if !strings.Contains(res.Stderr, `externalId "acct_1" belongs to key 1 already`) {
			t.Errorf("keys create with a taken externalId: %q", res.Stderr)
		}
		steps := []struct {
			args []string
			code int
			want string
		}{
			{[]string{"2", "--external-id", "acct_1"}, 1, "1=acct_1 2="},
			{[]string{"2", "--external-id", "acct_2"}, 0, "1=acct_1 2=acct_2"},
			{[]string{"1", "--external-id", ""}, 0, "1= 2=acct_2"},
			{[]string{"2", "--external-id", "acct_1", "--name", "moved"}, 0, "1= 2=acct_1"},
			{[]string{"2", "--external-id", "caf\xe9"}, 2, "1= 2=acct_1"},
		}
		for _, st := range steps {
			res := viaRun(t, nil, append([]string{"keys", "update", "--db", db}, st.args...)...)
			if res.Code != st.code {
				t.Errorf("keys update %q: exit status %d, want %d\n%s", st.args, res.Code, st.code, res.Stderr)
			}
			if got := externalIDs(); got != st.want {
				t.Errorf("after keys update %q: %s, want %s", st.args, got, st.want)
			}
		}
	})
}
