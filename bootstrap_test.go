package main

import (
	"os/exec"
	"path/filepath"
	"petstore/internal/cli"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

func TestKeysCreateHintWorksAsPrinted(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  serveConfig
		want string
	}{
		{"a SQLite file", serveConfig{DBFlags: cli.DBFlags{Env: "production", DB: "petstore.db"}},
			"petstore keys create --db petstore.db --plan pro --name my-app"},
		{"a file with a space, on staging", serveConfig{DBFlags: cli.DBFlags{Env: "staging", DB: "/srv/pet store/s.db"}},
			"petstore keys create --db '/srv/pet store/s.db' --env staging --plan pro --name my-app"},
		{"a URL with a user only", serveConfig{DBFlags: cli.DBFlags{Env: "production", DB: "postgres://app@db:5432/pets"}},
			"petstore keys create --db postgres://app@db:5432/pets --plan pro --name my-app"},
		{"a URL with a password", serveConfig{DBFlags: cli.DBFlags{Env: "production", DB: "postgres://app:s3cret@db:5432/pets?sslmode=require&search_path=shop"}},
			"petstore keys create --db 'postgres://app@db:5432/pets?sslmode=require&search_path=shop' --plan pro --name my-app"},
		{"a password as a parameter", serveConfig{DBFlags: cli.DBFlags{Env: "production", DB: "postgres://app@db/pets?password=s3cret"}},
			"petstore keys create --db postgres://app@db/pets --plan pro --name my-app"},
		{"a password as a parameter, no user", serveConfig{DBFlags: cli.DBFlags{Env: "production", DB: "postgres://db/pets?password=s3cret&user=app"}},
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
	bin := petstoreBinary(t)
	eachStoreInDir(t, func(t *testing.T, dir, db string) {
		args := withTestRedis(t, []string{"serve", "--addr", "127.0.0.1:0", "--db", db})
		line := shellWord(bin)
		for _, a := range args {
			line += " " + shellWord(a)
		}
		cmd := exec.Command(script, "-qefc", line, "/dev/null")
		cmd.Dir, cmd.Env = dir, commandEnv(nil)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		defer func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); <-exited }()
		waitServing(t, out, exited)

		screen := strings.ReplaceAll(out.String(), "\r", "")
		if !strings.Contains(screen, "It is shown only this once: keep it.") || !cliAnyKey.MatchString(screen) {
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
		sh.Dir, sh.Env = dir, append(commandEnv(nil), "PGPASSWORD=unused-by-trust-auth")
		stdout, err := sh.Output()
		if err != nil || !cliAnyKey.Match(stdout) {
			t.Errorf("petstore %s: %v, %q; want a new key", more[1], err, stdout)
		}
	})
}
