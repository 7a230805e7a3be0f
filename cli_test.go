package main

// Black-box tests of the command line, as the README ("Command line") and
// docs/production.md describe it: run() as main calls it, and the built
// binary as a user runs it. The binary tests are skipped with -short.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/manage"
	"petstore/internal/servertest"
	"petstore/internal/store"
	"petstore/internal/testkit"
)

var (
	cliKeyPattern = map[string]*regexp.Regexp{
		"production": regexp.MustCompile(`^psk_live_[0-9A-Za-z]{38}$`),
		"staging":    regexp.MustCompile(`^psk_test_[0-9A-Za-z]{38}$`),
	}
)

// One-shot commands.

// cliResult is what one command line did, run either way.
type cliResult = testkit.Result

// cliRunner runs one petstore command line (without the program name) with
// env as its only PETSTORE_* variables.
type cliRunner func(t *testing.T, env map[string]string, args ...string) cliResult

// viaRun runs the command in this process, through run and the exit status
// main would pick. Paths must be absolute: the working directory is the
// repository.
func viaRun(t *testing.T, env map[string]string, args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	getenv := func(name string) string { return env[name] }
	args = withTestRedis(t, args)
	err := run(context.Background(), append([]string{"petstore"}, args...), getenv, strings.NewReader(""), &stdout, &stderr)
	code := exitCode(err, &stderr)
	return cliResult{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
}

// withTestRedis adds --redis with the tests' Redis to a serve command line
// on PostgreSQL that has none, as PostgreSQL needs one.
func withTestRedis(t *testing.T, args []string) []string {
	t.Helper()
	i := slices.Index(args, "--db")
	serve := len(args) > 0 && (args[0] == "serve" || strings.HasPrefix(args[0], "-"))
	if !serve || i < 0 || i+1 == len(args) || !store.IsPostgresURL(args[i+1]) || slices.Contains(args, "--redis") {
		return args
	}
	return append(slices.Clone(args), "--redis", testkit.RedisURL(t))
}

// viaBinary runs the built binary in a fresh working directory.
func viaBinary(t *testing.T, env map[string]string, args ...string) cliResult {
	t.Helper()
	return testkit.RunPetstore(t, t.TempDir(), env, args...)
}

// viaRunOnly runs test with run(), as main calls it, in a parallel subtest.
// What the binary adds to run() (the exit status, standard error, the
// environment and its own working directory) is
// TestTheBinaryAnswersAsRunDoes's: a process per command line costs a
// second of CPU for every dozen, and these suites run hundreds.
func viaRunOnly(t *testing.T, test func(t *testing.T, petstore cliRunner)) {
	t.Run("run", func(t *testing.T) {
		t.Parallel()
		test(t, viaRun)
	})
}

// petstoreCmd runs the binary with args, as a second process beside a
// running server.
func petstoreCmd(t *testing.T, args ...string) cliResult {
	t.Helper()
	return viaBinary(t, nil, args...)
}

// mustCreateKeyCLI runs keys create with args and returns the key.
func mustCreateKeyCLI(t *testing.T, petstore cliRunner, args ...string) string {
	t.Helper()
	res := petstore(t, nil, append([]string{"keys", "create"}, args...)...)
	if res.Code != 0 {
		t.Fatalf("keys create %s: exit status %d\n%s", strings.Join(args, " "), res.Code, res.Stderr)
	}
	return strings.TrimSpace(res.Stdout)
}

// cliListColumns are the columns of the keys list table, in order: the
// first seven as the README ("Command line") names them, then the key's lifetime.
var cliListColumns = []string{"id", "name", "plan", "per_minute", "per_day", "created", "revoked", "expires", "last_used", "today", "state", "scopes"}

// listKeysJSON runs keys list --json, with args (its fields are pinned by
// TestKeysListNeverShowsKeys).
func listKeysJSON(t *testing.T, petstore cliRunner, db string, args ...string) []manage.ListedKey {
	t.Helper()
	res := petstore(t, nil, append([]string{"keys", "list", "--db", db, "--json"}, args...)...)
	if res.Code != 0 {
		t.Fatalf("keys list --json: exit status %d\n%s", res.Code, res.Stderr)
	}
	var keys []manage.ListedKey
	if err := json.Unmarshal([]byte(res.Stdout), &keys); err != nil {
		t.Fatalf("keys list --json: %v\n%s", err, res.Stdout)
	}
	return keys
}

func keyIDByName(t *testing.T, db, name string) int64 {
	t.Helper()
	return keyIDByNameVia(t, viaBinary, db, name)
}

// keyIDByNameVia is the id of the key called name, from keys list run by
// petstore.
func keyIDByNameVia(t *testing.T, petstore cliRunner, db, name string) int64 {
	t.Helper()
	for _, k := range listKeysJSON(t, petstore, db) {
		if k.Name == name {
			return k.ID
		}
	}
	t.Fatalf("keys list has no key named %q", name)
	return 0
}

// wantFailure checks a failed command (testkit.WantFailure).
func wantFailure(t *testing.T, res cliResult, code int) {
	t.Helper()
	testkit.WantFailure(t, res.Stdout, res.Stderr, res.Code, code)
}

// A running server.

// startPetstore starts the binary in dir with args (launchPetstore), and
// returns once it serves.
func startPetstore(t *testing.T, dir string, args ...string) *testkit.Petstore {
	t.Helper()
	return launchPetstore(t, dir, args...).Served()
}

// launchPetstore starts the binary as startPetstore does, and returns at once.
func launchPetstore(t *testing.T, dir string, args ...string) *testkit.Petstore {
	t.Helper()
	return launchPetstoreBinary(t, testkit.PetstoreBinary(t), dir, nil, args...)
}

// launchPetstoreBinary is testkit.LaunchPetstore with the tests' Redis
// added to a serve command line on PostgreSQL (withTestRedis).
func launchPetstoreBinary(t *testing.T, bin, dir string, env map[string]string, args ...string) *testkit.Petstore {
	t.Helper()
	return testkit.LaunchPetstore(t, bin, dir, env, withTestRedis(t, args)...)
}

// keys create

// keysCreateInProcess runs keys create with args on a new database, in
// this process, and hands test what it did.
func keysCreateInProcess(t *testing.T, args []string, test func(t *testing.T, petstore cliRunner, db string, res cliResult)) {
	t.Helper()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		db := filepath.Join(t.TempDir(), "keys.db")
		test(t, petstore, db, petstore(t, nil, append([]string{"keys", "create", "--db", db}, args...)...))
	})
}

func TestKeysCreatePrintsOnlyTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		env      string
		wantName string
		wantPlan string
		wantRPM  int64
		wantRPD  int64
	}{
		{"free", []string{"--plan", "free"}, "production", "", "free", 60, 1_000},
		{"pro", []string{"--plan", "pro"}, "production", "", "pro", 300, 10_000},
		{"business", []string{"--plan", "business"}, "production", "", "business", 1_000, 100_000},
		{"enterprise with --rpm and --rpd", []string{"--plan", "enterprise", "--rpm", "5", "--rpd", "10"}, "production", "", "enterprise", 5, 10},
		{"with a name", []string{"--plan", "pro", "--name", "billing-job"}, "production", "billing-job", "pro", 300, 10_000},
		{"staging", []string{"--plan", "free", "--env", "staging"}, "staging", "", "free", 60, 1_000},
		{"flags in any order", []string{"--name", "x", "--env", "production", "--plan", "business"}, "production", "x", "business", 1_000, 100_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			keysCreateInProcess(t, tt.args, func(t *testing.T, petstore cliRunner, db string, res cliResult) {
				if res.Code != 0 {
					t.Fatalf("exit status %d\n%s", res.Code, res.Stderr)
				}
				key := strings.TrimSuffix(res.Stdout, "\n")
				if !strings.HasSuffix(res.Stdout, "\n") || strings.Contains(key, "\n") {
					t.Errorf("standard output %q, want the key alone on one line", res.Stdout)
				}
				if !cliKeyPattern[tt.env].MatchString(key) {
					t.Errorf("key %q does not match %s", key, cliKeyPattern[tt.env])
				}
				keys := listKeysJSON(t, petstore, db, "--env", tt.env)
				if len(keys) != 1 {
					t.Fatalf("keys list shows %d keys, want 1: %+v", len(keys), keys)
				}
				k := keys[0]
				if k.Name != tt.wantName || k.Plan != tt.wantPlan || k.PerMinute != tt.wantRPM || k.PerDay != tt.wantRPD || k.Revoked != nil {
					t.Errorf("keys list shows %+v, want name %q, plan %s, %d/minute, %d/day, not revoked",
						k, tt.wantName, tt.wantPlan, tt.wantRPM, tt.wantRPD)
				}
				again := mustCreateKeyCLI(t, petstore, append([]string{"--db", db}, tt.args...)...)
				if again == key {
					t.Errorf("two keys created are the same: %s", key)
				}
			})
		})
	}
}

func TestKeysCreateRefusesBadCommandLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
	}{
		{"unknown plan", []string{"--plan", "gold"}},
		{"missing --plan", nil},
		{"unknown flag", []string{"--plan", "free", "--colour", "blue"}},
		{"enterprise without --rpm and --rpd", []string{"--plan", "enterprise"}},
		{"enterprise without --rpd", []string{"--plan", "enterprise", "--rpm", "100"}},
		{"enterprise with --rpm 0", []string{"--plan", "enterprise", "--rpm", "0", "--rpd", "10"}},
		{"enterprise with --rpm not a number", []string{"--plan", "enterprise", "--rpm", "lots", "--rpd", "10"}},
		{"free with --rpm", []string{"--plan", "free", "--rpm", "100"}},
		{"pro with --rpd", []string{"--plan", "pro", "--rpd", "5"}},
		{"business with --rpm and --rpd", []string{"--plan", "business", "--rpm", "5", "--rpd", "5"}},
		{"unknown --env", []string{"--plan", "free", "--env", "dev"}},
		{"an argument", []string{"--plan", "free", "extra"}},
		{"--plan without its value", []string{"--plan"}},
		{"a name that holds a key", []string{"--plan", "free", "--name", "psk_live_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			keysCreateInProcess(t, tt.args, func(t *testing.T, petstore cliRunner, db string, res cliResult) {
				wantFailure(t, res, 2)
				testkit.WantNoFile(t, db)
			})
		})
	}
}

