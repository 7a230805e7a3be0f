// Petstore is a JSON HTTP service that keeps a store's pets in SQLite and
// lets API clients list, add and read them, behind bearer API keys and
// per-plan rate limits. Run it with no arguments to serve on localhost:8080.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"petstore/internal/cli"
	"petstore/internal/server"
	"petstore/internal/store"
	"slices"
	"strings"
	"syscall"
)

func main() {
	err := run(context.Background(), os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode reports err on stderr and picks the exit status: 2 for a usage
// mistake, 1 for anything that went wrong while running.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, cli.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "petstore: %v\n", err)
	var usage *cli.UsageError
	if errors.As(err, &usage) {
		return 2
	}
	return 1
}

// run is the whole program; main only supplies the process's environment.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, a second one ends the process at once.
		<-ctx.Done()
		stop()
	}()

	args = args[1:]
	switch {
	case len(args) == 0 || strings.HasPrefix(args[0], "-") && !isHelp(args[0]):
		return serveCommand(ctx, args, getenv, stdout, stderr)
	case args[0] == "help" || isHelp(args[0]):
		return writeHelp(ctx, getenv, stdout, stderr)
	}
	command, rest, err := findCommand(args)
	if err != nil {
		return err
	}
	return command.run(ctx, rest, getenv, stdout, stderr)
}

// isHelp is true of -h and --help (and flag's -help and --h).
func isHelp(arg string) bool {
	return slices.Contains([]string{"-h", "--h", "-help", "--help"}, arg)
}

func versionString() string {
	b := server.ReadBuildInfo()
	out := "petstore " + b.Version
	if b.Revision != "unknown" {
		out += " (" + b.Revision + b.Modified + " " + b.Time + ")"
	}
	// The migrations it knows, which GET /admin/v1/servers compares with
	// the schema's (docs/replicas.md, "Upgrading a fleet").
	return out + " " + b.GoVersion + fmt.Sprintf(", %d migrations", len(store.Migrations))
}
