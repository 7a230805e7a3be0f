package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The rules of docs/design.md#what-no-code-may-do, checked on the SQL the
// code and the migrations hold: a statement that changes or deletes pets,
// their idempotency records or the audit trail, or writes the audit trail,
// is found by what it says, wherever it is.
var (
	// sqlChange matches a statement that changes or deletes rows of a
	// table it names; the table is group 2 or 3.
	sqlChange = regexp.MustCompile(`(?is)\b(?:update(?:\s+or\s+\w+)?|delete\s+from|truncate(?:\s+table)?(?:\s+only)?|drop\s+table(?:\s+if\s+exists)?|(?:insert\s+or\s+)?replace\s+into)\s+(?:\w+\.)?"?(\w+|\?|%)` +
		`|\binsert\s+(?:or\s+\w+\s+)?into\s+(?:\w+\.)?"?(\w+)\b[^;]*\bdo\s+update`)
	// sqlInsert matches an insert into a table it names (group 1).
	sqlInsert = regexp.MustCompile(`(?is)\binsert\s+(?:or\s+\w+\s+)?into\s+(?:\w+\.)?"?(\w+)`)
)

// sqlFinding is one statement of the rules: where it is (a function, or a
// Migration's file), what it does ("change" or "insert") and to which table
// ("?" when the table is named at run time).
type sqlFinding struct{ where, what, table string }

// guardedTables are the tables the rules are about.
var guardedTables = []string{"pets", "idempotency", "audit_events", "ban_events", "?", "%"}

// appendedTables are written by recordActions alone: the audit trail, and
// the bans whose events it holds.
var appendedTables = []string{"audit_events", "ban_events"}

// findSQL returns the findings of the rules in the statements of text.
func findSQL(where, text string) []sqlFinding {
	var found []sqlFinding
	for _, m := range sqlChange.FindAllStringSubmatch(text, -1) {
		table := strings.ToLower(m[1] + m[2])
		if slices.Contains(guardedTables, table) {
			found = append(found, sqlFinding{where, "change", strings.NewReplacer("%", "?").Replace(table)})
		}
	}
	for _, m := range sqlInsert.FindAllStringSubmatch(text, -1) {
		if table := strings.ToLower(m[1]); slices.Contains(appendedTables, table) {
			found = append(found, sqlFinding{where, "insert", table})
		}
	}
	return found
}

func TestSQLRulesFindWhatTheyShould(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want []sqlFinding
	}{
		{`UPDATE pets SET name = ? WHERE id = ?`, []sqlFinding{{"f", "change", "pets"}}},
		{`delete from "pets" where id = $1`, []sqlFinding{{"f", "change", "pets"}}},
		{`TRUNCATE TABLE public.pets`, []sqlFinding{{"f", "change", "pets"}}},
		{`INSERT OR REPLACE INTO pets (id, name) VALUES (?, ?)`, []sqlFinding{{"f", "change", "pets"}}},
		{"INSERT INTO pets (id, name) VALUES (?, ?)\n ON CONFLICT (id) DO UPDATE SET name = excluded.name", []sqlFinding{{"f", "change", "pets"}}},
		{`DELETE FROM idempotency WHERE created_at < ?`, []sqlFinding{{"f", "change", "idempotency"}}},
		{`DELETE FROM ? WHERE id = ?`, []sqlFinding{{"f", "change", "?"}}},
		{`DELETE FROM %s WHERE id = ?`, []sqlFinding{{"f", "change", "?"}}},
		{`INSERT INTO audit_events (at) VALUES (?)`, []sqlFinding{{"f", "insert", "audit_events"}}},
		{`INSERT INTO ban_events (subject, started_at) VALUES (?, ?) ON CONFLICT (subject, started_at) DO NOTHING`, []sqlFinding{{"f", "insert", "ban_events"}}},
		{`DELETE FROM ban_events WHERE started_at < ?`, []sqlFinding{{"f", "change", "ban_events"}}},
		{`INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)`, nil},
		{`SELECT id FROM pets WHERE id > ? ORDER BY id`, nil},
		{`UPDATE petstore_schema SET version = 1`, nil},
		{`DELETE FROM idempotency_old`, nil},
		{`UPDATE meta SET value = value + 1 WHERE name = 'keys_version'`, nil},
	} {
		if got := findSQL("f", c.sql); !slices.Equal(got, c.want) {
			t.Errorf("%q: found %v, want %v", c.sql, got, c.want)
		}
	}
}

