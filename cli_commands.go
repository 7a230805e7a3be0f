// The table of petstore's commands: run dispatches through it, petstore help
// (and --help, -h) prints its usage lines, and a docs test holds the
// README's command list to it.

package main

import (
	"context"
	"fmt"
	"io"
	"petstore/internal/cli"
	"strings"
)

// commandFunc runs one command with its arguments (after its name).
type commandFunc func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// cliCommand is one command: its name ("serve", or a group and a command
// such as "keys create"), its flags and arguments as the usage line shows
// them, and what runs it.
type cliCommand struct {
	name  string
	usage string
	run   commandFunc
}

// cliCommands are every command petstore knows, in the order help lists them.
func cliCommands() []cliCommand {
	return []cliCommand{
		{"serve", "[--addr HOST:PORT] [--db FILE|URL] [--env production|staging] [flags]", serveCommand},
		{"keys create", "[--db FILE|URL] --plan free|pro|business|enterprise [--name TEXT] [--rpm N --rpd N] [--expires TIME|DURATION] [--scope SCOPE,...] [--external-id TEXT]", cli.KeysCreate},
		{"keys list", "[--db FILE|URL] [--idle DURATION] [--expiring DURATION] [--json]", cli.KeysList},
		{"keys update", "[--db FILE|URL] KEY_ID [--plan PLAN] [--rpm N --rpd N] [--name TEXT] [--scope SCOPE,...] [--expires TIME|DURATION|never] [--external-id TEXT|\"\"]", cli.KeysUpdate},
		{"keys roll", "[--db FILE|URL] KEY_ID [--overlap DURATION]", cli.KeysRoll},
		{"keys revoke", "[--db FILE|URL] KEY_ID", cli.KeysRevoke},
		{"admin create", "[--db FILE|URL] --name NAME [--scope keys:read,keys:write,audit:read,webhooks]", cli.AdminCreate},
		{"admin list", "[--db FILE|URL] [--json]", cli.AdminList},
		{"admin revoke", "[--db FILE|URL] ID", cli.AdminRevoke},
		{"usage", "[--db FILE|URL] --key ID [--days N] [--json]", cli.UsageReport},
		{"audit", "[--db FILE|URL] [--since 24h|RFC3339] [--key ID] [--action NAME] [--json]", cli.Audit},
		{"webhooks add", "[--db FILE|URL] URL [--events TYPE,...]", cli.WebhooksAdd},
		{"webhooks list", "[--db FILE|URL] [--json]", cli.WebhooksList},
		{"webhooks remove", "[--db FILE|URL] ID", cli.WebhooksRemove},
		{"webhooks rotate", "[--db FILE|URL] ID [--overlap 24h]", cli.WebhooksRotate},
		{"webhooks enable", "[--db FILE|URL] ID", cli.WebhooksEnable},
		{"webhooks test", "[--db FILE|URL] ID", cli.WebhooksTest},
		{"webhooks deliveries", "[--db FILE|URL] [--endpoint ID] [--failed] [--limit N] [--json]", cli.WebhooksDeliveries},
		{"webhooks resend", "[--db FILE|URL] EVENT_ID|--failed [--endpoint ID]", cli.WebhooksResend},
		{"bans list", "[--db FILE|URL] [--json]", cli.BansList},
		{"bans lift", "[--db FILE|URL] key:ID|address:IP", cli.BansLift},
		{"migrate", "[--db FILE|URL] [--contract [--force]]   (as the role that owns the tables)", cli.Migrate},
		{"backup", "[--db FILE] --out FILE", cli.Backup},
		{"restore", "--from s3://BUCKET/PATH|file:///PATH [--db FILE] [--at RFC3339] [--force]", cli.Restore},
		{"copy", "--from FILE --to postgres://USER@HOST:PORT/DATABASE [--env ENV]", cli.Copy},
		{"healthcheck", "[--url URL] [--server-name NAME] [--ca-root FILE]   (exit 0 when the server's /readyz answers 200 within 2 s, over http or https)", healthcheckCommand},
		{"version", "(or petstore --version)", versionCommand},
	}
}

func versionCommand(_ context.Context, _ []string, _ func(string) string, stdout, _ io.Writer) error {
	fmt.Fprintln(stdout, versionString())
	return nil
}

// findCommand picks the command args start with, and returns it with the
// arguments after its name. A group ("keys") needs one of its commands.
func findCommand(args []string) (cliCommand, []string, error) {
	var inGroup []string
	for _, c := range cliCommands() {
		group, sub, grouped := strings.Cut(c.name, " ")
		switch {
		case !grouped && c.name == args[0]:
			return c, args[1:], nil
		case grouped && group == args[0]:
			if len(args) > 1 && args[1] == sub {
				return c, args[2:], nil
			}
			inGroup = append(inGroup, sub)
		}
	}
	switch {
	case len(inGroup) > 0 && len(args) == 1:
		return cliCommand{}, nil, cli.Usagef("%s needs a command: %s", args[0], orList(inGroup))
	case len(inGroup) > 0:
		return cliCommand{}, nil, cli.Usagef("unknown %s command %q: use %s", args[0], args[1], orList(inGroup))
	}
	return cliCommand{}, nil, cli.Usagef("unknown command %q: use %s (petstore help lists them)", args[0], orList(commandGroups()))
}

// commandGroups are the first words of the commands, each once.
func commandGroups() []string {
	var groups []string
	for _, c := range cliCommands() {
		group, _, _ := strings.Cut(c.name, " ")
		if len(groups) == 0 || groups[len(groups)-1] != group {
			groups = append(groups, group)
		}
	}
	return groups
}

// orList is "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// commandLines are the usage lines of every command, as help prints them
// and README.md lists them: each group's names padded to one width.
func commandLines() []string {
	commands := cliCommands()
	width := map[string]int{}
	for _, c := range commands {
		width[usageGroup(c)] = max(width[usageGroup(c)], len(usageName(c)))
	}
	lines := make([]string, len(commands))
	for i, c := range commands {
		lines[i] = fmt.Sprintf("petstore %-*s %s", width[usageGroup(c)], usageName(c), c.usage)
	}
	return lines
}

// usageGroup is the group whose names are padded to one width: the first
// word of a two-word command, "" for a command of one word.
func usageGroup(c cliCommand) string {
	group, _, grouped := strings.Cut(c.name, " ")
	if !grouped {
		return ""
	}
	return group
}

// usageName is the command's name on its usage line: serve is optional.
func usageName(c cliCommand) string {
	if c.name == "serve" {
		return "[serve]"
	}
	return c.name
}

// writeHelp prints what petstore help, --help and -h print: every command,
// then the flags of serve, the command petstore runs without one.
func writeHelp(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	fmt.Fprintln(stdout, "usage:")
	for _, line := range commandLines() {
		fmt.Fprintln(stdout, "  "+line)
	}
	fmt.Fprint(stdout, `
Every flag may also be set as PETSTORE_<FLAG> in the environment (--ban-after
as PETSTORE_BAN_AFTER); a flag on the command line wins. Run a command with
-h for its flags.

`)
	return serveCommand(ctx, []string{"-h"}, getenv, stdout, stderr)
}
