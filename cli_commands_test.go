package main

import (
	"bytes"
	"context"
	"petstore/internal/cli"
	"strings"
	"testing"
)

func TestHelpListsEveryCommandAndTheServeFlags(t *testing.T) {
	for _, arg := range []string{"help", "--help", "-h"} {
		t.Run(arg, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"petstore", arg}, func(string) string { return "" }, nil, &stdout, &stderr)
			if err != nil && err != cli.ErrHelp {
				t.Fatalf("petstore %s: %v", arg, err)
			}
			for _, line := range commandLines() {
				if !strings.Contains(stdout.String(), "  "+line+"\n") {
					t.Errorf("petstore %s does not list %q:\n%s", arg, line, stdout.String())
				}
			}
			for _, flag := range []string{"-addr", "-admin-addr", "-redis", "-ban-for"} {
				if !strings.Contains(stdout.String(), "  "+flag+" ") {
					t.Errorf("petstore %s does not show serve's %s", arg, flag)
				}
			}
		})
	}
}

func TestEveryCommandOfAGroupIsNamedWhenOneIsMissingOrUnknown(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"keys", "keys needs a command: create, list, update, roll or revoke"},
		{"webhooks nope", `unknown webhooks command "nope": use add, list, remove, rotate, enable, test, deliveries or resend`},
		{"bans", "bans needs a command: list or lift"},
		{"pets", `unknown command "pets": use serve, keys, admin, usage, audit, webhooks, bans, migrate, backup, restore, copy, healthcheck or version`},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"petstore"}, strings.Fields(c.args)...), func(string) string { return "" }, nil, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) || exitCode(err, &stderr) != 2 {
			t.Errorf("petstore %s: %v, want a usage mistake saying %q", c.args, err, c.want)
		}
	}
}