// allowedSQL are the only places of the statements findSQL finds.
var allowedSQL = []sqlFinding{
	// A create takes back, in its own transaction, the pet whose
	// Idempotency-Key another request holds, and replaces an expired record.
	{"(*SQLite).CreatePets", "change", "pets"},
	{"(*SQLite).prepare", "change", "idempotency"}, // the insert CreatePets runs
	{"(*Postgres).CreatePets", "change", "pets"},
	{"(*Postgres).CreatePets", "change", "idempotency"},
	// Expired idempotency records are pruned.
	{"(*SQLite).PruneIdempotency", "change", "idempotency"},
	{"(*Postgres).PruneIdempotency", "change", "idempotency"},
	// The audit trail is written, and its webhooks queued, by one function,
	// which notes there each ban whose event it wrote.
	{"recordActions", "insert", "audit_events"},
	{"recordActions", "insert", "ban_events"},
	// The tests' kit empties each table of a schema a test gave back, for
	// the next test (testkit.ServerPostgresURL); no server runs it.
	{"emptySchemaSQL", "change", "?"},
}

func TestNoCommittedPetIsChangedAndAuditsAreWrittenByRecordActions(t *testing.T) {
	t.Parallel()
	found := sourceSQL(t, ".")
	for _, f := range found {
		if !slices.Contains(allowedSQL, f) {
			t.Errorf("%s: a statement that %ss %s, which only the places of allowedSQL may do (docs/design.md#what-no-code-may-do)", f.where, f.what, f.table)
		}
	}
	for _, a := range allowedSQL {
		if !slices.Contains(found, a) {
			t.Errorf("%s no longer %ss %s: take it off allowedSQL", a.where, a.what, a.table)
		}
	}
}

// sourceSQL returns the findings of the module's non-test Go sources under
// dir, each string constant expression folded into one text, and of the
// Migrations' .sql files.
func sourceSQL(t *testing.T, dir string) []sqlFinding {
	t.Helper()
	var found []sqlFinding
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != dir:
			return filepath.SkipDir
		case strings.HasSuffix(path, ".sql"):
			b, err := os.ReadFile(path)
			found = append(found, findSQL(path, string(b))...)
			return err
		case strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			files = append(files, f)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	consts := stringConsts(files)
	for _, f := range files {
		for _, decl := range f.Decls {
			where := fset.Position(decl.Pos()).Filename
			if fn, ok := decl.(*ast.FuncDecl); ok {
				where = funcName(fn)
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				if text, ok := foldString(n, consts); ok {
					found = append(found, findSQL(where, text)...)
					return false
				}
				return true
			})
		}
	}
	return found
}

// funcName names a function as (*T).Name, T.Name or Name.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil {
		return fn.Name.Name
	}
	recv := types.ExprString(fn.Recv.List[0].Type)
	if strings.HasPrefix(recv, "*") {
		recv = "(" + recv + ")"
	}
	return recv + "." + fn.Name.Name
}

// stringConsts returns the string constants the files declare, by name.
func stringConsts(files []*ast.File) map[string]string {
	consts := make(map[string]string)
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			if spec, ok := n.(*ast.ValueSpec); ok && len(spec.Values) == len(spec.Names) {
				for i, name := range spec.Names {
					if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
			return true
		})
	}
	return consts
}

// foldString returns the text of a string literal, or of a sum of them, with
// the constants it names put in and " ? " for what is known only at run time.
func foldString(n ast.Node, consts map[string]string) (string, bool) {
	switch e := n.(type) {
	case *ast.BasicLit:
		s, err := strconv.Unquote(e.Value)
		return s, e.Kind == token.STRING && err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		x, okX := foldString(e.X, consts)
		y, okY := foldString(e.Y, consts)
		if !okX && !okY {
			return "", false
		}
		return foldPart(x, okX) + foldPart(y, okY), true
	case *ast.ParenExpr:
		return foldString(e.X, consts)
	case *ast.Ident:
		s, ok := consts[e.Name]
		return s, ok
	}
	return "", false
}

func foldPart(s string, ok bool) string {
	if ok {
		return s
	}
	return " ? "
}
