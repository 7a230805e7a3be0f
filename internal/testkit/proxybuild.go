package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// proxyBuild is the commands of one module, built from the Go module proxy
// with go install on first use, into a directory of the temporary
// directory named for the module's version, where later test processes
// find them. A machine where they cannot be built fails the test, never
// skips it.
type proxyBuild struct {
	name   string   // what an error calls them
	module string   // path@version
	cmds   []string // below the module's cmd/
	env    []string // added to the build's environment

	once sync.Once
	err  error
}

// installed is the directory of b's commands.
func (b *proxyBuild) installed(t testing.TB) string {
	t.Helper()
	mod, version, _ := strings.Cut(b.module, "@")
	dir := filepath.Join(os.TempDir(), "petstore-"+strings.ToLower(b.name)+"-"+version)
	b.once.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, b.cmds[len(b.cmds)-1])); err == nil {
			return
		}
		args := []string{"install"}
		for _, c := range b.cmds {
			args = append(args, mod+"/cmd/"+c+"@"+version)
		}
		cmd := exec.Command("go", args...)
		cmd.Env = append(append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-buildvcs=false"), b.env...)
		cmd.Dir = os.TempDir()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build %s (%s) from the Go module proxy: %v\n%s", b.name, b.module, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return dir
}
