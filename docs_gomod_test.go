package main

// The README and docs/development.md name what go.mod asks for: the Go
// version it needs and every direct dependency.

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

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
