package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/webhook"
)

// The console as an owner sees it on a desktop and on a phone (docs/admin.md,
// "Console"): a banned key, deliveries that failed, a hostile name, at
// 1280, 390 and 360 px wide.

// consoleWorld is what the owner finds in the console: a banned key with
// large figures, a key with a hostile name on a plan without figures of
// its own, and an endpoint whose receiver answers 500 to everything.
type consoleWorld struct {
	banned, hostile domain.Key
	endpoint        int64
}

func newConsoleWorld(t *testing.T, c *consoleSession) consoleWorld {
	t.Helper()
	s := c.s
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	terms, err := manage.NewEndpointTerms(failing.URL+"/hooks", nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.store.AddWebhookEndpoint(context.Background(), terms, testActor, s.opts.env)
	if err != nil {
		t.Fatal(err)
	}
	if w := s.admin("POST", fmt.Sprintf("/admin/v1/webhooks/%d/test", e.ID), c.owner, ""); w.Code != http.StatusAccepted {
		t.Fatalf("a test event: %d %s", w.Code, w.Body)
	}
	s.deliverDue()
	for _, wait := range webhook.RetryDelays { // every attempt of the schedule, past each wait
		s.clock.advance(wait + wait/10 + time.Second)
		s.deliverDue()
	}

	tiny := s.keyTerms("pro")
	tiny.Name = "tiny-bot"
	banned, key := s.mustCreate(tiny)
	if w := s.admin("PATCH", fmt.Sprintf("/admin/v1/keys/%d", banned.ID), c.owner, `{"plan":"enterprise","perMinute":1,"perDay":1500000}`); w.Code != http.StatusOK {
		t.Fatalf("tiny-bot to enterprise: %d %s", w.Code, w.Body)
	}
	s.banOf(key, 20)
	s.flushAudit()
	s.flushUsage()
	odd := s.keyTerms("pro")
	odd.Name = hostile
	hostileKey, _ := s.mustCreate(odd)
	return consoleWorld{banned: banned, hostile: hostileKey, endpoint: e.ID}
}

// atWidth shows the console w pixels wide, as a phone below 800.
func (c *consoleSession) atWidth(ctx context.Context, w int) {
	c.page.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": w, "height": 900, "deviceScaleFactor": 1, "mobile": w < 800})
}

// checkFits fails the test when the page shown scrolls sideways.
func (c *consoleSession) checkFits(ctx context.Context, where string) {
	c.t.Helper()
	var fit struct {
		Scroll, Client int
		Tables         []int // how far each table scrolls in its box
	}
	c.page.eval(ctx, `({scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth,
		tables: [...document.querySelectorAll('.scroll')].map((e) => e.scrollWidth - e.clientWidth)})`, &fit)
	if fit.Scroll > fit.Client {
		c.t.Errorf("%s: the page is %d px wide in a window of %d: it scrolls sideways", where, fit.Scroll, fit.Client)
	}
	for _, over := range fit.Tables {
		if over > 0 {
			c.t.Errorf("%s: a table is %d px wider than its box: it scrolls sideways", where, over)
		}
	}
}

// seen is the text of selector as the reader sees it (innerText: nothing
// hidden).
func (c *consoleSession) seen(ctx context.Context, selector string) string {
	c.t.Helper()
	c.page.waitFor(ctx, selector, "document.querySelector("+jsString(selector)+")")
	var s string
	c.page.eval(ctx, "document.querySelector("+jsString(selector)+").innerText", &s)
	return s
}

func TestConsoleShowsBansFailuresAndHostileNamesOnADesktopAndAPhone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := openConsole(t, ctx)
	page := c.page
	defer c.b.checkNothingWentWrong() // an alert of the hostile name is a failure
	defer page.checkNoViolations(ctx)
	w := newConsoleWorld(t, c)
	c.signIn(ctx, c.owner)
	page.waitFor(ctx, "the keys page", `document.querySelector('.page[data-page=keys] tbody')`)
	keyPage := fmt.Sprintf("#/keys/%d", w.banned.ID)
	for _, width := range []int{1280, 390, 360} {
		c.atWidth(ctx, width)
		at := func(where string) string { return fmt.Sprintf("%s at %d px", where, width) }

		c.goTo(ctx, "#/keys", `document.querySelectorAll('.page[data-page=keys] tbody tr').length === 2`)
		c.checkFits(ctx, at("the keys"))
		list := c.seen(ctx, ".list")
		for _, want := range []string{"tiny-bot", "banned until", hostile} {
			if !strings.Contains(list, want) {
				t.Errorf("%s read %q, want %q in sight", at("the keys"), list, want)
			}
		}
		var hidden []string // of the name, the state and today's figure
		page.eval(ctx, `[...document.querySelectorAll('.list tbody tr:first-child td')].filter((td) => ['Name', 'State', 'Today'].includes(td.dataset.label))
			.filter((td) => td.getClientRects().length === 0 || td.getBoundingClientRect().right > document.documentElement.clientWidth).map((td) => td.dataset.label)`, &hidden)
		if len(hidden) != 0 {
			t.Errorf("%s: a key's %v are out of sight", at("the keys"), hidden)
		}
		page.screenshot(ctx, fmt.Sprintf("console-keys-%dpx", width))

		c.goTo(ctx, keyPage, `document.querySelector('.usage-chart') && document.querySelector('.limits .windows')`)
		c.checkFits(ctx, at("the banned key's page"))
		if got := c.seen(ctx, ".limits .ban"); !strings.Contains(got, "Banned until") || !strings.Contains(got, "Lift the ban") {
			t.Errorf("%s says %q, want the ban and a Lift button", at("the banned key's page"), got)
		}
		if got := c.seen(ctx, ".facts"); !strings.Contains(got, "1,500,000") || !strings.Contains(got, "banned until") {
			t.Errorf("%s shows the facts %q, want 1,500,000 a day and the ban", at("the banned key's page"), got)
		}
		var smallest float64
		page.eval(ctx, `(() => { const svg = document.querySelector('.usage-chart');
			const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
			return Math.min(...[...svg.querySelectorAll('.tick')].map((t) => parseFloat(getComputedStyle(t).fontSize) * scale)); })()`, &smallest)
		if smallest < 11.9 {
			t.Errorf("%s: the chart's smallest label is %.1f px, want 12 or more", at("the usage chart"), smallest)
		}
		page.screenshot(ctx, fmt.Sprintf("console-banned-key-%dpx", width))
		page.eval(ctx, `document.querySelector('.usage').scrollIntoView()`, nil)
		page.screenshot(ctx, fmt.Sprintf("console-usage-%dpx", width))

		c.goTo(ctx, "#/audit", `document.querySelector('.page[data-page=audit] tbody')`)
		c.checkFits(ctx, at("the audit trail"))
		var lines []int
		page.eval(ctx, `[...document.querySelectorAll('.page tbody .time')].map((e) => e.getClientRects().length)`, &lines)
		for _, n := range lines {
			if n != 1 {
				t.Errorf("%s: a time takes %d lines, want 1", at("the audit trail"), n)
				break
			}
		}
		page.screenshot(ctx, fmt.Sprintf("console-audit-%dpx", width))

		c.goTo(ctx, fmt.Sprintf("#/webhooks?deliveries=%d", w.endpoint), `document.querySelector('.deliveries tbody')`)
		c.checkFits(ctx, at("the deliveries"))
		var top, height float64
		page.eval(ctx, `document.querySelector('.deliveries').getBoundingClientRect().top`, &top)
		page.eval(ctx, `innerHeight`, &height)
		if top < -1 || top > height-100 {
			t.Errorf("%s: the deliveries begin %.0f px down a window of %.0f, want them scrolled into sight", at("the deliveries"), top, height)
		}
		page.screenshot(ctx, fmt.Sprintf("console-deliveries-%dpx", width))
	}
	c.checkDeliveries(ctx)
	c.checkAudit(ctx, w)
	c.checkLinksAndLift(ctx, w)
	var planted int
	page.eval(ctx, `document.querySelectorAll('img').length`, &planted)
	if planted != 0 {
		t.Errorf("the hostile name made %d images", planted)
	}
}

