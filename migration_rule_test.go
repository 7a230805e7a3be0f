package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"petstore/internal/store"
	"petstore/internal/testkit"

	"github.com/jackc/pgx/v5"
)

// The rule of expand steps (docs/design.md, "Migrations"): the servers of
// the version before a migration keep working on the schema it makes. What
// "the version before" runs is recorded: testdata/queries/NNN.json holds
// every SQL statement in the store's Go sources of a checkout that knew NNN
// migrations, written before the first migration of the next release is
// added, with
//
//	go test -run TestThePreviousVersionsQueriesRunOnEachExpandStep . -record-queries=DIR
//
// (DIR a checkout of that version, . for this one). The test then walks
// every migration in order on both engines and, at each expand step N,
// prepares each recorded statement of the newest version before N on the
// schema N makes: PostgreSQL and SQLite resolve every table, column and
// type a statement names when they prepare it. A statement that does not
// prepare on its own version's schema (built at run time, or of the other
// engine) is left out, and counted. What preparing cannot see, an old
// server's INSERT that leaves out a new NOT NULL column without a default,
// or a table or column dropped or renamed, expandStepRefusals reads in the
// expand step's SQL itself.
var recordQueries = flag.String("record-queries", "", "write testdata/queries/NNN.json from the store's sources of the checkout at this directory")

const queriesDir = "testdata/queries"

func TestThePreviousVersionsQueriesRunOnEachExpandStep(t *testing.T) {
	t.Parallel()
	if *recordQueries != "" {
		recordStoreQueries(t, *recordQueries)
	}
	recorded := recordedQueries(t)
	lite, pg := migrationWalk(t, "sqlite"), migrationWalk(t, "postgres")
	for n := 1; n <= len(store.Migrations); n++ {
		m := store.Migrations[n-1]
		lite.step(n, recorded)
		pg.step(n, recorded)
		if !m.Expand {
			continue
		}
		for _, refusal := range expandStepRefusals(m) {
			t.Errorf("%s is marked expand, but %s", m.Name, refusal)
		}
		prev := slices.IndexFunc(recorded, func(r queriesOf) bool { return r.count < n })
		if prev < 0 {
			t.Errorf("%s: no queries are recorded of a version before it (%s/NNN.json, NNN < %d): record them with -record-queries", m.Name, queriesDir, n)
			continue
		}
		for _, w := range []*walk{lite, pg} {
			w.check(n, recorded[prev])
		}
	}
}

// queriesOf are the recorded statements of a version that knew count
// migrations.
type queriesOf struct {
	count      int
	statements []string
}

// recordedQueries reads testdata/queries, the newest version first.
func recordedQueries(t *testing.T) []queriesOf {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(queriesDir, "*.json"))
	var out []queriesOf
	for _, f := range files {
		n, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".json"))
		b, readErr := os.ReadFile(f)
		q := queriesOf{count: n}
		if err != nil || readErr != nil || json.Unmarshal(b, &q.statements) != nil || len(q.statements) == 0 {
			t.Fatalf("%s: not NNN.json holding a JSON array of statements (%v, %v)", f, err, readErr)
		}
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b queriesOf) int { return b.count - a.count })
	return out
}

