package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"petstore/internal/cli"
	"petstore/internal/testkit"
)

// The commands of internal/cli that the server's tests run on a server's
// database, as petstore runs them: by name, with no environment, and with
// its exit status (the command line itself is tested in the root).

// cliResult is what a command wrote and its exit status.
type cliResult struct {
	stdout, stderr string
	code           int // exit status
}

// cliCommandsByName are the commands these tests run.
var cliCommandsByName = map[string]func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error{
	"keys create": cli.KeysCreate, "keys update": cli.KeysUpdate, "keys list": cli.KeysList,
	"audit": cli.Audit, "copy": cli.Copy, "webhooks add": cli.WebhooksAdd, "admin create": cli.AdminCreate,
}

// viaCLI runs the command args begin with, with env as its only PETSTORE_*
// variables: exit status 2 for a usage mistake, 1 for another failure.
func viaCLI(t *testing.T, env map[string]string, args ...string) cliResult {
	t.Helper()
	name, rest := args[0], args[1:]
	command, ok := cliCommandsByName[name]
	if !ok && len(args) > 1 {
		name, rest = args[0]+" "+args[1], args[2:]
		command, ok = cliCommandsByName[name]
	}
	if !ok {
		t.Fatalf("no command %q among the tests' own", strings.Join(args, " "))
	}
	var stdout, stderr bytes.Buffer
	err := command(context.Background(), rest, func(name string) string { return env[name] }, &stdout, &stderr)
	code := 0
	if err != nil {
		fmt.Fprintf(&stderr, "petstore: %v\n", err)
		code = 1
		if usage := (*cli.UsageError)(nil); errors.As(err, &usage) {
			code = 2
		}
	}
	return cliResult{stdout.String(), stderr.String(), code}
}

// wantFailure checks a failed command (testkit.WantFailure).
func wantFailure(t *testing.T, res cliResult, code int) {
	t.Helper()
	testkit.WantFailure(t, res.stdout, res.stderr, res.code, code)
}