func TestKeysCreateInMissingDirectoryFails(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		missing := filepath.Join(t.TempDir(), "no", "such")
		res := petstore(t, nil, "keys", "create", "--db", filepath.Join(missing, "petstore.db"), "--plan", "free")
		wantFailure(t, res, 1)
		testkit.WantNoFile(t, filepath.Dir(missing))
	})
}

func TestKeysCreateReadsEnvironment(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		dir := t.TempDir()
		create := func(env map[string]string, args ...string) string {
			t.Helper()
			res := petstore(t, env, append([]string{"keys", "create"}, args...)...)
			if res.Code != 0 {
				t.Fatalf("keys create %v with %v: exit status %d\n%s", args, env, res.Code, res.Stderr)
			}
			return strings.TrimSpace(res.Stdout)
		}
		onlyKey := func(db string) manage.ListedKey {
			t.Helper()
			keys := listKeysJSON(t, petstore, db)
			if len(keys) != 1 {
				t.Fatalf("%s holds %d keys, want 1", db, len(keys))
			}
			return keys[0]
		}

		t.Run("PETSTORE_DB", func(t *testing.T) {
			db := filepath.Join(dir, "from-env.db")
			create(map[string]string{"PETSTORE_DB": db}, "--plan", "free")
			if k := onlyKey(db); k.Plan != "free" {
				t.Errorf("plan %q, want free", k.Plan)
			}
		})
		t.Run("PETSTORE_PLAN", func(t *testing.T) {
			db := filepath.Join(dir, "plan-env.db")
			create(map[string]string{"PETSTORE_PLAN": "pro"}, "--db", db)
			if k := onlyKey(db); k.Plan != "pro" || k.PerMinute != 300 {
				t.Errorf("got %+v, want the pro plan", k)
			}
		})
		t.Run("PETSTORE_ENV", func(t *testing.T) {
			db := filepath.Join(dir, "env-env.db")
			key := create(map[string]string{"PETSTORE_ENV": "staging"}, "--db", db, "--plan", "free")
			if !cliKeyPattern["staging"].MatchString(key) {
				t.Errorf("key %q, want a psk_test_ key", key)
			}
		})
		t.Run("PETSTORE_RPM and PETSTORE_RPD", func(t *testing.T) {
			db := filepath.Join(dir, "limits-env.db")
			create(map[string]string{"PETSTORE_RPM": "7", "PETSTORE_RPD": "70"}, "--db", db, "--plan", "enterprise")
			if k := onlyKey(db); k.PerMinute != 7 || k.PerDay != 70 {
				t.Errorf("got %+v, want 7/minute and 70/day", k)
			}
		})
		t.Run("--plan wins over PETSTORE_PLAN", func(t *testing.T) {
			db := filepath.Join(dir, "plan-flag.db")
			create(map[string]string{"PETSTORE_PLAN": "pro"}, "--db", db, "--plan", "business")
			if k := onlyKey(db); k.Plan != "business" {
				t.Errorf("plan %q, want business", k.Plan)
			}
		})
		t.Run("--db wins over PETSTORE_DB", func(t *testing.T) {
			fromEnv, fromFlag := filepath.Join(dir, "db-env.db"), filepath.Join(dir, "db-flag.db")
			create(map[string]string{"PETSTORE_DB": fromEnv}, "--db", fromFlag, "--plan", "free")
			onlyKey(fromFlag)
			testkit.WantNoFile(t, fromEnv)
		})
		t.Run("unknown plan in PETSTORE_PLAN", func(t *testing.T) {
			db := filepath.Join(dir, "bad-env.db")
			wantFailure(t, petstore(t, map[string]string{"PETSTORE_PLAN": "gold"}, "keys", "create", "--db", db), 2)
			testkit.WantNoFile(t, db)
		})
	})
}

// keys list and keys revoke

