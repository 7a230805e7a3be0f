package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/store"

	"petstore/internal/testkit"
)

// nameCases are names a person might give a key or an admin token: printable
// text is kept as written; anything that would hide, move or recolour text
// in a terminal, or is not UTF-8, or is too long, is refused.
var nameCases = []struct {
	name string
	text string
	ok   bool
}{
	{"empty (no name)", "", true},
	{"plain", "billing-job", true},
	{"with spaces", "billing job 2", true},
	{"40 Cyrillic letters", strings.Repeat("Ж", 40), true},
	{"64 characters", strings.Repeat("é", 64), true},
	{"an emoji", "cat 🐈 feeder", true},
	{"65 characters", strings.Repeat("a", 65), false},
	{"a newline", "a\nb", false},
	{"a tab", "a\tb", false},
	{"an escape sequence", "\x1b[31mred", false},
	{"DEL", "a\x7fb", false},
	{"a C1 control (CSI)", "a\u009bb", false},
	{"a bidi override", "abc\u202Etxt.exe", false},
	{"a zero-width space", "ad\u200Bmin", false},
	{"a zero-width joiner", "a\u200Db", false},
	{"a byte order mark", "\uFEFFbom", false},
	{"a line separator", "a\u2028b", false},
	{"a paragraph separator", "a\u2029b", false},
	{"invalid UTF-8", "caf\xe9", false},
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	for _, tt := range nameCases {
		t.Run(tt.name, func(t *testing.T) {
			err := domain.CheckName("--name", tt.text)
			if tt.ok && err != nil {
				t.Errorf("checkName(%q) = %v, want it accepted", tt.text, err)
			}
			if !tt.ok && (err == nil || !strings.Contains(err.Error(), "--name must be printable text of at most 64 characters")) {
				t.Errorf("checkName(%q) = %v, want an error naming the rule", tt.text, err)
			}
		})
	}
}

// TestKeysCreateNames: keys create keeps a printable name as written and
// refuses any other with exit status 2 naming the rule, before it touches
// the database.
func TestKeysCreateNames(t *testing.T) {
	t.Parallel()
	testkit.PetstoreBinary(t)
	for _, tt := range nameCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "keys.db")
			res := viaBinary(t, nil, "keys", "create", "--db", db, "--plan", "free", "--name", tt.text)
			if !tt.ok {
				wantFailure(t, res, 2)
				if !strings.Contains(res.Stderr, "--name must be printable text") {
					t.Errorf("standard error %q does not name the rule", res.Stderr)
				}
				testkit.WantNoFile(t, db)
				return
			}
			if res.Code != 0 {
				t.Fatalf("exit status %d\n%s", res.Code, res.Stderr)
			}
			if keys := listKeysJSON(t, viaBinary, db); len(keys) != 1 || keys[0].Name != tt.text {
				t.Errorf("keys list shows %+v, want one key named %q", keys, tt.text)
			}
		})
	}
}

// TestKeysListQuotesAnOldHiddenName: a name stored before names were
// checked is shown quoted by keys list, never raw into the terminal.
func TestKeysListQuotesAnOldHiddenName(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "keys.db")
	store, err := store.OpenSQLite(t.Context(), db, true, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := manage.CreateKey(t.Context(), store, domain.Key{Env: "production", Name: "evil\u202Etxt\x1b[2J", Plan: "free", PerMinute: 60, PerDay: 1000, Scopes: domain.AllScopes}, "test"); err != nil {
		t.Fatal(err)
	}
	store.Close()
	res := viaRun(t, nil, "keys", "list", "--db", db)
	if res.Code != 0 {
		t.Fatalf("keys list: exit status %d\n%s", res.Code, res.Stderr)
	}
	if strings.ContainsAny(res.Stdout, "\u202E\x1b") || !strings.Contains(res.Stdout, `"evil\u202etxt\x1b[2J"`) {
		t.Errorf("keys list shows the name raw or unquoted:\n%q", res.Stdout)
	}
}
