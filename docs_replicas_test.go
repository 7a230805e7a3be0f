package main

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"petstore/internal/testkit"

	"github.com/jackc/pgx/v5"
)

// laptopSession reads the commands of docs/replicas.md's "On a laptop":
// every line of its indented blocks, a line ending in \ joined to the next.
func laptopSession(t *testing.T) []string {
	t.Helper()
	var commands []string
	for _, block := range codeBlocks(t, "docs/replicas.md", docPages(t)["docs/replicas.md"], "## On a laptop") {
		commands = append(commands, shellCommands(block)...)
	}
	return commands
}

// The laptop recipe of docs/replicas.md, run as written, as the README's
// first session is: its role and database are made with psql as PostgreSQL's
// superuser, two servers run on them and a Redis, HAProxy on an unprivileged
// port sends requests to both, and a pet created through it is read back.
// The test's own names and ports stand in for the recipe's, so that it runs
// beside anything else on the machine.
func TestReplicasLaptopRecipeRunsAsShown(t *testing.T) {
	t.Parallel()
	haproxy := testkit.BalancerBinary(t, "haproxy")
	redis := startRedisProcess(t, testkit.BalancerBinary(t, "redis-server"))
	psql, err := exec.LookPath("psql")
	if err != nil {
		t.Skip("psql is not installed (apt-get install postgresql-client)")
	}
	base, err := url.Parse(testkit.PostgresServer(t))
	if err != nil {
		t.Fatal(err)
	}
	commands := laptopSession(t)
	if len(commands) < 8 {
		t.Fatalf("read %d commands from the laptop recipe, want the role, the database, two exports, two servers, HAProxy, a key and curl: %q", len(commands), commands)
	}

	name := "petstore_laptop_" + strings.ToLower(rand.Text()[:10])
	lb, first, second := testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	stands := strings.NewReplacer(
		"127.0.0.1:5432", base.Host,
		"redis://127.0.0.1:6379/0", redis.url,
		"localhost:8080", lb, "127.0.0.1:8080", lb, "127.0.0.1:8081", first, "127.0.0.1:8082", second,
	)
	ownName := regexp.MustCompile(`\bpetstore\b`)
	t.Cleanup(func() { dropLaptopDatabase(t, base.String(), name) })

	dir := t.TempDir()
	vars := map[string]string{}
	env := map[string]string{} // what export set
	for _, command := range commands {
		command = ownName.ReplaceAllString(stands.Replace(command), name)
		t.Logf("$ %s", command)
		words := shellWords(command, vars)
		// NAME=VALUE before a command: its environment.
		local := map[string]string{}
		for len(words) > 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(words[0]) && !strings.HasPrefix(words[0], "KEY=") {
			k, v, _ := strings.Cut(words[0], "=")
			local[k], words = v, words[1:]
		}
		switch {
		case words[0] == "psql":
			cmd := exec.Command(psql, words[1:]...)
			cmd.Env = append(os.Environ(), "PGPORT="+base.Port())
			if password, ok := base.User.Password(); ok {
				cmd.Env = append(cmd.Env, "PGPASSWORD="+password)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", command, err, out)
			}
		case words[0] == "export":
			k, v, _ := strings.Cut(words[1], "=")
			env[k] = v
		case strings.Join(words, " ") == "go run . serve":
			laptopServer(t, dir, withEnv(env, local))
		case words[0] == "haproxy":
			conf := words[len(words)-1]
			raw, err := os.ReadFile(conf)
			if err != nil {
				t.Fatal(err)
			}
			own := filepath.Join(dir, filepath.Base(conf))
			if err := os.WriteFile(own, []byte(stands.Replace(string(raw))), 0o600); err != nil {
				t.Fatal(err)
			}
			testkit.StartProcess(t, "haproxy", haproxy, append(words[1:len(words)-1], own)...)
			testkit.Eventually(t, 10*time.Second, "HAProxy finds both servers ready", func() bool {
				for range 2 {
					resp, err := http.Get("http://" + lb + "/readyz")
					if err != nil {
						return false
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						return false
					}
				}
				return true
			})
		case strings.HasPrefix(words[0], "KEY=$(go"):
			args := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(command, "KEY=$(go run . "), ")"))
			res := testkit.RunPetstore(t, dir, env, args...)
			if res.Code != 0 || !testkit.AnyKey.MatchString(strings.TrimSpace(res.Stdout)) {
				t.Fatalf("%s: exit %d, stdout %q, stderr %s", command, res.Code, res.Stdout, res.Stderr)
			}
			vars["KEY"] = strings.TrimSpace(res.Stdout)
		case words[0] == "curl":
			laptopCurl(t, command, words)
		default:
			t.Fatalf("the laptop recipe runs %q: the test knows psql, export, go run . serve, haproxy, keys create and curl", command)
		}
	}
}

// withEnv is env with more.
func withEnv(env, more map[string]string) map[string]string {
	all := map[string]string{}
	for k, v := range env {
		all[k] = v
	}
	for k, v := range more {
		all[k] = v
	}
	return all
}

// laptopServer runs petstore serve in dir with env as its PETSTORE_*
// variables until the test ends, and waits until it is ready.
func laptopServer(t *testing.T, dir string, env map[string]string) {
	t.Helper()
	cmd := exec.Command(testkit.PetstoreBinary(t), "serve")
	cmd.Dir, cmd.Env = dir, testkit.CommandEnv(env)
	var out testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("petstore serve with %v:\n%s", env, out.String())
		}
	})
	testkit.Eventually(t, 15*time.Second, "the server on "+env["PETSTORE_ADDR"]+" is ready", func() bool {
		resp, err := http.Get("http://" + env["PETSTORE_ADDR"] + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// laptopCurl sends the request of a curl command line and wants a success.
func laptopCurl(t *testing.T, command string, words []string) {
	t.Helper()
	req := curlRequest(t, command, words, func(word string) (string, bool) { return word, true })
	resp, body, err := testkit.ReadResponse(http.DefaultClient, req)
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	if resp.StatusCode >= 300 || !strings.Contains(string(body), `"name":"Rex"`) {
		t.Errorf("%s: %d %s, want a success with the pet", command, resp.StatusCode, body)
	}
}

// dropLaptopDatabase drops the database and role the recipe made.
func dropLaptopDatabase(t *testing.T, base, name string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Errorf("drop %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	id := pgx.Identifier{name}.Sanitize()
	for _, sql := range []string{"DROP DATABASE IF EXISTS " + id + " WITH (FORCE)", "DROP ROLE IF EXISTS " + id} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Errorf("%s: %v", sql, err)
		}
	}
}
