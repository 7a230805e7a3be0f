package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"petstore/internal/cli"
	"petstore/internal/httpapi"
	"petstore/internal/testkit"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"gopkg.in/yaml.v3"
)

// The tests in this file keep README.md and docs/*.md honest: their links
// resolve, their first session runs as shown, their flags are the binary's,
// and their error table is the service's.

// docPages are README.md and every page under docs/.
func docPages(t *testing.T) map[string]string {
	t.Helper()
	names, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	for _, name := range append(names, "README.md") {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		pages[name] = string(b)
	}
	return pages
}

// prose is a page without its code: indented blocks and fenced blocks hold
// commands and output, not links.
func prose(page string) []string {
	var lines []string
	fenced := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
			continue
		}
		lines = append(lines, line)
	}
	return lines
}

var (
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading      = regexp.MustCompile(`^#{1,6} (.+)$`)
)

// anchors are the fragment names GitHub gives a page's headings: lower
// case, punctuation dropped, spaces as hyphens, a repeat numbered.
func anchors(page string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range prose(page) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func TestDocsLinksAndAnchorsResolve(t *testing.T) {
	pages := docPages(t)
	links := 0
	for name, page := range pages {
		for _, line := range prose(page) {
			for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, fragment, _ := strings.Cut(target, "#")
				path := name
				if file != "" {
					path = filepath.Join(filepath.Dir(name), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s links to %s, which does not exist", name, target)
						continue
					}
				}
				if fragment == "" {
					continue
				}
				linked, ok := pages[filepath.Clean(path)]
				if !ok {
					t.Errorf("%s links to %s: an anchor in a file that is not a doc page", name, target)
				} else if !anchors(linked)[fragment] {
					t.Errorf("%s links to %s: %s has no heading with anchor #%s", name, target, path, fragment)
				}
			}
		}
	}
	if links < 20 {
		t.Fatalf("found only %d relative links in the docs: is the link pattern still right?", links)
	}
}

// otherToolsFlags are flags the docs give to other programs (redis-server,
// pg_dump, useradd ...), not to petstore.
var otherToolsFlags = []string{
	"save", "appendonly", "daemonize", "bind", "port", // redis-server
	"format", "file", "clean", "if-exists", "dbname", // pg_dump, pg_restore
	"system", "home", "shell", "now", "pwprompt", "owner", // useradd, systemctl, createuser, createdb
	"interval", "timeout", "start-period", "retries", // Docker's HEALTHCHECK
	"yes", "fuzz", "fuzztime", "bench", "benchmem", "benchtime", "count", "run", "race", "short", "load", "short", // npx, go test
	"latency", "trimpath", "ldflags", "skip-systemctl-redirect", // wrk, go build, pg_ctlcluster
	"h1",                // h2load
	"cacert", "resolve", // curl
}

// helpFlags runs every command petstore knows with -h and returns each flag
// it prints, with the commands that have it.
func helpFlags(t *testing.T) map[string][]string {
	t.Helper()
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
	flags := map[string][]string{}
	for _, c := range cliCommands() {
		if c.name == "version" {
			continue
		}
		words := strings.Fields(c.name)
		var stdout, stderr bytes.Buffer
		args := append(append([]string{"petstore"}, words...), "-h")
		if err := run(context.Background(), args, func(string) string { return "" }, nil, &stdout, &stderr); err != nil && err != cli.ErrHelp {
			t.Fatalf("petstore %s -h: %v", c.name, err)
		}
		found := flagLine.FindAllStringSubmatch(stdout.String()+stderr.String(), -1)
		if len(found) == 0 {
			t.Fatalf("petstore %s -h printed no flags:\n%s", strings.Join(words, " "), stdout.String())
		}
		for _, f := range found {
			flags[f[1]] = append(flags[f[1]], strings.Join(words, " "))
		}
	}
	return flags
}