// checkDeliveries: the failed delivery says why, at which attempt and
// when, offers Resend, and the endpoint says its last answer once.
func (c *consoleSession) checkDeliveries(ctx context.Context) {
	c.t.Helper()
	got := c.seen(ctx, ".deliveries tbody")
	for _, want := range []string{"failed", "status 500", "8", "UTC", "Resend"} {
		if !strings.Contains(got, want) {
			c.t.Errorf("the failed delivery reads %q, want %q in it", got, want)
		}
	}
	if row := c.seen(ctx, ".page > .scroll tbody tr"); strings.Count(row, "500") != 1 {
		c.t.Errorf("the endpoint's row reads %q, want its status said once", row)
	}
}

// checkAudit: newest first, key names beside ids, a change as fields.
func (c *consoleSession) checkAudit(ctx context.Context, w consoleWorld) {
	c.t.Helper()
	c.atWidth(ctx, 1280)
	c.goTo(ctx, "#/audit", `document.querySelector('.page[data-page=audit] tbody')`)
	var actions []string
	c.page.eval(ctx, `[...document.querySelectorAll('.page tbody tr td:nth-child(2)')].map((td) => td.textContent)`, &actions)
	if len(actions) < 4 || actions[0] != domain.AuditKeyCreated || actions[1] != domain.AuditKeyBanned || actions[2] != domain.AuditKeyUpdated {
		c.t.Errorf("the audit trail lists %v, want the newest first: key.created, key.banned, key.updated", actions)
	}
	got := c.seen(ctx, ".page tbody")
	for _, want := range []string{"plan: pro → enterprise", "perDay: 10,000 → 1,500,000", fmt.Sprintf("tiny-bot (key %d)", w.banned.ID), hostile + fmt.Sprintf(" (key %d)", w.hostile.ID)} {
		if !strings.Contains(got, want) {
			c.t.Errorf("the audit trail reads %q, want %q", got, want)
		}
	}
}

