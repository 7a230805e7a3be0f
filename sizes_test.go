package main

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The sizes a reader can hold (docs/development.md, "Sizes"), counted on the
// code that ships: every .go file but the tests, comments and blank lines
// included; an interface with the methods it embeds
// (TestInterfacesCountWhatTheyEmbed), and here those it declares itself.
const (
	maxFuncLines      = 60
	maxFileLines      = 600
	maxInterfaceFuncs = 10
	maxPackageLines   = 4000
)

// TestCodeStaysInSizesAReaderCanHold names each function, file, interface
// and package over its size.
func TestCodeStaysInSizesAReaderCanHold(t *testing.T) {
	fset := token.NewFileSet()
	packageLines := map[string]int{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		lines := fset.File(f.Pos()).LineCount()
		packageLines[filepath.Dir(path)] += lines
		if lines > maxFileLines {
			t.Errorf("%s has %d lines, over %d", path, lines, maxFileLines)
		}
		for _, over := range oversized(fset, f) {
			t.Errorf("%s: %s", path, over)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, lines := range packageLines {
		if lines > maxPackageLines {
			t.Errorf("package %s has %d lines, over %d", dir, lines, maxPackageLines)
		}
	}
	if packageLines["internal/store"] == 0 {
		t.Error("internal/store was not counted: the walk missed the packages")
	}
}

// oversized names the functions (and function literals) and interfaces of
// f over their size.
func oversized(fset *token.FileSet, f *ast.File) []string {
	var over []string
	span := func(n ast.Node) int { return fset.Position(n.End()).Line - fset.Position(n.Pos()).Line + 1 }
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if lines := span(n); lines > maxFuncLines {
				over = append(over, fmt.Sprintf("func %s has %d lines, over %d", n.Name.Name, lines, maxFuncLines))
			}
		case *ast.FuncLit:
			if lines := span(n); lines > maxFuncLines {
				over = append(over, fmt.Sprintf("the func literal at line %d has %d lines, over %d", fset.Position(n.Pos()).Line, lines, maxFuncLines))
			}
		case *ast.InterfaceType:
			methods := 0
			for _, field := range n.Methods.List {
				if _, ok := field.Type.(*ast.FuncType); ok {
					methods += len(field.Names)
				}
			}
			if methods > maxInterfaceFuncs {
				over = append(over, fmt.Sprintf("the interface at line %d declares %d methods, over %d", fset.Position(n.Pos()).Line, methods, maxInterfaceFuncs))
			}
		}
		return true
	})
	return over
}

func TestOversizedNamesWhatIsOver(t *testing.T) {
	body := strings.Repeat("\t_ = 0\n", maxFuncLines-2)
	methods := strings.Repeat("M%d()\n", maxInterfaceFuncs+1)
	for _, tc := range []struct {
		name, src, want string
	}{
		{"a function of 60 lines passes", "func f() {\n" + body + "}\n", ""},
		{"a function of 61 lines is named", "func f() {\n" + body + "\t_ = 0\n}\n", "func f has 61 lines"},
		{"a long func literal is named", "var f = func() {\n" + body + "\t_ = 0\n}\n", "func literal at line 3 has 61 lines"},
		{"an interface of 11 methods is named", "type I interface {\n" + fmt.Sprintf(methods, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10) + "}\n", "declares 11 methods"},
		{"embedded interfaces are not counted here, but with go/types", "type I interface {\nfmt.Stringer\nerror\n" + fmt.Sprintf(strings.Repeat("M%d()\n", maxInterfaceFuncs), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9) + "}\n", ""},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", "package x\n\n"+tc.src, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := strings.Join(oversized(fset, f), "; ")
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// An interface is counted with the methods it embeds, from other packages
// too (docs/development.md, "Sizes"): a union of the domain's interfaces
// is as big as what it holds. Only the named unions below may hold more
// than maxInterfaceFuncs, and no package that serves HTTP takes one: each
// handler takes the interfaces it calls.
var (
	namedUnions     = []string{"petstore/internal/store.Storage", "petstore/internal/domain.WebhookStorage"}
	handlerPackages = []string{"internal/adminapi", "internal/httpapi"}
)

// moduleTypes type-checks each package of the module (not its tests),
// its imports read from the build's export data.
func moduleTypes(t *testing.T) (fset *token.FileSet, pkgs map[string]*types.Info) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-export", "-f", "{{.ImportPath}}={{.Export}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, file, _ := strings.Cut(line, "=")
		exports[path] = file
	}
	fset = token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) })
	pkgs = map[string]*types.Info{}
	dirs, _ := moduleImports(t)
	for dir := range dirs {
		matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		var files []*ast.File
		for _, name := range matches {
			if ok, err := build.Default.MatchFile(dir, filepath.Base(name)); strings.HasSuffix(name, "_test.go") || err != nil || !ok {
				continue // a test, or a file this build leaves out
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
		conf := types.Config{Importer: imp, Error: func(error) {}}
		if _, err := conf.Check(modulePath+"/"+dir, fset, files, info); err != nil {
			t.Fatalf("type-check %s: %v", dir, err)
		}
		pkgs[dir] = info
	}
	return fset, pkgs
}

// TestInterfacesCountWhatTheyEmbed names each interface of the module's
// code over maxInterfaceFuncs methods with those it embeds, but the named
// unions, and each handler package that takes a union.
func TestInterfacesCountWhatTheyEmbed(t *testing.T) {
	t.Parallel()
	fset, pkgs := moduleTypes(t)
	for dir, info := range pkgs {
		for expr, tv := range info.Types {
			it, ok := expr.(*ast.InterfaceType)
			if !ok {
				continue
			}
			n := tv.Type.Underlying().(*types.Interface).NumMethods()
			if name := namedAt(info, it); n > maxInterfaceFuncs && !slices.Contains(namedUnions, name) {
				t.Errorf("%s: the interface %s has %d methods with those it embeds, over %d", fset.Position(it.Pos()), name, n, maxInterfaceFuncs)
			}
		}
		if !slices.Contains(handlerPackages, dir) {
			continue
		}
		for id, obj := range info.Uses {
			if tn, ok := obj.(*types.TypeName); ok && tn.Pkg() != nil && slices.Contains(namedUnions, tn.Pkg().Path()+"."+tn.Name()) {
				t.Errorf("%s: %s takes %s.%s: a handler takes the interfaces it calls", fset.Position(id.Pos()), dir, tn.Pkg().Name(), tn.Name())
			}
		}
	}
	if len(pkgs) < 10 {
		t.Errorf("type-checked %d packages: the walk missed the module", len(pkgs))
	}
}

// namedAt is the name of the type it declares, as package path.Name, or
// "a literal interface".
func namedAt(info *types.Info, it *ast.InterfaceType) string {
	for id, obj := range info.Defs {
		if tn, ok := obj.(*types.TypeName); ok && tn.Pos() == id.Pos() {
			if named, ok := tn.Type().(*types.Named); ok && named.Underlying() == info.Types[it].Type.Underlying() {
				return fmt.Sprintf("%s.%s", tn.Pkg().Path(), tn.Name())
			}
		}
	}
	return "(a literal interface)"
}
