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
	"runtime"
	"runtime/debug"
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
	if err == nil || errors.Is(err, errHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "petstore: %v\n", err)
	var usage *usageError
	if errors.As(err, &usage) {
		return 2
	}
	return 1
}

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

const topUsage = `usage:
  petstore [serve] [--addr HOST:PORT] [--db FILE|URL] [--env production|staging] [flags]
  petstore keys create [--db FILE|URL] --plan free|pro|business|enterprise [--name TEXT] [--rpm N --rpd N] [--expires TIME|DURATION] [--scope SCOPE,...]
  petstore keys list   [--db FILE|URL] [--idle DURATION] [--expiring DURATION] [--json]
  petstore keys update [--db FILE|URL] KEY_ID [--plan PLAN] [--rpm N --rpd N] [--name TEXT] [--scope SCOPE,...] [--expires TIME|DURATION|never]
  petstore keys roll   [--db FILE|URL] KEY_ID [--overlap DURATION]
  petstore keys revoke [--db FILE|URL] KEY_ID
  petstore admin create [--db FILE|URL] --name NAME [--scope keys:read,keys:write,audit:read,webhooks]
  petstore admin list   [--db FILE|URL] [--json]
  petstore admin revoke [--db FILE|URL] ID
  petstore usage       [--db FILE|URL] --key ID [--days N] [--json]
  petstore audit       [--db FILE|URL] [--since 24h|RFC3339] [--key ID] [--action NAME] [--json]
  petstore webhooks add        [--db FILE|URL] URL [--events TYPE,...]
  petstore webhooks list       [--db FILE|URL] [--json]
  petstore webhooks remove     [--db FILE|URL] ID
  petstore webhooks rotate     [--db FILE|URL] ID [--overlap 24h]
  petstore webhooks enable     [--db FILE|URL] ID
  petstore webhooks test       [--db FILE|URL] ID
  petstore webhooks deliveries [--db FILE|URL] [--endpoint ID] [--failed] [--limit N] [--json]
  petstore webhooks resend     [--db FILE|URL] EVENT_ID|--failed [--endpoint ID]
  petstore bans list   [--db FILE|URL] [--json]
  petstore bans lift   [--db FILE|URL] key:ID|address:IP
  petstore migrate     [--db FILE|URL]   (as the role that owns the tables)
  petstore backup      [--db FILE] --out FILE
  petstore copy        --from FILE --to postgres://USER@HOST:PORT/DATABASE [--env ENV]
  petstore healthcheck [--url URL]   (exit 0 when the server's /readyz answers 200 within 2 s)
  petstore version

Every flag may also be set as PETSTORE_<FLAG> in the environment (--ban-after
as PETSTORE_BAN_AFTER); a flag on the command line wins. Run a command with
-h for its flags.
`

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
	command := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		command, args = args[0], args[1:]
	}
	switch command {
	case "serve":
		return serveCommand(ctx, args, getenv, stdout, stderr)
	case "keys":
		if len(args) == 0 {
			return usagef("keys needs a command: create, list, update, roll or revoke")
		}
		switch args[0] {
		case "create":
			return keysCreate(ctx, args[1:], getenv, stdout, stderr)
		case "list":
			return keysList(ctx, args[1:], getenv, stdout)
		case "roll":
			return keysRoll(ctx, args[1:], getenv, stdout, stderr)
		case "revoke":
			return keysRevoke(ctx, args[1:], getenv, stdout)
		case "update":
			return keysUpdate(ctx, args[1:], getenv, stdout)
		}
		return usagef("unknown keys command %q: use create, list, update, roll or revoke", args[0])
	case "admin":
		if len(args) == 0 {
			return usagef("admin needs a command: create, list or revoke")
		}
		switch args[0] {
		case "create":
			return adminCreate(ctx, args[1:], getenv, stdout, stderr)
		case "list":
			return adminList(ctx, args[1:], getenv, stdout)
		case "revoke":
			return adminRevoke(ctx, args[1:], getenv, stdout)
		}
		return usagef("unknown admin command %q: use create, list or revoke", args[0])
	case "usage":
		return usageCommand(ctx, args, getenv, stdout)
	case "audit":
		return auditCommand(ctx, args, getenv, stdout)
	case "bans":
		return bansCommand(ctx, args, getenv, stdout)
	case "webhooks":
		return webhooksCommand(ctx, args, getenv, stdout, stderr)
	case "migrate":
		return migrateCommand(ctx, args, getenv, stdout, stderr)
	case "backup":
		return backupCommand(ctx, args, getenv, stderr)
	case "copy":
		return copyCommand(ctx, args, getenv, stdout, stderr)
	case "healthcheck":
		return healthcheckCommand(ctx, args, getenv, stdout)
	case "version":
		fmt.Fprintln(stdout, versionString())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, topUsage)
		return nil
	}
	return usagef("unknown command %q: use serve, keys, admin, usage, audit, bans, webhooks, migrate, backup, copy, healthcheck or version (petstore help lists them)", command)
}

func versionString() string {
	b := readBuildInfo()
	out := "petstore " + b.version
	if b.revision != "unknown" {
		out += " (" + b.revision + b.modified + " " + b.time + ")"
	}
	return out + " " + b.goVersion
}

// buildInfo is what the binary knows of its own build, for --version and
// petstore_build_info.
type buildInfo struct {
	version   string // the module version, "(devel)" for a local build
	revision  string // the VCS commit, "unknown" without one
	modified  string // "+dirty" when built from a modified tree
	time      string // the commit time
	goVersion string
}

func readBuildInfo() buildInfo {
	b := buildInfo{version: "unknown", revision: "unknown", goVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.version, b.goVersion = info.Main.Version, info.GoVersion
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.time":
			b.time = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				b.modified = "+dirty"
			}
		}
	}
	return b
}