func TestKeysListNeverShowsKeys(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
			db := opts.DBAt(t, filepath.Join(t.TempDir(), "keys.db"))
			tokens := []string{
				mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "free", "--name", "alpha"),
				mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "enterprise", "--rpm", "7", "--rpd", "70"),
				mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "pro", "--name", "gamma"),
			}
			keys := listKeysJSON(t, petstore, db)
			if len(keys) != 3 {
				t.Fatalf("keys list --json: %d keys, want 3", len(keys))
			}
			res := petstore(t, nil, "keys", "revoke", "--db", db, strconv.FormatInt(keys[2].ID, 10))
			if res.Code != 0 {
				t.Fatalf("keys revoke: exit status %d\n%s", res.Code, res.Stderr)
			}

			table := petstore(t, nil, "keys", "list", "--db", db)
			if table.Code != 0 {
				t.Fatalf("keys list: exit status %d\n%s", table.Code, table.Stderr)
			}
			jsonOut := petstore(t, nil, "keys", "list", "--db", db, "--json")
			for _, out := range []string{table.Stdout, table.Stderr, jsonOut.Stdout, jsonOut.Stderr} {
				for _, token := range tokens {
					sum := sha256.Sum256([]byte(token))
					for _, secret := range []string{token, hex.EncodeToString(sum[:]), base64.StdEncoding.EncodeToString(sum[:])} {
						if strings.Contains(strings.ToLower(out), strings.ToLower(secret)) {
							t.Errorf("keys list shows a key or its hash %s:\n%s", secret, out)
						}
					}
				}
			}

			t.Run("table", func(t *testing.T) {
				lines := strings.Split(strings.TrimSuffix(table.Stdout, "\n"), "\n")
				if len(lines) != 4 {
					t.Fatalf("%d lines, want a header and 3 keys:\n%s", len(lines), table.Stdout)
				}
				header := strings.Fields(lines[0])
				if !slices.EqualFunc(header, cliListColumns, strings.EqualFold) {
					t.Errorf("header %q, want the columns %q", lines[0], cliListColumns)
				}
				want := [][]string{
					{strconv.FormatInt(keys[0].ID, 10), "alpha", "free", "60", "1000"},
					{strconv.FormatInt(keys[1].ID, 10), "", "enterprise", "7", "70"},
					{strconv.FormatInt(keys[2].ID, 10), "gamma", "pro", "300", "10000"},
				}
				var revoked, states []string
				for i, line := range lines[1:] {
					f := strings.Fields(line)
					if len(f) != len(cliListColumns) {
						t.Errorf("line %q has %d columns, want %d (%s)", line, len(f), len(cliListColumns), strings.Join(cliListColumns, ", "))
						continue
					}
					w := want[i]
					if f[0] != w[0] || (w[1] != "" && f[1] != w[1]) || f[2] != w[2] || f[3] != w[3] || f[4] != w[4] {
						t.Errorf("line %q, want it to start %q", line, strings.Join(w, " "))
					}
					revoked = append(revoked, f[6])
					states = append(states, f[10])
				}
				if len(revoked) == 3 && (revoked[0] != revoked[1] || revoked[2] == revoked[0]) {
					t.Errorf("revoked column %q: want the two active keys alike and the revoked one different", revoked)
				}
				if want := []string{"active", "active", "revoked"}; len(states) == 3 && !slices.Equal(states, want) {
					t.Errorf("state column %q, want %q", states, want)
				}
			})

			t.Run("json", func(t *testing.T) {
				var raw []map[string]any
				testkit.DecodeJSON(t, jsonOut.Stdout, &raw)
				wantFields := []string{"created", "expires", "externalId", "id", "lastUsed", "name", "perDay", "perMinute", "plan", "revoked", "rolledFrom", "rolledTo", "scopes", "state", "today"}
				for _, obj := range raw {
					var got []string
					for f := range obj {
						got = append(got, f)
					}
					slices.Sort(got)
					if !slices.Equal(got, wantFields) {
						t.Errorf("fields %q, want %q", got, wantFields)
					}
				}
				want := []struct {
					name, plan string
					rpm, rpd   int64
					revoked    bool
				}{
					{"alpha", "free", 60, 1000, false},
					{"", "enterprise", 7, 70, false},
					{"gamma", "pro", 300, 10000, true},
				}
				keys := listKeysJSON(t, petstore, db)
				if len(keys) != len(want) {
					t.Fatalf("%d keys, want %d", len(keys), len(want))
				}
				for i, k := range keys {
					w := want[i]
					if k.Name != w.name || k.Plan != w.plan || k.PerMinute != w.rpm || k.PerDay != w.rpd || (k.Revoked != nil) != w.revoked {
						t.Errorf("key %d: %+v, want %+v", i, k, w)
					}
					if since := time.Since(k.Created); since < -time.Minute || since > time.Minute {
						t.Errorf("key %d created %v, want about now", i, k.Created)
					}
				}
			})
		})
	})
}

func TestKeysRevoke(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
			db := opts.DBAt(t, filepath.Join(t.TempDir(), "keys.db"))
			mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "free", "--name", "keep")
			mustCreateKeyCLI(t, petstore, "--db", db, "--plan", "free", "--name", "drop")
			keys := listKeysJSON(t, petstore, db)

			t.Run("a known key", func(t *testing.T) {
				res := petstore(t, nil, "keys", "revoke", "--db", db, strconv.FormatInt(keys[1].ID, 10))
				if res.Code != 0 {
					t.Fatalf("exit status %d\n%s", res.Code, res.Stderr)
				}
				after := listKeysJSON(t, petstore, db)
				if after[0].Revoked != nil || after[1].Revoked == nil {
					t.Errorf("after revoking key %d: %+v", keys[1].ID, after)
				}
			})
			t.Run("an unknown id", func(t *testing.T) {
				wantFailure(t, petstore(t, nil, "keys", "revoke", "--db", db, "999"), 1)
			})
			t.Run("an id that is not a number", func(t *testing.T) {
				wantFailure(t, petstore(t, nil, "keys", "revoke", "--db", db, "alpha"), 2)
			})
			t.Run("no id", func(t *testing.T) {
				wantFailure(t, petstore(t, nil, "keys", "revoke", "--db", db), 2)
			})
			if after := listKeysJSON(t, petstore, db); after[0].Revoked != nil {
				t.Errorf("key %d was revoked by a failed command", after[0].ID)
			}
		})
	})
}

func TestCommandsOnMissingDatabaseFail(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		dir := t.TempDir()
		db := filepath.Join(dir, "missing.db")
		for _, tt := range []struct {
			name string
			args []string
		}{
			{"keys list", []string{"keys", "list", "--db", db}},
			{"keys list --json", []string{"keys", "list", "--db", db, "--json"}},
			{"keys revoke", []string{"keys", "revoke", "--db", db, "1"}},
			{"backup", []string{"backup", "--db", db, "--out", filepath.Join(dir, "copy.db")}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				wantFailure(t, petstore(t, nil, tt.args...), 1)
				testkit.WantNoFile(t, db)
				testkit.WantNoFile(t, filepath.Join(dir, "copy.db"))
			})
		}
	})
}