// checkLinksAndLift: a search and a key have their own URLs, which the
// back button returns to; the Enterprise-only figures wait for that plan;
// the Lift button of the key's page lifts its ban.
func (c *consoleSession) checkLinksAndLift(ctx context.Context, w consoleWorld) {
	c.t.Helper()
	page := c.page
	c.atWidth(ctx, 1280)
	c.goTo(ctx, "#/keys", `document.querySelectorAll('.page[data-page=keys] tbody tr').length === 2`)
	page.typeInto(ctx, "form.filters input[name=q]", "tiny")
	page.click(ctx, "form.filters button[type=submit]")
	page.waitFor(ctx, "the search", `location.hash === '#/keys?q=tiny' && document.querySelectorAll('.page[data-page=keys] tbody tr').length === 1`)
	c.goTo(ctx, fmt.Sprintf("#/keys/%d", w.hostile.ID), `document.querySelector('form.edit')`)
	var disabled []bool
	page.eval(ctx, `['perMinute', 'perDay'].map((n) => document.querySelector('form.edit input[name=' + n + ']').disabled)`, &disabled)
	if len(disabled) != 2 || !disabled[0] || !disabled[1] {
		c.t.Errorf("on a pro key the Enterprise-only figures are disabled: %v, want both", disabled)
	}
	page.eval(ctx, `(() => { const s = document.querySelector('form.edit select[name=plan]'); s.value = 'enterprise'; s.dispatchEvent(new Event('change')); })()`, nil)
	var still bool
	page.eval(ctx, `document.querySelector('form.edit input[name=perMinute]').disabled`, &still)
	if still {
		c.t.Errorf("with enterprise chosen, the figures are still disabled")
	}
	page.eval(ctx, `history.back()`, nil)
	page.waitFor(ctx, "the search again", `document.querySelector('.page[data-page=keys] input[name=q]')?.value === 'tiny' && document.querySelectorAll('.page tbody tr').length === 1`)

	c.goTo(ctx, "#/bans", `document.querySelector('.page[data-page=bans] tbody a')`)
	if got, want := c.seen(ctx, ".page tbody"), fmt.Sprintf("tiny-bot (key %d)", w.banned.ID); !strings.Contains(got, want) {
		c.t.Errorf("the bans page reads %q, want the key named: %s", got, want)
	}

	// A shared link opens the key's page, whose Lift button lifts the ban.
	page.call(ctx, "Page.navigate", map[string]any{"url": c.url + fmt.Sprintf("/console/#/keys/%d", w.banned.ID)})
	page.waitFor(ctx, "the ban", `document.querySelector('.limits .ban .lift')`)
	page.click(ctx, ".limits .ban .lift")
	page.waitFor(ctx, "the confirmation", `document.querySelector('dialog[open] .danger')`)
	page.click(ctx, "dialog[open] .danger")
	page.waitFor(ctx, "no ban", `document.querySelector('.limits .windows') && !document.querySelector('.limits .ban') && document.getElementById('notice').textContent.includes('lifted')`)
	if w := c.s.admin("GET", "/admin/v1/bans", c.owner, ""); strings.TrimSpace(w.Body.String()) != "[]" {
		c.t.Errorf("after the Lift button the admin API lists bans %s", w.Body)
	}
}