func TestDocsNameEveryFlagAndNoOther(t *testing.T) {
	help := helpFlags(t)
	documented := map[string]string{}
	flag := regexp.MustCompile(`(?:^|[\s\x60(\[])--([a-z][a-z0-9-]*)`)
	for name, page := range docPages(t) {
		for _, m := range flag.FindAllStringSubmatch(page, -1) {
			documented[m[1]] = name
		}
	}
	for f, cmds := range help {
		if _, ok := documented[f]; !ok {
			t.Errorf("--%s (petstore %s) is in --help but in no doc page", f, strings.Join(cmds, ", "))
		}
	}
	for f, page := range documented {
		if _, ok := help[f]; !ok && !slices.Contains(otherToolsFlags, f) {
			t.Errorf("%s names --%s, which no petstore command has", page, f)
		}
	}
}

func TestErrorTableMatchesTheServiceAndOpenAPI(t *testing.T) {
	readme := docPages(t)["README.md"]
	_, table, ok := strings.Cut(readme, "## Error codes")
	if !ok {
		t.Fatal("README.md has no Error codes section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (\\d{3}) \\|")
	inTable := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		inTable[m[1]], _ = strconv.Atoi(m[2])
	}
	for code, status := range httpapi.CodeStatus {
		if got, ok := inTable[code]; !ok {
			t.Errorf("error code %s (%d) is missing from the README's table", code, status)
		} else if got != status {
			t.Errorf("README's table gives %s status %d, the service answers %d", code, got, status)
		}
	}
	for code := range inTable {
		if _, ok := httpapi.CodeStatus[code]; !ok {
			t.Errorf("README's table lists %s, which the service never answers", code)
		}
	}

	var doc struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Code struct {
							Enum []string `yaml:"enum"`
						} `yaml:"code"`
					} `yaml:"properties"`
				} `yaml:"Error"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(openapiYAML(t), &doc); err != nil {
		t.Fatal(err)
	}
	enum := doc.Components.Schemas.Error.Properties.Code.Enum
	for code := range inTable {
		if !slices.Contains(enum, code) && !slices.Contains([]string{httpapi.CodeConflict, httpapi.CodeMisdirectedRequest, httpapi.CodeCrossOrigin}, code) {
			t.Errorf("README's table lists %s, openapi.yaml's Error.code does not", code)
		}
	}
	for _, code := range enum {
		if _, ok := inTable[code]; !ok {
			t.Errorf("openapi.yaml's Error.code lists %s, README's table does not", code)
		}
	}
}

// sessionStep is one command of the README's first session and the answer
// it shows, if any.
type sessionStep struct {
	command string
	status  int               // 0: the README shows no answer
	headers map[string]string // the headers shown, in canonical form
	body    string            // the body shown, "" for none
}

// firstSession reads the commands and answers of README.md's "A first
// session with curl": indented blocks, one paragraph a command or an answer.
func firstSession(t *testing.T, readme string) []sessionStep {
	t.Helper()
	var steps []sessionStep
	for _, p := range codeBlocks(t, "README.md", readme, "## A first session with curl") {
		switch {
		case strings.HasPrefix(p, "HTTP/1.1 "):
			if len(steps) == 0 || steps[len(steps)-1].status != 0 {
				t.Fatalf("an answer in the README follows no command: %q", p)
			}
			last := &steps[len(steps)-1]
			lines := strings.Split(p, "\n")
			last.status, _ = strconv.Atoi(strings.Fields(lines[0])[1])
			last.headers = map[string]string{}
			for _, h := range lines[1:] {
				if name, value, ok := strings.Cut(h, ": "); ok {
					last.headers[http.CanonicalHeaderKey(name)] = value
				}
			}
		case strings.HasPrefix(p, "{") || strings.HasPrefix(p, "["):
			steps[len(steps)-1].body = p
		default:
			for _, command := range shellCommands(p) {
				steps = append(steps, sessionStep{command: command})
			}
		}
	}
	return steps
}

// codeBlocks are the indented blocks of the section heading of page (called
// name), up to the next "## " heading: each its lines, without the four
// spaces of indentation.
func codeBlocks(t *testing.T, name, page, heading string) []string {
	t.Helper()
	_, section, ok := strings.Cut(page, heading)
	if !ok {
		t.Fatalf("%s has no section %s", name, heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks, cur []string
	for _, line := range strings.Split(section+"\n", "\n") {
		if code, ok := strings.CutPrefix(line, "    "); ok {
			cur = append(cur, code)
		} else if len(cur) > 0 {
			blocks = append(blocks, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	return blocks
}

// shellCommands are the commands of a block of shell, a line ending in \
// joined to the next.
func shellCommands(block string) []string {
	var commands []string
	for _, command := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		commands = append(commands, strings.TrimSpace(command))
	}
	return commands
}

// shellWords splits a command line as sh would, for the quoting the README
// uses ('...' and "..." and $KEY).
func shellWords(line string, vars map[string]string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case c == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			w.WriteString(line[i+1 : i+1+end])
			i, inWord = i+1+end, true
		case c == '"':
			end := strings.IndexByte(line[i+1:], '"')
			w.WriteString(os.Expand(line[i+1:i+1+end], func(k string) string { return vars[k] }))
			i, inWord = i+1+end, true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

func TestREADMEFirstSessionRunsAsShown(t *testing.T) {
	t.Parallel()
	steps := firstSession(t, docPages(t)["README.md"])
	if len(steps) < 8 {
		t.Fatalf("read %d steps from the README's first session, want the key, creates, list, next page, get and retry", len(steps))
	}
	dir := t.TempDir()
	server := startPetstore(t, dir)
	vars := map[string]string{}
	for _, step := range steps {
		if strings.HasPrefix(step.command, "KEY=$(cat ") {
			// The bootstrap key's file, read and deleted as shown.
			sh := exec.Command("sh", "-c", step.command+` && printf %s "$KEY"`)
			sh.Dir = dir
			out, err := sh.Output()
			if err != nil || string(out) != server.Bootstrap {
				t.Fatalf("%s: %v, %q; want the bootstrap key %q", step.command, err, out, server.Bootstrap)
			}
			if files, _ := filepath.Glob(filepath.Join(dir, "*.bootstrap-key")); len(files) > 0 {
				t.Errorf("%s left %v", step.command, files)
			}
			vars["KEY"] = string(out)
			continue
		}
		if name, rest, ok := strings.Cut(step.command, "=$(go run . "); ok && !strings.ContainsAny(name, " $") {
			res := testkit.RunPetstore(t, dir, nil, strings.Fields(strings.TrimSuffix(rest, ")"))...)
			lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
			if res.Code != 0 || !testkit.AnyKey.MatchString(lines[len(lines)-1]) {
				t.Fatalf("%s: exit %d, stdout %q, stderr %s", step.command, res.Code, res.Stdout, res.Stderr)
			}
			vars[name] = lines[len(lines)-1]
			server.KeysSent = append(server.KeysSent, vars[name])
			continue
		}
		words := shellWords(step.command, vars)
		if len(words) == 0 || words[0] != "curl" {
			t.Fatalf("the README's first session runs %q: the test knows only curl and keys create", step.command)
		}
		req := curlRequest(t, step.command, words, func(word string) (string, bool) {
			target, ok := strings.CutPrefix(word, "http://localhost:8080")
			return server.URL + target, ok
		})
		resp, body, err := testkit.ReadResponse(server.Client, req)
		if err != nil {
			t.Fatalf("%s: %v", step.command, err)
		}
		checkShownAnswer(t, step, resp, string(body))
	}
}

// curlRequest is the request of a curl command line (its words) as the
// docs write them: -s, -i, -H, -d and the URL, which address turns into the
// one to call (false: a word the test does not know).
func curlRequest(t *testing.T, command string, words []string, address func(string) (string, bool)) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(words); i++ {
		switch words[i] {
		case "-s", "-i", "-si":
		case "-H":
			name, value, _ := strings.Cut(words[i+1], ": ")
			req.Header.Set(name, value)
			i++
		case "-d":
			req.Method, req.Body = http.MethodPost, io.NopCloser(strings.NewReader(words[i+1]))
			req.ContentLength = int64(len(words[i+1]))
			i++
		default:
			target, ok := address(words[i])
			if !ok {
				t.Fatalf("%s: the test does not know curl's %q", command, words[i])
			}
			if req.URL, err = req.URL.Parse(target); err != nil {
				t.Fatal(err)
			}
		}
	}
	return req
}

// checkShownAnswer holds an answer to what the README shows of it. The
// remaining requests may be more than shown, as the bucket refills while the
// test runs, never fewer.
func checkShownAnswer(t *testing.T, step sessionStep, resp *http.Response, body string) {
	t.Helper()
	if step.status == 0 {
		if resp.StatusCode >= 300 {
			t.Errorf("%s: status %d, want success; body %s", step.command, resp.StatusCode, body)
		}
		return
	}
	if resp.StatusCode != step.status {
		t.Errorf("%s: status %d, the README shows %d; body %s", step.command, resp.StatusCode, step.status, body)
	}
	for name, shown := range step.headers {
		got := resp.Header.Get(name)
		if name == "X-Ratelimit-Remaining" {
			gotN, err1 := strconv.Atoi(got)
			shownN, err2 := strconv.Atoi(shown)
			limit, err3 := strconv.Atoi(resp.Header.Get("X-Ratelimit-Limit"))
			if err1 != nil || err2 != nil || err3 != nil || gotN < shownN || gotN > limit {
				t.Errorf("%s: %s: %q, the README shows %q", step.command, name, got, shown)
			}
			continue
		}
		if got != shown {
			t.Errorf("%s: %s: %q, the README shows %q", step.command, name, got, shown)
		}
	}
	if step.body != "" {
		var got, shown any
		if json.Unmarshal([]byte(body), &got) != nil || json.Unmarshal([]byte(step.body), &shown) != nil ||
			!jsonEqual(got, shown) {
			t.Errorf("%s: body %s, the README shows %s", step.command, body, step.body)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// unfinishedNote matches a line that says the work is not done: "Not done
// yet: ...", "TODO", "FIXME", "not implemented yet", "coming soon". A page
// says what works; what does not is an issue, not a line of the docs.
var unfinishedNote = regexp.MustCompile(`(?i)\bnot (done|implemented|supported|finished) yet\b|\bnot yet (done|implemented|supported|finished)\b|^\W*not yet\b|\bcoming soon\b|(?-i:\b(TODO|FIXME|TBD|XXX)\b)`)

func TestDocsHaveNoNoteOfUnfinishedWork(t *testing.T) {
	for _, c := range []struct {
		line       string
		unfinished bool
	}{
		{"Not done yet: bans kept in the database", true},
		{"Not yet: the ban routes", true},
		{"- TODO: document the ban routes", true},
		{"The metrics are not implemented yet.", true},
		{"FIXME the example", true},
		{"Webhooks in Node: coming soon.", true},
		{"only keys not yet expired that expire within this long (`7d`)", false},
		{"keys not yet seen answer 503 `unavailable`", false},
		{"a todo list of pets", false},
	} {
		if got := unfinishedNote.MatchString(c.line); got != c.unfinished {
			t.Errorf("%q counted as unfinished work: %v, want %v", c.line, got, c.unfinished)
		}
	}
	for name, page := range docPages(t) {
		for i, line := range strings.Split(page, "\n") {
			if unfinishedNote.MatchString(line) {
				t.Errorf("%s:%d says the work is not done: %q", name, i+1, line)
			}
		}
	}
}

// TestREADMEListsEveryCommand holds the README's command list to the
// commands the binary knows, in help's words and order.
func TestREADMEListsEveryCommand(t *testing.T) {
	_, section, ok := strings.Cut(docPages(t)["README.md"], "## Command line\n\n")
	if !ok {
		t.Fatal("README.md has no Command line section")
	}
	block, _, _ := strings.Cut(section, "\n\n")
	var want strings.Builder
	for _, line := range commandLines() {
		want.WriteString("    " + line + "\n")
	}
	if block+"\n" != want.String() {
		t.Errorf("README's command list is not petstore help's; want:\n%s\ngot:\n%s", want.String(), block)
	}
}

// openapiYAML is the public API's document as the binary embeds it.
func openapiYAML(t *testing.T) []byte {
	t.Helper()
	b, err := files.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
