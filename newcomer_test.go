package main

// What a newcomer hit in a first hour (issue 29): each is a small test.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestServeRefusesAnAddressWithoutAHostAsAUsageMistake(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, flag, addr, want string
	}{
		{"a bare port", "--addr", "8081", "give :8081"},
		{"not an address", "--addr", "localhost", "must be HOST:PORT"},
		{"a bare admin port", "--admin-addr", "9090", "give :9090"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := viaRun(t, nil, "serve", "--db", filepath.Join(t.TempDir(), "petstore.db"), tt.flag, tt.addr)
			wantFailure(t, res, 2)
			if !strings.Contains(res.stderr, tt.flag) || !strings.Contains(res.stderr, tt.want) {
				t.Errorf("standard error %q, want it to name %s and say %q", res.stderr, tt.flag, tt.want)
			}
		})
	}
}

func TestKeysCreateTakesThePlanInAnyCase(t *testing.T) {
	t.Parallel()
	for _, plan := range []string{"Pro", "PRO", "pro"} {
		t.Run(plan, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "keys.db")
			mustCreateKeyCLI(t, viaRun, "--db", db, "--plan", plan)
			if keys := listKeysJSON(t, viaRun, db); len(keys) != 1 || keys[0].Plan != "pro" || keys[0].PerMinute != 300 {
				t.Errorf("--plan %s made %+v, want one pro key (300 a minute)", plan, keys)
			}
		})
	}
}

// goModule is go.mod: the Go version it needs and its direct requirements.
func goModule(t *testing.T) (goVersion string, direct []string) {
	t.Helper()
	raw, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion = regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(string(raw))[1]
	for _, m := range regexp.MustCompile(`(?m)^\t(\S+) v\S+$`).FindAllStringSubmatch(string(raw), -1) {
		direct = append(direct, m[1])
	}
	return goVersion, direct
}

func TestREADMENamesTheGoVersionGoModNeeds(t *testing.T) {
	goVersion, _ := goModule(t)
	readme := docPages(t)["README.md"]
	if want := "Go " + goVersion + " or later"; !strings.Contains(readme, want) {
		t.Errorf("README.md does not say %q, which go.mod needs", want)
	}
	if !strings.Contains(readme, "about two minutes") {
		t.Error("README.md does not warn that the first build takes minutes")
	}
}

func TestDevelopmentNamesEveryDirectDependency(t *testing.T) {
	_, direct := goModule(t)
	deps := docPages(t)["docs/development.md"]
	at := strings.Index(deps, "## Dependencies")
	if at < 0 || len(direct) == 0 {
		t.Fatalf("no Dependencies section in docs/development.md, or no requirement in go.mod (%v)", direct)
	}
	deps = deps[at:]
	for _, module := range direct {
		if !strings.Contains(deps, module) {
			t.Errorf("docs/development.md's Dependencies do not name %s, a direct requirement of go.mod", module)
		}
	}
}