func TestVersion(t *testing.T) {
	t.Parallel()
	viaRunOnly(t, func(t *testing.T, petstore cliRunner) {
		for _, args := range [][]string{{"version"}, {"--version"}} {
			res := petstore(t, nil, args...)
			if res.Code != 0 {
				t.Errorf("petstore %s: exit status %d\n%s", args[0], res.Code, res.Stderr)
			}
			migrations := fmt.Sprintf(", %d migrations\n", len(store.Migrations))
			if !strings.HasPrefix(res.Stdout, "petstore ") || strings.Count(res.Stdout, "\n") != 1 || !strings.HasSuffix(res.Stdout, migrations) {
				t.Errorf("petstore %s printed %q, want one line starting \"petstore \" and ending %q", args[0], res.Stdout, migrations)
			}
		}
	})
}

// TestServingLineNamesTheVersionAndCommit: an operator reading a fleet's
// logs sees which build each server runs, as petstore version says it.
func TestServingLineNamesTheVersionAndCommit(t *testing.T) {
	t.Parallel()
	version := viaBinary(t, nil, "version").Stdout // petstore VERSION (COMMIT TIME) GO, N migrations
	fields := strings.Fields(version)
	if len(fields) < 2 {
		t.Fatalf("petstore version printed %q", version)
	}
	want := "version=" + fields[1] + " commit=unknown"
	if len(fields) > 2 && strings.HasPrefix(fields[2], "(") {
		want = "version=" + fields[1] + " commit=" + strings.TrimPrefix(fields[2], "(")
	}
	dir := t.TempDir()
	p := startPetstore(t, dir, "serve", "--db", filepath.Join(dir, "petstore.db"))
	serving := regexp.MustCompile(`(?m)^.*msg=serving .*$`).FindString(p.Stderr.String())
	if !strings.HasSuffix(serving, want) {
		t.Errorf("the serving line %q does not end %q (petstore version: %q)", serving, want, version)
	}
}

// run() as a server in this process.

// inProcess is run() serving in this process.
type inProcess struct {
	url    string // the public listener
	stderr *testkit.SyncBuffer
	cancel context.CancelFunc
	exited chan struct{}
	err    error // what run returned, once exited is closed
}

// runServing starts run with args (after the program name) and env as its
// only environment, and returns once it serves.
func runServing(t *testing.T, env map[string]string, args ...string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{stderr: &testkit.SyncBuffer{}, cancel: cancel, exited: make(chan struct{})}
	// Not the working directory, which is the source tree.
	keyFile := filepath.Join(t.TempDir(), "petstore.bootstrap-key")
	go func() {
		p.err = run(ctx, append([]string{"petstore"}, args...), func(name string) string {
			if v, ok := env[name]; ok || name != "PETSTORE_BOOTSTRAP_KEY_FILE" {
				return v
			}
			return keyFile
		}, strings.NewReader(""), io.Discard, p.stderr)
		close(p.exited)
	}()
	t.Cleanup(func() { cancel(); <-p.exited }) // before the database's directory goes
	p.url = testkit.WaitServing(t, p.stderr, p.exited)
	return p
}

// stop ends run as a signal would, and wants it to return nil at once.
func (p *inProcess) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	select {
	case <-p.exited:
		if p.err != nil {
			t.Errorf("run returned %v after its context ended, want nil", p.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run still serving 10 s after its context ended")
	}
}

func TestRunServesUntilContextEnds(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		db := opts.DBAt(t, filepath.Join(t.TempDir(), "petstore.db"))
		p := runServing(t, nil, withTestRedis(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db})...)
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
		defer client.CloseIdleConnections()
		testkit.WaitHealthy(t, client, p.url)

		key := testkit.BootstrapKeyIn(t, p.stderr.String())
		if !cliKeyPattern["production"].MatchString(key) {
			t.Fatalf("no bootstrap key in the file standard error names:\n%s", p.stderr)
		}
		req, _ := http.NewRequest("GET", p.url+"/v1/pets", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /v1/pets with the bootstrap key: %d, want 200", resp.StatusCode)
		}

		p.stop(t)
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			if strings.HasPrefix(line, "time=") && testkit.AnyKey.MatchString(line) {
				t.Errorf("a log line holds an API key: %s", line)
			}
		}
	})
}

// The binary as a server.

