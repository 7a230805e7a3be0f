package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The packages of the module and what each may import of it: the domain at
// the bottom, the root at the top, never an edge upward or sideways
// (docs/design.md). A package missing from this table fails the test, so
// that a new one says where it stands.
var allowedImports = map[string][]string{
	".":                      {"internal/domain", "internal/batch", "internal/appendjson", "internal/logline", "internal/webhook", "internal/limits", "internal/metrics", "internal/store", "internal/store/bounded", "internal/manage", "internal/cli", "internal/certs", "internal/keyring", "internal/petcopy", "internal/httpapi", "internal/adminapi", "internal/server", "internal/replicate", "internal/tracing"},
	"internal/domain":        nil,
	"internal/batch":         {"internal/tracing"},
	"internal/appendjson":    nil,
	"internal/logline":       {"internal/appendjson"},
	"internal/webhook":       {"internal/domain", "internal/tracing"},
	"internal/limits":        {"internal/domain", "internal/batch", "internal/tracing"},
	"internal/metrics":       nil,
	"internal/store":         {"internal/domain", "internal/batch", "internal/tracing"},
	"internal/store/bounded": {"internal/store", "internal/domain", "internal/metrics", "internal/tracing"},
	"internal/manage":        {"internal/domain", "internal/limits", "internal/webhook"},
	"internal/cli":           {"internal/domain", "internal/store", "internal/manage", "internal/webhook", "internal/replicate"},
	"internal/certs":         {"internal/metrics"},
	"internal/keyring":       {"internal/domain", "internal/limits"},
	"internal/petcopy":       {"internal/domain", "internal/batch", "internal/appendjson"},
	"internal/httpapi":       {"internal/domain", "internal/keyring", "internal/limits", "internal/metrics", "internal/logline", "internal/appendjson", "internal/tracing"},
	"internal/adminapi":      {"internal/domain", "internal/httpapi", "internal/keyring", "internal/limits", "internal/manage", "internal/metrics", "internal/webhook"},
	"internal/publicapi":     {"internal/domain", "internal/httpapi", "internal/keyring", "internal/limits", "internal/metrics", "internal/petcopy", "internal/tracing"},
	"internal/server":        {"internal/domain", "internal/appendjson", "internal/cli", "internal/httpapi", "internal/adminapi", "internal/publicapi", "internal/keyring", "internal/limits", "internal/logline", "internal/manage", "internal/metrics", "internal/petcopy", "internal/store", "internal/store/bounded", "internal/webhook", "internal/replicate", "internal/tracing"},
	"internal/servertest":    {"internal/server", "internal/store", "internal/cli", "internal/domain", "internal/httpapi", "internal/limits", "internal/logline", "internal/manage", "internal/metrics", "internal/testkit", "internal/tracing"},
	"internal/replicate":     {"internal/domain"},
	"internal/testkit":       nil,
	"internal/tracing":       nil,
	"bench/ceiling":          nil,
}

// testsMayAlsoImport is what a package's tests may import beyond its row
// and the tests' support: the pet copy's tests open a SQLite store, the
// source of truth the copy must answer like, which its code never imports;
// the root's and the two APIs' start a server through internal/servertest.
// The store's own tests open it directly and start no server: a test of a
// package that a server imports, beside an in-package test of it, makes
// every package between the two compile again for that package's tests.
var testsMayAlsoImport = map[string][]string{
	"internal/petcopy":   {"internal/store"},
	".":                  {"internal/servertest"},
	"internal/adminapi":  {"internal/servertest"},
	"internal/publicapi": {"internal/servertest"},
	"internal/keyring":   {"internal/servertest", "internal/store", "internal/httpapi", "internal/manage"},
	"internal/webhook":   {"internal/servertest", "internal/store", "internal/httpapi", "internal/manage", "internal/limits"},
}

// netHTTPAllowed are the packages whose code (not tests) may import
// net/http: the HTTP edge (the root, internal/server, internal/httpapi,
// internal/adminapi and internal/publicapi),
// the webhook sender, the metrics' handler, the traces' exporter, the tests' support and the
// benchmark's yardstick server.
var netHTTPAllowed = []string{".", "internal/server", "internal/servertest", "internal/httpapi", "internal/adminapi", "internal/publicapi", "internal/webhook", "internal/metrics", "internal/tracing", "internal/testkit", "bench/ceiling"}

const modulePath = "petstore"

// moduleImports reads the import lines of every Go file below the module's
// root, by package directory: those of its code and those of its tests.
func moduleImports(t *testing.T) (code, tests map[string]map[string]bool) {
	t.Helper()
	code, tests = map[string]map[string]bool{}, map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		into := code
		if strings.HasSuffix(path, "_test.go") {
			into = tests
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if into[dir] == nil {
			into[dir] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			into[dir][p] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return code, tests
}

// TestImportsRunOneWay holds every package to its row of allowedImports:
// its code imports only the packages of the module listed there, and its
// tests those, the tests' support and their row of testsMayAlsoImport.
func TestImportsRunOneWay(t *testing.T) {
	code, tests := moduleImports(t)
	for dir, imports := range code {
		allowed, known := allowedImports[dir]
		if !known {
			t.Errorf("package %s is not in allowedImports: say what it may import", dir)
			continue
		}
		for p := range imports {
			if inner, ok := strings.CutPrefix(p, modulePath+"/"); ok && !slices.Contains(allowed, inner) {
				t.Errorf("package %s imports %s, which its row of allowedImports does not allow", dir, inner)
			}
		}
	}
	for dir, imports := range tests {
		// An external test package (package x_test) imports its own.
		allowed := append(slices.Concat(allowedImports[dir], testsMayAlsoImport[dir]), "internal/testkit", dir)
		for p := range imports {
			if inner, ok := strings.CutPrefix(p, modulePath+"/"); ok && !slices.Contains(allowed, inner) {
				t.Errorf("the tests of %s import %s, which its rows of allowedImports and testsMayAlsoImport do not allow", dir, inner)
			}
		}
	}
}

// TestNetHTTPOnlyAtTheEdges: outside tests, only the packages of
// netHTTPAllowed speak HTTP.
func TestNetHTTPOnlyAtTheEdges(t *testing.T) {
	code, _ := moduleImports(t)
	for dir, imports := range code {
		if imports["net/http"] && !slices.Contains(netHTTPAllowed, dir) {
			t.Errorf("package %s imports net/http, which only %v may", dir, netHTTPAllowed)
		}
	}
}
