package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"petstore/internal/cli"
	"petstore/internal/server"
	"petstore/internal/servertest"
	"petstore/internal/store"
	"petstore/internal/testkit"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestKeysCreateHintWorksAsPrinted(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  serveConfig
		want string
	}{
		{"a SQLite file", serveConfig{Config: server.Config{DBFlags: cli.DBFlags{Env: "production", DB: "petstore.db"}}},
			"petstore keys create --db petstore.db --plan pro --name my-app"},
		{"a file with a space, on staging", serveConfig{Config: server.Config{DBFlags: cli.DBFlags{Env: "staging", DB: "/srv/pet store/s.db"}}},
			"petstore keys create --db '/srv/pet store/s.db' --env staging --plan pro --name my-app"},
		{"a URL with a user only", serveConfig{Config: server.Config{DBFlags: cli.DBFlags{Env: "production", DB: "postgres://app@db:5432/pets"}}},
			"petstore keys create --db postgres://app@db:5432/pets --plan pro --name my-app"},
		{"a URL with a password", serveConfig{Config: server.Config{DBFlags: cli.DBFlags{Env: "production", DB: "postgres://app:s3cret@db:5432/pets?sslmode=require&search_path=shop"}}},
			"petstore keys create --db 'postgres://app@db:5432/pets?sslmode=require&search_path=shop' --plan pro --name my-app"},
		{"a password as a parameter", serveConfig{Config: server.Config{DBFlags: cli.DBFlags{Env: "production", DB: "postgres://app@db/pets?password=s3cret"}}},
			"petstore keys create --db postgres://app@db/pets --plan pro --name my-app"},
		{"a password as a parameter, no user", serveConfig{Config: server.Config{DBFlags: cli.DBFlags{Env: "production", DB: "postgres://db/pets?password=s3cret&user=app"}}},
			"petstore keys create --db 'postgres://db/pets?user=app' --plan pro --name my-app"},
	} {
		got, _, _ := strings.Cut(keysCreateHint(c.cfg), "\n")
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		hint := keysCreateHint(c.cfg)
		if strings.Contains(hint, "s3cret") || strings.Contains(hint, "xxxxx") {
			t.Errorf("%s: the hint holds a password or a mask: %q", c.name, hint)
		}
		if said := strings.Contains(hint, "PGPASSWORD"); said != strings.Contains(c.name, "password") {
			t.Errorf("%s: the hint says where the password comes from: %v, want it when one was left out", c.name, said)
		}
	}
}

// On a terminal the first key is shown, as a person starting the server by
// hand expects, with a keys create command that runs as printed.
func TestFirstStartOnATerminalShowsTheKeyAndACommandThatWorks(t *testing.T) {
	t.Parallel()
	script, err := exec.LookPath("script") // util-linux: runs a command on a pseudo-terminal
	if err != nil {
		t.Fatalf("script (util-linux) is needed for a terminal: %v", err)
	}
	bin := testkit.PetstoreBinary(t)
	servertest.EachStoreInDir(t, func(t *testing.T, dir, db string) {
		args := withTestRedis(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db})
		line := shellWord(bin)
		for _, a := range args {
			line += " " + shellWord(a)
		}
		cmd := exec.Command(script, "-qefc", line, "/dev/null")
		cmd.Dir, cmd.Env = dir, testkit.CommandEnv(nil)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out := &testkit.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); <-exited }()
		testkit.WaitServing(t, out, exited)

		screen := strings.ReplaceAll(out.String(), "\r", "")
		if !strings.Contains(screen, "It is shown only this once: keep it.") || !testkit.AnyKey.MatchString(screen) {
			t.Fatalf("no key shown on the terminal:\n%s", screen)
		}
		if files, _ := filepath.Glob(filepath.Join(dir, "*bootstrap-key*")); len(files) > 0 {
			t.Errorf("the key was also written to %v", files)
		}
		more := regexp.MustCompile(`More: +petstore (.+)`).FindStringSubmatch(screen)
		if more == nil {
			t.Fatalf("no keys create command on the terminal:\n%s", screen)
		}
		if strings.Contains(more[1], "xxxxx") {
			t.Errorf("the command holds a masked password: %s", more[1])
		}
		sh := exec.Command("sh", "-c", shellWord(bin)+" "+more[1])
		sh.Dir, sh.Env = dir, append(testkit.CommandEnv(nil), "PGPASSWORD=unused-by-trust-auth")
		stdout, err := sh.Output()
		if err != nil || !testkit.AnyKey.Match(stdout) {
			t.Errorf("petstore %s: %v, %q; want a new key", more[1], err, stdout)
		}
	})
}

// A first start that cannot write the first key's file (here its directory
// is a file, which stops root too) stops with exit status 1 and one line
// naming the place and --bootstrap-key-file, and makes no key: the next
// start, given a place it can write, makes one and writes it there.
func TestAnUnwritableBootstrapKeyFileStopsTheFirstStartWithNoKeyMade(t *testing.T) {
	t.Parallel()
	servertest.EachStoreInDir(t, func(t *testing.T, dir, db string) {
		notADir := filepath.Join(dir, "a-file")
		if err := os.WriteFile(notADir, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		place := filepath.Join(notADir, "petstore.bootstrap-key")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var stderr testkit.SyncBuffer
		args := append([]string{"petstore"}, withTestRedis(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--bootstrap-key-file", place})...)
		code := exitCode(run(ctx, args, func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr), &stderr)
		var said []string
		for line := range strings.Lines(stderr.String()) {
			if strings.HasPrefix(line, "petstore: ") {
				said = append(said, line)
			}
		}
		if code != 1 || len(said) != 1 || !strings.Contains(said[0], place) || !strings.Contains(said[0], "--bootstrap-key-file") {
			t.Fatalf("exit status %d, stderr:\n%s\nwant 1 and one line naming %s and --bootstrap-key-file", code, stderr.String(), place)
		}
		st, err := store.Open(context.Background(), db, false, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := st.Keys(context.Background())
		st.Close()
		if err != nil || len(keys) != 0 {
			t.Fatalf("keys after the start that could not write the key: %+v, %v; want none", keys, err)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*bootstrap-key*")); len(left) != 0 {
			t.Errorf("files left: %v", left)
		}

		writable := filepath.Join(dir, "first.key")
		p := runServing(t, map[string]string{"PETSTORE_BOOTSTRAP_KEY_FILE": writable}, withTestRedis(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db})...)
		key := testkit.BootstrapKeyIn(t, p.stderr.String())
		if !testkit.AnyKey.MatchString(key) || !strings.Contains(p.stderr.String(), writable) {
			t.Fatalf("the next start wrote %q, log:\n%s\nwant a key in %s", key, p.stderr.String(), writable)
		}
		res := faultDo(&http.Client{Timeout: 5 * time.Second}, "GET", p.url+"/v1/pets", key, "")
		if res.status != http.StatusOK {
			t.Errorf("GET /v1/pets with the key written: %d %s %v", res.status, res.body, res.err)
		}
		if fi, err := os.Stat(writable); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the key's file: %v, %v; want it readable by its owner only", fi, err)
		}
	})
}