// Standard error is a pipe here, as under systemd or in a container, where
// it is a kept log: the key goes to a file of its own, and the log names it.
func TestFirstStartWritesOneBootstrapKeyToAFileOnlyItsOwnerReads(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, dir, db string) {
		s := startPetstore(t, dir, "--db", db) // serve is the default command

		if printed := testkit.AnyKey.FindAllString(s.Stderr.String(), -1); len(printed) > 0 {
			t.Errorf("the first start printed keys %q on standard error, which is not a terminal:\n%s", printed, s.Stderr)
		}
		want := filepath.Join(dir, "petstore.bootstrap-key") // PostgreSQL: the working directory
		if !strings.HasPrefix(db, "postgres") {
			want = db + ".bootstrap-key"
		}
		if m := testkit.BootstrapFile.FindStringSubmatch(s.Stderr.String()); m == nil || m[1] != want {
			t.Fatalf("the log names the key's file as %q, want %s:\n%s", m, want, s.Stderr)
		}
		if info, err := os.Stat(want); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("the key's file: %v, %v; want mode 0600", info.Mode(), err)
		}
		key := s.Bootstrap
		if !cliKeyPattern["production"].MatchString(key) {
			t.Errorf("bootstrap key %q does not match %s", key, cliKeyPattern["production"])
		}
		if _, body := s.WantStatus("GET", "/v1/pets", key, "", http.StatusOK); strings.TrimSpace(body) != "[]" {
			t.Errorf("GET /v1/pets on an empty store: %s, want []", body)
		}
		// One character changed: the checksum no longer matches.
		typo := []byte(key)
		if i := len("psk_live_"); typo[i] == 'A' {
			typo[i] = 'B'
		} else {
			typo[i] = 'A'
		}
		s.WantStatus("GET", "/v1/pets", string(typo), "", http.StatusUnauthorized)

		keys := listKeysJSON(t, viaBinary, db)
		if len(keys) != 1 || keys[0].Name != "bootstrap" || keys[0].Plan != "free" {
			t.Errorf("keys list after the first start: %+v, want one free key named bootstrap", keys)
		}
		if code := s.Stop(syscall.SIGTERM); code != 0 {
			t.Errorf("exit status %d after SIGTERM, want 0", code)
		}

		if err := os.Remove(want); err != nil { // as the README says: read it, then delete it
			t.Fatal(err)
		}
		again := startPetstore(t, dir, "--db", db)
		if got := testkit.AnyKey.FindAllString(again.Stderr.String(), -1); len(got) > 0 || again.Bootstrap != "" {
			t.Errorf("the second start printed keys %q or wrote one, want none:\n%s", got, again.Stderr)
		}
		if _, err := os.Stat(want); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the second start wrote the key's file again: %v", err)
		}
		again.WantStatus("GET", "/v1/pets", key, "", http.StatusOK)
		if keys := listKeysJSON(t, viaBinary, db); len(keys) != 1 {
			t.Errorf("the second start made another key: %+v", keys)
		}
	})
}

func TestKeyCreatedWhileServingWorksAtOnce(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, dir, db string) {
		s := startPetstore(t, dir, "serve", "--db", db)
		s.WantStatus("GET", "/v1/pets", s.Bootstrap, "", http.StatusOK)

		for _, args := range [][]string{
			{"--plan", "pro", "--name", "new-pro"},
			{"--plan", "enterprise", "--rpm", "50", "--rpd", "500", "--name", "new-enterprise"},
		} {
			key := mustCreateKeyCLI(t, viaBinary, append([]string{"--db", db}, args...)...)
			s.WantStatus("GET", "/v1/pets", key, "", http.StatusOK) // the first try, no retry
			s.WantStatus("POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`, http.StatusCreated)
		}
	})
}

func TestRevokeWhileServingTakesEffectWithinOneSecond(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, dir, db string) {
		s := startPetstore(t, dir, "serve", "--db", db)
		key := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "pro", "--name", "doomed")
		s.WantStatus("GET", "/v1/pets", key, "", http.StatusOK)
		id := keyIDByName(t, db, "doomed")

		res := petstoreCmd(t, "keys", "revoke", "--db", db, strconv.FormatInt(id, 10))
		revoked := time.Now()
		if res.Code != 0 {
			t.Fatalf("keys revoke: exit status %d\n%s", res.Code, res.Stderr)
		}
		testkit.Eventually(t, 5*time.Second, "the revoked key refused", func() bool {
			resp, body := s.Request("GET", "/v1/pets", key, "")
			if resp.StatusCode == http.StatusOK {
				return false
			}
			if took := time.Since(revoked); took >= time.Second {
				t.Errorf("the revoked key was refused %v after keys revoke returned, want within 1 s", took)
			}
			servertest.WantError(t, testkit.Recorded(resp, body), http.StatusUnauthorized, httpapi.CodeUnauthorized)
			return true
		})
		s.WantStatus("GET", "/v1/pets", s.Bootstrap, "", http.StatusOK) // other keys still work
	})
}

func TestAcknowledgedPetsSurviveKill9(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, dir, db string) {
		key := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "enterprise", "--rpm", "100000", "--rpd", "1000000")
		s := startPetstore(t, dir, "serve", "--db", db)

		statuses := []string{"available", "pending", "sold", ""}
		var acked []map[string]any
		for i := range 50 {
			body := fmt.Sprintf(`{"name":"pet %d","categoryId":%d`, i, i+1)
			if st := statuses[i%len(statuses)]; st != "" {
				body += `,"status":"` + st + `"`
			}
			body += "}"
			_, got := s.WantStatus("POST", "/v1/pets", key, body, http.StatusCreated)
			var pet map[string]any
			testkit.DecodeJSON(t, got, &pet)
			want := map[string]any{"id": pet["id"], "name": fmt.Sprintf("pet %d", i), "categoryId": float64(i + 1)}
			if st := statuses[i%len(statuses)]; st != "" {
				want["status"] = st
			}
			if !reflect.DeepEqual(pet, want) {
				t.Fatalf("POST %s answered %s", body, got)
			}
			acked = append(acked, pet)
		}
		s.Kill9()

		again := startPetstore(t, dir, "serve", "--db", db)
		for _, want := range acked {
			_, got := again.WantStatus("GET", fmt.Sprintf("/v1/pets/%.0f", want["id"]), key, "", http.StatusOK)
			var pet map[string]any
			testkit.DecodeJSON(t, got, &pet)
			if !reflect.DeepEqual(pet, want) {
				t.Errorf("after kill -9: pet %s, want %v", got, want)
			}
		}
		_, got := again.WantStatus("GET", "/v1/pets?limit=100", key, "", http.StatusOK)
		var list []map[string]any
		testkit.DecodeJSON(t, got, &list)
		if !reflect.DeepEqual(list, acked) {
			t.Errorf("after kill -9, GET /v1/pets?limit=100 = %s\nwant the %d pets acknowledged", got, len(acked))
		}
	})
}

