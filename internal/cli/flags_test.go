package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

// The one flag parser every command shares: flags and arguments in any
// order, each flag not on the command line taken from PETSTORE_<FLAG>, and
// every mistake a UsageError (exit status 2) that says what to look at.

// parsed is what a command with --db, --admin-addr, --limit and a
// repeated --scope read from args and env.
type parsed struct {
	positional []string
	db, admin  string
	limit      int
	scopes     []string
}

func parseWith(args []string, env map[string]string, help io.Writer) (parsed, error) {
	var p parsed
	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	fs.StringVar(&p.db, "db", "default.db", "the database")
	fs.StringVar(&p.admin, "admin-addr", "", "the admin listener")
	fs.IntVar(&p.limit, "limit", 10, "how many")
	scopes := repeatedFlag(fs, "scope", "a scope, again for more")
	rest, err := ParseFlags(fs, args, func(name string) string { return env[name] }, help)
	p.positional, p.scopes = rest, *scopes
	return p, err
}

func TestParseFlagsTakesTheCommandLineThenTheEnvironment(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want parsed
	}{
		{"nothing given: the defaults", nil, nil,
			parsed{db: "default.db", limit: 10}},
		{"flags and arguments in any order", []string{"a", "--db", "x.db", "b", "--limit=3", "c"}, nil,
			parsed{positional: []string{"a", "b", "c"}, db: "x.db", limit: 3}},
		{"a flag not given is read from the environment", nil, map[string]string{"PETSTORE_DB": "env.db", "PETSTORE_LIMIT": "7"},
			parsed{db: "env.db", limit: 7}},
		{"a hyphen in the flag is an underscore in the variable", nil, map[string]string{"PETSTORE_ADMIN_ADDR": "127.0.0.1:9090"},
			parsed{db: "default.db", admin: "127.0.0.1:9090", limit: 10}},
		{"the command line wins over the environment", []string{"--db", "cli.db"}, map[string]string{"PETSTORE_DB": "env.db"},
			parsed{db: "cli.db", limit: 10}},
		{"a flag given empty stays empty", []string{"--db", ""}, map[string]string{"PETSTORE_DB": "env.db"},
			parsed{limit: 10}},
		{"an empty variable is no value", nil, map[string]string{"PETSTORE_DB": ""},
			parsed{db: "default.db", limit: 10}},
		{"a repeated flag keeps every value in order", []string{"--scope", "pets:read", "x", "--scope", "pets:write,keys:read"}, nil,
			parsed{positional: []string{"x"}, db: "default.db", limit: 10, scopes: []string{"pets:read", "pets:write,keys:read"}}},
		{"a repeated flag not given takes one value from the environment", nil, map[string]string{"PETSTORE_SCOPE": "pets:read"},
			parsed{db: "default.db", limit: 10, scopes: []string{"pets:read"}}},
		{"a repeated flag given ignores the environment", []string{"--scope", "keys:read"}, map[string]string{"PETSTORE_SCOPE": "pets:read"},
			parsed{db: "default.db", limit: 10, scopes: []string{"keys:read"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseWith(tt.args, tt.env, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.positional, tt.want.positional) || !slices.Equal(got.scopes, tt.want.scopes) ||
				got.db != tt.want.db || got.admin != tt.want.admin || got.limit != tt.want.limit {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseFlagsMistakesAreUsageErrorsSayingWhere(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"an unknown flag", []string{"--nope"}, nil,
			"cmd: flag provided but not defined: -nope (see petstore cmd -h)"},
		{"a bad value on the command line", []string{"--limit", "many"}, nil,
			`cmd: invalid value "many" for flag -limit: parse error (see petstore cmd -h)`},
		{"a flag without its value", []string{"x", "--db"}, nil,
			"cmd: flag needs an argument: -db (see petstore cmd -h)"},
		{"a bad value in the environment names the variable", nil, map[string]string{"PETSTORE_LIMIT": "many"},
			`PETSTORE_LIMIT="many": parse error`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseWith(tt.args, tt.env, io.Discard)
			var usage *UsageError
			if !errors.As(err, &usage) {
				t.Fatalf("got %v (%T), want a *UsageError", err, err)
			}
			if err.Error() != tt.want {
				t.Errorf("got %q, want %q", err, tt.want)
			}
		})
	}
}

// -h prints the flags on standard output and is no mistake: the command
// ends with ErrHelp, exit status 0.
func TestParseFlagsHelpPrintsTheFlags(t *testing.T) {
	var help strings.Builder
	_, err := parseWith([]string{"x", "-h"}, nil, &help)
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("got %v, want ErrHelp", err)
	}
	for _, want := range []string{"usage of petstore cmd:\n", "-admin-addr", "-db", "-limit", "-scope"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("help %q does not show %q", help.String(), want)
		}
	}
}

func TestPetstoreVersionInTheEnvironmentIsNotTheVersionFlag(t *testing.T) {
	var version bool
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.BoolVar(&version, "version", false, "")
	getenv := func(name string) string {
		if name == "PETSTORE_VERSION" {
			return "2.1.0"
		}
		return ""
	}
	if _, err := ParseFlags(fs, nil, getenv, io.Discard); err != nil || version {
		t.Fatalf("PETSTORE_VERSION=2.1.0 gave err %v, version %v; want it ignored", err, version)
	}
}

// A UsageError says what Usagef was given, and is found through the
// errors that wrap it, as the root finds it for exit status 2.
func TestUsageErrorIsFoundThroughWrapping(t *testing.T) {
	err := fmt.Errorf("keys create: %w", Usagef("--plan %q is not a plan", "gold"))
	var usage *UsageError
	if !errors.As(err, &usage) {
		t.Fatalf("%v: no *UsageError found", err)
	}
	if got, want := usage.Error(), `--plan "gold" is not a plan`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if errors.As(errors.New("disk full"), &usage) {
		t.Error("a plain error was taken for a usage mistake")
	}
}

func TestDBFlagsCheckDefaultsTheFileByEnvironment(t *testing.T) {
	tests := []struct {
		name      string
		flags     DBFlags
		wantDB    string
		wantUsage string
	}{
		{"production's default file", DBFlags{Env: "production"}, "petstore.db", ""},
		{"staging's own default file", DBFlags{Env: "staging"}, "petstore-staging.db", ""},
		{"a file given is kept", DBFlags{Env: "staging", DB: "/data/s.db"}, "/data/s.db", ""},
		{"an unknown environment", DBFlags{Env: "dev"}, "", `--env must be production or staging, not "dev"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.flags
			err := d.Check()
			var usage *UsageError
			switch {
			case tt.wantUsage != "" && (!errors.As(err, &usage) || err.Error() != tt.wantUsage):
				t.Errorf("got %v, want the usage error %q", err, tt.wantUsage)
			case tt.wantUsage == "" && (err != nil || d.DB != tt.wantDB):
				t.Errorf("got %q, %v; want %q", d.DB, err, tt.wantDB)
			}
		})
	}
}

// Shown never prints a PostgreSQL password: output names the database
// by it.
func TestDBFlagsShownHidesThePassword(t *testing.T) {
	for db, want := range map[string]string{
		"petstore.db": "petstore.db",
		"postgres://app:s3cret@db.internal:5432/petstore": "postgres://app:xxxxx@db.internal:5432/petstore",
	} {
		d := DBFlags{DB: db}
		if got := d.Shown(); got != want {
			t.Errorf("Shown(%q) = %q, want %q", db, got, want)
		}
	}
}