// recordStoreQueries writes the statements of dir's store sources as
// testdata/queries/NNN.json, NNN the count of dir's migrations.
func recordStoreQueries(t *testing.T, dir string) {
	t.Helper()
	migrations, _ := filepath.Glob(filepath.Join(dir, "internal/store/migrations/sqlite/*.sql"))
	statements := storeStatements(t, filepath.Join(dir, "internal/store"))
	if len(migrations) == 0 || len(statements) == 0 {
		t.Fatalf("%s holds no store migrations or statements", dir)
	}
	b, err := json.MarshalIndent(statements, "", "\t")
	if err == nil {
		err = os.MkdirAll(queriesDir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(queriesDir, fmt.Sprintf("%03d.json", len(migrations))), append(b, '\n'), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// sqlStatement is a string that begins a statement a server runs.
var sqlStatement = regexp.MustCompile(`(?is)^\s*(select|insert|update|delete|with)\s`)

// storeStatements are the SQL statements of the Go sources under dir (not
// its tests), each string constant expression folded into one text, as
// store_invariants_test.go reads them; sorted, each once.
func storeStatements(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		files = append(files, f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	consts := stringConsts(files)
	var out []string
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			text, ok := foldString(n, consts)
			if ok && sqlStatement.MatchString(text) {
				out = append(out, strings.Join(strings.Fields(text), " "))
			}
			return !ok
		})
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// expandStepRefusals are what an expand step may not do: drop or rename
// what the servers before it use, change a column, or add one NOT NULL
// without a default, which their inserts would leave out.
func expandStepRefusals(m store.Migration) []string {
	var out []string
	for engine, text := range map[string]string{"SQLite": m.SQLite, "PostgreSQL": m.Postgres} {
		for _, stmt := range strings.Split(stripSQLComments(text), ";") {
			s := strings.ToUpper(strings.Join(strings.Fields(stmt), " "))
			switch {
			case strings.Contains(s, "DROP "), strings.Contains(s, " RENAME "):
				out = append(out, fmt.Sprintf("on %s it drops or renames: %s", engine, s))
			case strings.Contains(s, "ALTER COLUMN"):
				out = append(out, fmt.Sprintf("on %s it changes a column: %s", engine, s))
			case strings.Contains(s, "ADD COLUMN") && strings.Contains(s, "NOT NULL") && !strings.Contains(s, "DEFAULT"):
				out = append(out, fmt.Sprintf("on %s it adds a NOT NULL column without a default: %s", engine, s))
			}
		}
	}
	slices.Sort(out)
	return out
}

func stripSQLComments(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		code, _, _ := strings.Cut(line, "--")
		b.WriteString(code + "\n")
	}
	return b.String()
}

// walk is one engine's database, migrated one step at a time.
type walk struct {
	t       *testing.T
	engine  string
	exec    func(sql string) error
	prepare func(sql string) error
	// ownChecked are, by the count of the version that recorded them, its
	// statements that prepare on its own schema.
	ownChecked map[int][]string
}

func migrationWalk(t *testing.T, engine string) *walk {
	t.Helper()
	ctx := context.Background()
	w := &walk{t: t, engine: engine, ownChecked: map[int][]string{}}
	if engine == "sqlite" {
		db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "walk.db"))
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		w.exec = func(q string) error { _, err := db.ExecContext(ctx, q); return err }
		w.prepare = func(q string) error {
			st, err := db.PrepareContext(ctx, q)
			if err == nil {
				st.Close()
			}
			return err
		}
		return w
	}
	conn, err := pgx.Connect(ctx, testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	w.exec = func(q string) error { _, err := conn.Exec(ctx, q); return err }
	w.prepare = func(q string) error { _, err := conn.Prepare(ctx, "", dollarPlaceholders(q)); return err }
	// What applyMigrations makes before the first migration.
	if err := w.exec(`CREATE TABLE petstore_schema (version integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return w
}

// dollarPlaceholders numbers a statement's ? placeholders as PostgreSQL's
// $1, $2 ..., as the store does.
func dollarPlaceholders(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// step applies migration n, then notes which statements of a version that
// knew n migrations prepare on the schema they were written for.
func (w *walk) step(n int, recorded []queriesOf) {
	w.t.Helper()
	m := store.Migrations[n-1]
	text := m.SQLite
	if w.engine == "postgres" {
		text = m.Postgres
	}
	if err := w.exec(text); err != nil {
		w.t.Fatalf("%s on %s: %v", m.Name, w.engine, err)
	}
	for _, q := range recorded {
		if q.count != n {
			continue
		}
		var own []string
		for _, s := range q.statements {
			if w.prepare(s) == nil {
				own = append(own, s)
			}
		}
		w.t.Logf("%s: %d of the %d statements recorded of the version that knew %d migrations prepare on its schema", w.engine, len(own), len(q.statements), n)
		if len(own) < len(q.statements)/3 {
			w.t.Errorf("%s: only %d of the %d statements of the version that knew %d migrations prepare on its own schema", w.engine, len(own), len(q.statements), n)
		}
		w.ownChecked[n] = own
	}
}

// check prepares, on the schema expand step n made, each statement of q
// that prepared on q's own schema.
func (w *walk) check(n int, q queriesOf) {
	w.t.Helper()
	for _, s := range w.ownChecked[q.count] {
		if err := w.prepare(s); err != nil {
			w.t.Errorf("%s: after %s, a statement of the version that knew %d migrations fails: %v\n\t%s", w.engine, store.Migrations[n-1].Name, q.count, err, s)
		}
	}
}