func TestGracefulShutdownFinishesRequestsInFlight(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		t.Parallel()
		for _, sig := range []os.Signal{syscall.SIGTERM, syscall.SIGINT} {
			t.Run(sig.String(), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				db := opts.DBAt(t, filepath.Join(dir, "petstore.db"))
				s := startPetstore(t, dir, "serve", "--db", db)
				host := strings.TrimPrefix(s.URL, "http://")

				// Each request sends its headers with Expect: 100-continue; the
				// server says 100 Continue once the handler reads the body, so
				// the request is certainly in flight when the signal comes.
				const inFlight = 5
				type pending struct {
					conn net.Conn
					r    *bufio.Reader
					body string
				}
				var reqs []pending
				for i := range inFlight {
					conn, err := net.DialTimeout("tcp", host, 5*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { conn.Close() })
					conn.SetDeadline(time.Now().Add(20 * time.Second))
					body := fmt.Sprintf(`{"name":"in flight %d","categoryId":%d}`, i, i+1)
					fmt.Fprintf(conn, "POST /v1/pets HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
						"Content-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
						host, s.Bootstrap, len(body))
					r := bufio.NewReader(conn)
					resp, err := http.ReadResponse(r, nil)
					if err != nil || resp.StatusCode != http.StatusContinue {
						t.Fatalf("request %d: want 100 Continue, got %v, %v", i, resp, err)
					}
					reqs = append(reqs, pending{conn, r, body})
				}

				if err := s.Cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				// Shutting down: new connections are refused...
				testkit.Eventually(t, 5*time.Second, fmt.Sprintf("new connections refused after %v", sig), func() bool {
					c, err := net.DialTimeout("tcp", host, time.Second)
					if err == nil {
						c.Close()
					}
					return err != nil
				})
				// ...but the process waits for the requests in flight.
				select {
				case <-s.Exited:
					t.Fatalf("exited (status %d) with %d requests in flight:\n%s", s.ExitCode, inFlight, s.Stderr)
				default:
				}
				for i, p := range reqs {
					if _, err := io.WriteString(p.conn, p.body); err != nil {
						t.Errorf("request %d: sending the body: %v", i, err)
						continue
					}
					resp, err := http.ReadResponse(p.r, nil)
					if err != nil {
						t.Errorf("request %d: no response: %v", i, err)
						continue
					}
					got, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusCreated {
						t.Errorf("request %d: %d %s (%v), want 201", i, resp.StatusCode, got, err)
					}
				}
				if code := s.Wait(); code != 0 {
					t.Errorf("exit status %d after %v, want 0:\n%s", code, sig, s.Stderr)
				}

				again := startPetstore(t, dir, "serve", "--db", db)
				_, got := again.WantStatus("GET", "/v1/pets", s.Bootstrap, "", http.StatusOK)
				var pets []struct{ Name string }
				testkit.DecodeJSON(t, got, &pets)
				if len(pets) != inFlight {
					t.Errorf("after the shutdown the store holds %s, want the %d pets answered 201", got, inFlight)
				}
			})
		}
	})
}

// startWithDefaultDB starts a server of env without --db in a new
// directory, and wants it to make file there (not other) and print a
// bootstrap key of env that works.
func startWithDefaultDB(t *testing.T, env, file, other string, args ...string) (dir string, s *testkit.Petstore) {
	t.Helper()
	dir = t.TempDir()
	s = startPetstore(t, dir, append([]string{"serve"}, args...)...)
	if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
		t.Errorf("%s did not use %s in its working directory: %v", env, file, err)
	}
	testkit.WantNoFile(t, filepath.Join(dir, other))
	if !cliKeyPattern[env].MatchString(s.Bootstrap) {
		t.Errorf("%s bootstrap key %q, want a %s key", env, s.Bootstrap, domain.KeyPrefixes[env])
	}
	s.WantStatus("GET", "/v1/pets", s.Bootstrap, "", http.StatusOK)
	return dir, s
}

