package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// The recipe of docs/production.md's "Try ACME on a laptop", run as
// written, as the README's first session is: each block through sh in one
// directory, the servers' blocks in the background, with Pebble built from
// the Go module proxy (testkit.PebbleBinaries) and the petstore binary on PATH.
// Names resolve through Pebble's DNS stand-in, never the machine's
// resolver. The test's own ports stand in for the recipe's, so that it
// runs beside anything else on the machine.
func TestACMEOnALaptopRunsAsShown(t *testing.T) {
	t.Parallel()
	blocks := codeBlocks(t, "docs/production.md", docPages(t)["docs/production.md"], "### Try ACME on a laptop")
	if len(blocks) != 5 {
		t.Fatalf("read %d blocks from the recipe, want the setup, the DNS stand-in, Pebble, the server and the checks: %q", len(blocks), blocks)
	}
	mod, version, _ := strings.Cut(testkit.PebbleModule, "@")
	install := "go install " + mod + "/cmd/pebble@" + version + " " + mod + "/cmd/pebble-challtestsrv@" + version
	setup, ok := strings.CutPrefix(blocks[0], install+"\n")
	if !ok {
		t.Fatalf("the recipe's first block does not begin with %q (internal/testkit's version): %q", install, blocks[0])
	}
	// What the go install of the recipe makes, and the module in the
	// cache, where the recipe copies Pebble's test certificates from.
	path := strings.Join([]string{testkit.PebbleBinaries(t), filepath.Dir(testkit.PetstoreBinary(t)), os.Getenv("PATH")}, string(os.PathListSeparator))
	download := exec.Command("go", "mod", "download", testkit.PebbleModule)
	download.Dir = os.TempDir()
	if out, err := download.CombinedOutput(); err != nil {
		t.Fatalf("go mod download %s: %v\n%s", testkit.PebbleModule, err, out)
	}

	ports := map[string]string{}
	for _, p := range []string{"5001", "5002", "8053", "8055", "14000", "15000"} {
		_, own := splitPort(testkit.FreeAddr(t))
		ports[p] = fmt.Sprint(own)
	}
	stands := func(block string) string {
		return regexp.MustCompile(`\b(5001|5002|8053|8055|14000|15000)\b`).ReplaceAllStringFunc(block, func(p string) string { return ports[p] })
	}
	dir := t.TempDir()
	env := append(os.Environ(), "PATH="+path)
	if out, err := shellBlock(dir, env, stands(setup)).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", setup, err, out)
	}
	for i, ready := range []string{"Starting management server", "ACME directory available at", "msg=serving addr=https://"} {
		out := backgroundBlock(t, dir, env, stands(blocks[i+1]))
		testkit.Eventually(t, 60*time.Second, "the output of "+blocks[i+1]+" says "+ready, func() bool { return strings.Contains(out.String(), ready) })
		if i == 1 {
			testkit.Eventually(t, 5*time.Second, "Pebble's directory accepts connections", func() bool {
				c, err := net.DialTimeout("tcp", "127.0.0.1:"+ports["14000"], time.Second)
				if err == nil {
					c.Close()
				}
				return err == nil
			})
		}
		if i == 2 && !strings.Contains(out.String(), `level=INFO msg="certificate obtained successfully" component=acme identifier=api.petstore.test`) {
			t.Errorf("the server serves without saying it obtained its certificate:\n%s", out)
		}
	}
	checks := stands(blocks[4])
	out, err := shellBlock(dir, env, checks).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != `{"status":"ok"}` {
		t.Errorf("%s\n%v, output %q; want /healthz's {\"status\":\"ok\"} alone", checks, err, out)
	}
}

// shellBlock is sh running block in dir with env, stopping at the first
// command that fails.
func shellBlock(dir string, env []string, block string) *exec.Cmd {
	cmd := exec.Command("sh", "-ec", block)
	cmd.Dir, cmd.Env = dir, env
	return cmd
}

// backgroundBlock runs block as shellBlock does, in a process group of its
// own ended with the test, and returns its output.
func backgroundBlock(t *testing.T, dir string, env []string, block string) *testkit.SyncBuffer {
	t.Helper()
	cmd := shellBlock(dir, env, block)
	out := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", block, err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("$ %s\n%s", block, out)
		}
	})
	return out
}
