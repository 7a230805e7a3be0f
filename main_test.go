package main

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"petstore/internal/testkit"
)

// The root's suites wait on the binary, servers and browsers they start:
// four run at once (testkit.Main).
func TestMain(m *testing.M) { testkit.Main(m) }

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
			if !strings.Contains(res.Stderr, tt.flag) || !strings.Contains(res.Stderr, tt.want) {
				t.Errorf("standard error %q, want it to name %s and say %q", res.Stderr, tt.flag, tt.want)
			}
		})
	}
}

// A bad OTEL_* value is a usage mistake naming the variable, never a
// silent default (docs/observing.md, "Traces"): the SDK would fall back.
func TestServeRefusesABadTracingVariable(t *testing.T) {
	t.Parallel()
	tests := []struct{ variable, value string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "not a url"},
		{"OTEL_TRACES_SAMPLER_ARG", "2"},
		{"OTEL_TRACES_SAMPLER_ARG", "half"},
		{"OTEL_TRACES_SAMPLER", "sometimes"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "authorization"},
		{"OTEL_RESOURCE_ATTRIBUTES", "deployment=%zz"},
		{"OTEL_BSP_SCHEDULE_DELAY", "soon"},
	}
	for _, tt := range tests {
		t.Run(tt.variable+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", tt.variable: tt.value}
			res := viaRun(t, env, "serve", "--db", filepath.Join(t.TempDir(), "petstore.db"), "--addr", "127.0.0.1:0")
			wantFailure(t, res, 2)
			if !strings.Contains(res.Stderr, tt.variable) {
				t.Errorf("standard error %q does not name %s", res.Stderr, tt.variable)
			}
		})
	}
}

// main adds to run() only the process: the exit status picked from run's
// error, standard error, the environment and the working directory. The
// command-line suites run in this process (viaRunOnly); this table runs one
// session of commands both ways, each side on a database of its own, and
// wants the same from each (paths, keys and times aside), for every exit
// status and every group of commands.
func TestTheBinaryAnswersAsRunDoes(t *testing.T) {
	t.Parallel()
	testkit.PetstoreBinary(t)
	session := []struct {
		env  map[string]string
		args []string
		code int
	}{
		{nil, []string{"version"}, 0},
		{nil, []string{"keys", "create", "--db", "DIR/p.db", "--plan", "free", "--name", "laptop"}, 0},
		{map[string]string{"PETSTORE_PLAN": "pro"}, []string{"keys", "create", "--db", "DIR/p.db"}, 0},
		{nil, []string{"keys", "create", "--db", "DIR/p.db"}, 2},
		{nil, []string{"keys", "list", "--db", "DIR/p.db", "--json"}, 0},
		{nil, []string{"keys", "revoke", "--db", "DIR/p.db", "99"}, 1},
		{nil, []string{"keys", "list", "--db", "DIR/missing.db"}, 1},
		{nil, []string{"keys", "shout"}, 2},
		{nil, []string{"admin", "list", "--db", "DIR/p.db"}, 0},
		{nil, []string{"usage", "--db", "DIR/p.db", "--key", "1"}, 0},
		{nil, []string{"audit", "--db", "DIR/p.db", "--since", "soon"}, 2},
		{nil, []string{"webhooks", "add", "--db", "DIR/p.db", "http://0x7f000001/hook"}, 2},
		{nil, []string{"webhooks", "list", "--db", "DIR/p.db", "--json"}, 0},
		{nil, []string{"bans", "list", "--db", "DIR/p.db"}, 0},
		{nil, []string{"backup", "--db", "DIR/p.db"}, 2},
		{map[string]string{"PETSTORE_ADDR": "8081"}, []string{"serve", "--db", "DIR/p.db"}, 2},
		{nil, []string{"feed", "the", "cat"}, 2},
	}
	ran := map[string][]cliResult{}
	for side, petstore := range map[string]cliRunner{"run": viaRun, "binary": viaBinary} {
		dir := t.TempDir()
		for _, step := range session {
			args := slices.Clone(step.args)
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "DIR", dir)
			}
			res := petstore(t, step.env, args...)
			res.Stdout, res.Stderr = sameSession(res.Stdout, dir), sameSession(res.Stderr, dir)
			ran[side] = append(ran[side], res)
		}
	}
	for i, step := range session {
		run, binary := ran["run"][i], ran["binary"][i]
		if run.Code != step.code {
			t.Errorf("petstore %s: run() gave exit status %d, want %d\n%s", strings.Join(step.args, " "), run.Code, step.code, run.Stderr)
		}
		if binary != run {
			t.Errorf("petstore %s: the binary answered\n%+v\nrun() answered\n%+v", strings.Join(step.args, " "), binary, run)
		}
	}
}

// sessionVaries are what differs between two runs of one session: keys and times.
var sessionVaries = regexp.MustCompile(`psk_(live|test)_[0-9A-Za-z]{38}|\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?`)

// sameSession is out with its directory and what varies replaced by names.
func sameSession(out, dir string) string {
	return sessionVaries.ReplaceAllString(strings.ReplaceAll(out, dir, "DIR"), "VARIES")
}