func TestStagingAndProductionKeepApart(t *testing.T) {
	t.Parallel()
	t.Run("staging", func(t *testing.T) {
		t.Parallel()
		dir, s := startWithDefaultDB(t, "staging", "petstore-staging.db", "petstore.db", "--env", "staging")

		// keys create --env staging finds the same default file.
		res := testkit.RunPetstore(t, dir, nil, "keys", "create", "--env", "staging", "--plan", "free")
		if res.Code != 0 {
			t.Fatalf("keys create --env staging without --db: exit status %d\n%s", res.Code, res.Stderr)
		}
		s.WantStatus("GET", "/v1/pets", strings.TrimSpace(res.Stdout), "", http.StatusOK)
		// A production key is refused even when it is in staging's own database.
		live := mustCreateKeyCLI(t, viaBinary, "--db", filepath.Join(dir, "petstore-staging.db"), "--env", "production", "--plan", "free")
		if !cliKeyPattern["production"].MatchString(live) {
			t.Fatalf("keys create --env production made %q", live)
		}
		_, body := s.WantStatus("GET", "/v1/pets", live, "", http.StatusUnauthorized)
		if !strings.Contains(body, `"unauthorized"`) {
			t.Errorf("body %s, want code unauthorized", body)
		}
	})
	t.Run("production", func(t *testing.T) {
		t.Parallel()
		dir, s := startWithDefaultDB(t, "production", "petstore.db", "petstore-staging.db")
		test := mustCreateKeyCLI(t, viaBinary, "--db", filepath.Join(dir, "petstore.db"), "--env", "staging", "--plan", "free")
		s.WantStatus("GET", "/v1/pets", test, "", http.StatusUnauthorized)
	})
}

func TestBackupWhileServing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "petstore.db")
	s := startPetstore(t, dir, "serve", "--db", db)
	key := s.Bootstrap
	for i := range 5 {
		s.WantStatus("POST", "/v1/pets", key, fmt.Sprintf(`{"name":"before %d","categoryId":%d,"status":"available"}`, i, i+1), http.StatusCreated)
	}
	_, before := s.WantStatus("GET", "/v1/pets?limit=100", key, "", http.StatusOK)

	out := filepath.Join(dir, "copy.db")
	if res := petstoreCmd(t, "backup", "--db", db, "--out", out); res.Code != 0 || res.Stdout != "" {
		t.Fatalf("backup: exit status %d, stdout %q\n%s", res.Code, res.Stdout, res.Stderr)
	}
	s.WantStatus("POST", "/v1/pets", key, `{"name":"after","categoryId":9}`, http.StatusCreated)

	copied := startPetstore(t, dir, "serve", "--db", out)
	if copied.Bootstrap != "" {
		t.Errorf("the copy has no keys: its server printed a bootstrap key")
	}
	_, got := copied.WantStatus("GET", "/v1/pets?limit=100", key, "", http.StatusOK)
	var want, have []map[string]any
	testkit.DecodeJSON(t, before, &want)
	testkit.DecodeJSON(t, got, &have)
	if len(want) != 5 || !reflect.DeepEqual(have, want) {
		t.Errorf("pets in the copy: %s\nwant those at the time of the backup: %s", got, before)
	}

	t.Run("to an existing file", func(t *testing.T) {
		wantFailure(t, petstoreCmd(t, "backup", "--db", db, "--out", out), 1)
		_, again := copied.WantStatus("GET", "/v1/pets?limit=100", key, "", http.StatusOK)
		if again != got {
			t.Errorf("the existing file changed: %s, was %s", again, got)
		}
	})
	t.Run("without --out", func(t *testing.T) {
		wantFailure(t, petstoreCmd(t, "backup", "--db", db), 2)
	})
}

func TestDailyUsageSurvivesRestart(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		if now := time.Now().UTC(); now.Add(30*time.Second).Day() != now.Day() {
			t.Skip("too close to UTC midnight: the day's quota is about to start afresh")
		}
		dir := t.TempDir()
		db := opts.DBAt(t, filepath.Join(dir, "petstore.db"))
		// 1000 per minute and 7 per day: the day is the window that binds.
		key := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "enterprise", "--rpm", "1000", "--rpd", "7")
		remaining := func(resp *http.Response) string { return resp.Header.Get("X-RateLimit-Remaining") }

		s := startPetstore(t, dir, "serve", "--db", db)
		for i := 1; i <= 5; i++ {
			resp, _ := s.WantStatus("GET", "/v1/pets", key, "", http.StatusOK)
			if got, want := remaining(resp), strconv.Itoa(7-i); got != want {
				t.Errorf("request %d: X-RateLimit-Remaining %s, want %s", i, got, want)
			}
		}
		if code := s.Stop(syscall.SIGTERM); code != 0 {
			t.Fatalf("exit status %d after SIGTERM, want 0", code)
		}

		again := startPetstore(t, dir, "serve", "--db", db)
		resp, _ := again.WantStatus("GET", "/v1/pets", key, "", http.StatusOK)
		if got := remaining(resp); got != "1" {
			t.Errorf("6th request, after the restart: X-RateLimit-Remaining %s, want 1 (5 of 7 spent before it)", got)
		}
		if got := resp.Header.Get("X-RateLimit-Limit"); got != "7" {
			t.Errorf("X-RateLimit-Limit %s, want 7 (the day binds)", got)
		}
		resp, _ = again.WantStatus("GET", "/v1/pets", key, "", http.StatusOK)
		if got := remaining(resp); got != "0" {
			t.Errorf("7th request: X-RateLimit-Remaining %s, want 0", got)
		}
		resp, body := again.Request("GET", "/v1/pets", key, "")
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, `"rate_limited"`) {
			t.Errorf("8th request: %d %s, want 429 rate_limited", resp.StatusCode, body)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Error("8th request: no Retry-After")
		}
	})
}
