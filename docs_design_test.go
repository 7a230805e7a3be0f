package main

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/design.md stays true: its table of packages names every package of
// the module and no other, with what allowedImports lets each import; each
// package's own tests sit beside it; the README names every test that
// starts a browser.

// withoutOwnTests are the packages whose code is tested only through
// others' suites (the binary's, the server's), as docs/design.md says.
// A package that gains tests of its own leaves the list.
var withoutOwnTests = []string{"internal/store/bounded", "internal/servertest", "bench/ceiling"}

// designTable reads the rows of docs/design.md's table of packages: each
// package with the packages of the project it may import, as written.
func designTable(t *testing.T) map[string][]string {
	t.Helper()
	page := docPages(t)["docs/design.md"]
	_, table, ok := strings.Cut(page, "## The packages\n")
	if !ok {
		t.Fatal("docs/design.md has no section The packages")
	}
	table, _, _ = strings.Cut(table, "\n\n`")
	rows := map[string][]string{}
	name := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		pkg := name.FindStringSubmatch(cells[0])[1]
		var imports []string
		for _, m := range name.FindAllStringSubmatch(cells[len(cells)-1], -1) {
			imports = append(imports, "internal/"+m[1])
		}
		rows[pkg] = imports
	}
	return rows
}

func TestDesignTableNamesEveryPackageWithItsImports(t *testing.T) {
	rows := designTable(t)
	if len(rows) < 15 {
		t.Fatalf("read %d rows of docs/design.md's table of packages: the reading missed them", len(rows))
	}
	code, _ := moduleImports(t)
	for dir := range code {
		if _, ok := rows[dir]; !ok {
			t.Errorf("docs/design.md's table has no row for %s", dir)
		}
	}
	for pkg, imports := range rows {
		if _, ok := code[pkg]; !ok {
			t.Errorf("docs/design.md's table names %s, which is no package", pkg)
			continue
		}
		if pkg == "." {
			continue // "every package below"
		}
		want := slices.Sorted(slices.Values(allowedImports[pkg]))
		if got := slices.Sorted(slices.Values(imports)); !slices.Equal(got, want) {
			t.Errorf("docs/design.md: %s may import %v; allowedImports says %v", pkg, got, want)
		}
	}
}

func TestEachPackagesTestsSitBesideIt(t *testing.T) {
	code, _ := moduleImports(t)
	for dir := range code {
		tests, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		switch listed := slices.Contains(withoutOwnTests, dir); {
		case len(tests) == 0 && !listed:
			t.Errorf("%s has no tests beside it", dir)
		case len(tests) > 0 && listed:
			t.Errorf("%s has tests beside it now: take it off withoutOwnTests and docs/design.md's list", dir)
		}
	}
	page := docPages(t)["docs/design.md"]
	for _, dir := range withoutOwnTests {
		if !strings.Contains(page, "`"+dir+"`") {
			t.Errorf("docs/design.md does not name %s among the packages without tests of their own", dir)
		}
	}
}

func TestREADMENamesEveryBrowserTest(t *testing.T) {
	readme := docPages(t)["README.md"]
	found := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") || path == "docs_design_test.go" {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && (strings.Contains(string(b), "startBrowser(") || strings.Contains(string(b), "openConsole(")) {
			found[filepath.ToSlash(path)] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 2 {
		t.Fatalf("found %d browser tests: the walk missed them", len(found))
	}
	for _, path := range slices.Sorted(maps.Keys(found)) {
		if !strings.Contains(readme, "`"+path+"`") {
			t.Errorf("README.md's table of tests does not name %s, which starts a browser", path)
		}
	}
}
