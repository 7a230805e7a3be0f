package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/testkit"
)

// The owner's console in a real browser (browser_test.go's headless
// Chromium, nothing reachable but loopback): an owner's day with it, a
// hostile key name, and a token that may only read keys.

// consoleSession is the console open in a browser on a test server's
// admin listener.
type consoleSession struct {
	t     *testing.T
	s     *testServer
	b     *browser
	page  *tab
	url   string // the admin listener's
	owner string // a token with every admin scope
}

func openConsole(t *testing.T, ctx context.Context) *consoleSession {
	chromium := chromiumPath(t)
	s := webhookServer(t, testOptions{})
	admin := httptest.NewServer(s.adminHandler)
	t.Cleanup(admin.Close)
	b := startBrowser(t, ctx, chromium)
	page := b.page(ctx)
	page.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": false})
	c := &consoleSession{t: t, s: s, b: b, page: page, url: admin.URL, owner: s.mustCreateAdmin("owner", domain.AllAdminScopes)}
	page.call(ctx, "Page.navigate", map[string]any{"url": admin.URL + "/console/"})
	page.waitFor(ctx, "the sign-in", `document.getElementById('signin')?.hidden === false`)
	return c
}

// mistyped is token with its last character changed: not a token.
func mistyped(token string) string {
	last := "x"
	if strings.HasSuffix(token, last) {
		last = "y"
	}
	return token[:len(token)-1] + last
}

// signIn signs in with token from the keyboard: typed, then Enter.
func (c *consoleSession) signIn(ctx context.Context, token string) {
	c.t.Helper()
	c.page.waitFor(ctx, "the sign-in", `document.getElementById('signin')?.hidden === false`)
	c.page.typeInto(ctx, "#token", token)
	c.page.press(ctx, "Enter", 13)
}

// goTo shows the page of hash, and waits for what marks it loaded.
func (c *consoleSession) goTo(ctx context.Context, hash, loaded string) {
	c.t.Helper()
	c.page.eval(ctx, "location.hash = "+jsString(hash), nil)
	c.page.waitFor(ctx, hash, loaded)
}

// checkLabels fails the test for each control of the page shown with no
// label: inside a label, or its own aria-label.
func (c *consoleSession) checkLabels(ctx context.Context, where string) {
	c.t.Helper()
	var unlabelled []string
	c.page.eval(ctx, `[...document.querySelectorAll('input, select, textarea')]
		.filter((e) => !e.closest('label') && !e.getAttribute('aria-label')).map((e) => e.outerHTML)`, &unlabelled)
	for _, e := range unlabelled {
		c.t.Errorf("%s: a control without a label: %s", where, e)
	}
}

func TestConsoleOwnersDayInABrowser(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := openConsole(t, ctx)
	s, page := c.s, c.page
	defer c.b.checkNothingWentWrong()
	defer page.checkNoViolations(ctx)
	c.checkLabels(ctx, "the sign-in")
	page.screenshot(ctx, "console-sign-in")

	// A wrong token is refused, with the reason.
	c.signIn(ctx, mistyped(c.owner))
	page.waitFor(ctx, "the reason", `document.getElementById('signin-reason').textContent.includes('not valid')`)

	// Signed in, from the keyboard; the token is in this tab's
	// sessionStorage only.
	c.signIn(ctx, c.owner)
	page.waitFor(ctx, "the keys page", `document.querySelector('.page[data-page=keys] .empty')`)
	if got := page.text(ctx, ".page .empty"); !strings.Contains(got, "create one") {
		t.Errorf("the empty keys page says %q, want it to say to create one", got)
	}
	var kept struct {
		Session, Href, Cookie string
		Local                 int
	}
	page.eval(ctx, `({session: sessionStorage.getItem('petstore.adminToken'), href: location.href, cookie: document.cookie, local: localStorage.length})`, &kept)
	if kept.Session != c.owner || strings.Contains(kept.Href, c.owner) || kept.Cookie != "" || kept.Local != 0 {
		t.Errorf("the token is kept as %+v, want it in sessionStorage only", kept)
	}

	// A key made, its secret shown once.
	page.click(ctx, ".create-key")
	c.checkLabels(ctx, "the keys, with the new key's form")
	page.typeInto(ctx, "form.create input[name=name]", "Acme")
	page.click(ctx, "form.create button[type=submit]")
	page.waitFor(ctx, "the secret", `document.querySelector('.secret-value')`)
	var key string
	page.eval(ctx, `document.querySelector('.secret-value').value`, &key)
	if !strings.HasPrefix(key, "psk_") {
		t.Fatalf("the console shows the secret %q, want a psk_ key", key)
	}
	page.click(ctx, ".secret .copy")
	page.waitFor(ctx, "the copy", `document.querySelector('.secret .copied').textContent !== ''`)
	page.screenshot(ctx, "console-key-created")
	id := c.keyID(ctx, "Acme")

	// Requests with it, seen in the chart and the table.
	for range 5 {
		if w := s.do("GET", "/v1/pets", key, ""); w.Code != http.StatusOK {
			t.Fatalf("GET /v1/pets with the new key: %d %s", w.Code, w.Body)
		}
	}
	s.flushUsage()
	c.goTo(ctx, fmt.Sprintf("#/keys/%d", id), `document.querySelector('.usage-chart') && document.querySelector('.limits .windows')`)
	var shown string
	page.eval(ctx, `document.body.innerText`, &shown)
	if strings.Contains(shown, key) {
		t.Errorf("the key's page shows the key's secret again")
	}
	if got := page.text(ctx, ".usage tbody tr"); !strings.HasPrefix(got, s.clock.now().UTC().Format("2006-01-02")+"500005") {
		t.Errorf("today's row of the usage table reads %q, want 5 allowed", got)
	}
	if got := page.text(ctx, ".limits"); !strings.Contains(got, "55 of 60 left") || !strings.Contains(got, "995 of 1,000 left") {
		t.Errorf("the limits read %q, want 55 of 60 this minute and 995 of 1000 today", got)
	}
	c.checkLabels(ctx, "a key's page")
	c.banAndLift(ctx, id, key)
	c.chartOf400Days(ctx, id)
	c.webhookDelivered(ctx)
	c.editRollRevoke(ctx, id)

	c.goTo(ctx, "#/audit", `document.querySelector('.page[data-page=audit] tbody')`)
	if got := page.text(ctx, ".page tbody"); !strings.Contains(got, "key.created") || !strings.Contains(got, "ban.lifted") {
		t.Errorf("the audit trail shows %q, want key.created and ban.lifted", got)
	}
	c.checkLabels(ctx, "the audit trail")
	page.screenshot(ctx, "console-audit")

	// Signed out: the token is forgotten.
	page.click(ctx, "#signout")
	page.waitFor(ctx, "the sign-in", `document.getElementById('signin')?.hidden === false`)
	var left *string
	page.eval(ctx, `sessionStorage.getItem('petstore.adminToken')`, &left)
	if left != nil {
		t.Errorf("after sign-out sessionStorage still holds %q", *left)
	}
	c.checkOnlyAdminRequests()
}

// keyID is the id of the key named name in the keys list shown.
func (c *consoleSession) keyID(ctx context.Context, name string) int64 {
	c.t.Helper()
	c.page.waitFor(ctx, "key "+name, `[...document.querySelectorAll('.list tbody a')].some((a) => a.textContent === `+jsString(name)+`)`)
	var href string
	c.page.eval(ctx, `[...document.querySelectorAll('.list tbody a')].find((a) => a.textContent === `+jsString(name)+`).getAttribute('href')`, &href)
	id, err := strconv.ParseInt(strings.TrimPrefix(href, "#/keys/"), 10, 64)
	if err != nil {
		c.t.Fatalf("the link of key %s is %q", name, href)
	}
	return id
}

// banAndLift gets key banned, finds the ban in the console and lifts it.
func (c *consoleSession) banAndLift(ctx context.Context, id int64, key string) {
	c.t.Helper()
	s, page := c.s, c.page
	s.banOf(key, 200)
	s.flushAudit()
	s.flushUsage()
	subject := fmt.Sprintf("Acme (key %d)", id)
	c.goTo(ctx, "#/bans", `document.querySelector('.page[data-page=bans] .lift')`)
	if got := page.text(ctx, ".page tbody"); !strings.Contains(got, subject) {
		c.t.Errorf("the bans page shows %q, want %s", got, subject)
	}
	page.screenshot(ctx, "console-bans")
	page.click(ctx, ".lift")
	page.waitFor(ctx, "the confirmation", `document.querySelector('dialog[open] .danger')`)
	page.click(ctx, "dialog[open] .danger")
	page.waitFor(ctx, "no bans", `document.querySelector('.page[data-page=bans] .empty')`)
	if w := s.admin("GET", "/admin/v1/bans", c.owner, ""); strings.TrimSpace(w.Body.String()) != "[]" {
		c.t.Errorf("after the lift the admin API lists bans %s", w.Body)
	}
}

// chartOf400Days shows a key's 400 days, and reports how long the chart
// took to draw.
func (c *consoleSession) chartOf400Days(ctx context.Context, id int64) {
	c.t.Helper()
	page := c.page
	c.goTo(ctx, fmt.Sprintf("#/keys/%d", id), `document.querySelector('.usage-chart')`)
	page.eval(ctx, `(() => { const s = document.querySelector('.usage select'); s.value = '400'; s.dispatchEvent(new Event('change')); })()`, nil)
	page.waitFor(ctx, "400 days", `document.querySelectorAll('.usage tbody tr').length === 400`)
	var drawMs string
	page.eval(ctx, `document.querySelector('.usage-chart').dataset.drawMs`, &drawMs)
	c.t.Logf("the usage chart of 400 days drew in %s ms (performance.now around the draw)", drawMs)
	var series map[string]bool
	page.eval(ctx, `Object.fromEntries([...document.querySelectorAll('.usage-chart path')].map((p) => [p.classList[1], p.getAttribute('d') !== 'M0 0']))`, &series)
	if !series["allowed"] || !series["rateLimited"] || !series["banned"] {
		c.t.Errorf("the chart draws %v, want allowed, rate limited and banned requests", series)
	}
	// Today's numbers, pointed at with the mouse, then from the keyboard.
	var at struct{ X, Y float64 }
	page.eval(ctx, `(() => { const r = document.querySelector('.usage-chart').getBoundingClientRect(); return {x: r.right - 2, y: r.top + r.height / 2}; })()`, &at)
	page.call(ctx, "Input.dispatchMouseEvent", map[string]any{"type": "mouseMoved", "x": at.X, "y": at.Y})
	if got := page.text(ctx, ".readout"); !strings.Contains(got, "allowed 60") {
		c.t.Errorf("pointing at today the readout says %q, want allowed 60", got)
	}
	page.eval(ctx, `document.querySelector('.usage-chart').focus()`, nil)
	page.press(ctx, "Home", 36)
	page.press(ctx, "End", 35)
	if got := page.text(ctx, ".readout"); !strings.Contains(got, "allowed 60") {
		c.t.Errorf("the readout of today says %q, want allowed 60", got)
	}
	page.screenshot(ctx, "console-usage")
}

// editRollRevoke renames key id, rolls it and revokes the old key.
func (c *consoleSession) editRollRevoke(ctx context.Context, id int64) {
	c.t.Helper()
	page := c.page
	c.goTo(ctx, fmt.Sprintf("#/keys/%d", id), `document.querySelector('form.edit')`)
	page.eval(ctx, `document.querySelector('form.edit input[name=name]').value = ''`, nil)
	page.typeInto(ctx, "form.edit input[name=name]", "Acme Ltd")
	page.typeInto(ctx, "form.edit input[name=externalId]", "acct-9")
	page.click(ctx, "form.edit button[type=submit]")
	page.waitFor(ctx, "the new name", `document.querySelector('.key-name')?.textContent === 'Acme Ltd'`)
	k, _, err := manage.FindKey(ctx, c.s.store, c.s.env, id)
	if err != nil || k.Name != "Acme Ltd" || k.ExternalID != "acct-9" {
		c.t.Errorf("after the edit the key is %+v (%v), want Acme Ltd, acct-9", k, err)
	}
	page.typeInto(ctx, "form.roll input[name=overlap]", "") // the default overlap, 24h
	page.click(ctx, "form.roll button[type=submit]")
	page.waitFor(ctx, "the new key's secret", `document.querySelector('.secret-value')`)
	page.click(ctx, ".revoke")
	page.waitFor(ctx, "the confirmation", `document.querySelector('dialog[open] .danger')`)
	page.click(ctx, "dialog[open] .danger")
	page.waitFor(ctx, "revoked", `document.querySelector('.key-actions')?.textContent.includes('revoked')`)
}

// webhookDelivered adds an endpoint on a test receiver, sends it a test
// and sees it delivered.
func (c *consoleSession) webhookDelivered(ctx context.Context) {
	c.t.Helper()
	s, page := c.s, c.page
	rc := testkit.NewReceiver(c.t)
	c.goTo(ctx, "#/webhooks", `document.querySelector('.page[data-page=webhooks] .empty')`)
	page.typeInto(ctx, ".add-webhook input[name=url]", rc.URL())
	page.click(ctx, ".add-webhook button[type=submit]")
	page.waitFor(ctx, "the secret", `document.querySelector('.secret-value') && document.querySelector('.page .test')`)
	var secret string
	page.eval(ctx, `document.querySelector('.secret-value').value`, &secret)
	rc.Trust(secret)
	page.click(ctx, ".page .test")
	page.waitFor(ctx, "the test queued", `document.getElementById('notice').textContent.includes('queued')`)
	s.deliverDue()
	page.click(ctx, ".page .show-deliveries")
	page.waitFor(ctx, "the delivery", `document.querySelector('.deliveries tbody')`)
	if got := page.text(ctx, ".deliveries tbody"); !strings.Contains(got, "webhook.test") || !strings.Contains(got, "delivered") {
		c.t.Errorf("the deliveries read %q, want webhook.test delivered", got)
	}
	if got := rc.Deliveries(); len(got) != 1 || !got[0].Verified || got[0].Event.Type != "webhook.test" {
		c.t.Errorf("the receiver got %+v, want one webhook.test signed with the secret the console showed", got)
	}
	c.checkLabels(ctx, "the webhooks")
	page.screenshot(ctx, "console-webhooks")
}

// checkOnlyAdminRequests: the console asked only its own origin, for its
// files and the admin API, and sent the token only to the admin API.
func (c *consoleSession) checkOnlyAdminRequests() {
	c.t.Helper()
	for _, r := range c.b.requests() {
		path, ok := strings.CutPrefix(r.url, c.url)
		switch {
		case !ok:
			c.t.Errorf("the console requested %s, outside its server", r.url)
		case !strings.HasPrefix(path, "/console/") && !strings.HasPrefix(path, "/admin/v1/"):
			c.t.Errorf("the console requested %s, neither its files nor the admin API", r.url)
		case r.authorization != "" && !strings.HasPrefix(path, "/admin/v1/"):
			c.t.Errorf("the console sent the token with %s", r.url)
		}
	}
}

// hostile is a key name that would run script if the console made HTML of
// it.
const hostile = `<img src=x onerror=alert(1)>`

func TestConsoleShowsAHostileKeyNameAsCharacters(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := openConsole(t, ctx)
	page := c.page
	defer c.b.checkNothingWentWrong() // an alert is a dialog: a failure
	defer page.checkNoViolations(ctx)
	// As on a plain HTTP page of another host: no clipboard API.
	page.eval(ctx, `window.__ran = false; Object.defineProperty(navigator, 'clipboard', {value: undefined})`, nil)
	c.signIn(ctx, c.owner)
	page.click(ctx, ".create-key")
	page.typeInto(ctx, "form.create input[name=name]", hostile)
	page.typeInto(ctx, "form.create input[name=externalId]", `"><script>window.__ran = true</script>`)
	page.click(ctx, "form.create button[type=submit]")
	page.waitFor(ctx, "the secret", `document.querySelector('.secret-value')`)

	// Copy selects the secret, ready for Ctrl+C, and says so.
	page.eval(ctx, `document.activeElement.blur()`, nil)
	page.click(ctx, ".secret .copy")
	page.waitFor(ctx, "the fallback", `document.querySelector('.secret .copied').textContent.includes('Ctrl+C')`)
	var selected bool
	page.eval(ctx, `(() => { const e = document.activeElement; return e.classList.contains('secret-value') && e.selectionStart === 0 && e.selectionEnd === e.value.length && e.value.startsWith('psk_'); })()`, &selected)
	if !selected {
		t.Errorf("without the clipboard API, Copy does not leave the secret selected")
	}
	id := c.keyID(ctx, hostile) // found by its text, character for character
	c.goTo(ctx, fmt.Sprintf("#/keys/%d", id), `document.querySelector('.key-name')`)
	if got := page.text(ctx, ".key-name"); got != hostile {
		t.Errorf("the key's page shows its name as %q, want the characters %q", got, hostile)
	}
	c.goTo(ctx, "#/audit", `document.querySelector('.page[data-page=audit] tbody')`)
	if got := page.text(ctx, ".page tbody"); !strings.Contains(got, hostile) {
		t.Errorf("the audit trail shows %q, want the name's characters", got)
	}
	var planted struct {
		Images, Scripts int
		Ran             bool
	}
	page.eval(ctx, `({images: document.querySelectorAll('img').length, scripts: document.querySelectorAll('script').length, ran: window.__ran})`, &planted)
	if planted.Images != 0 || planted.Scripts != 1 || planted.Ran {
		t.Errorf("the page holds %d images and %d scripts (its own is 1), script ran: %v", planted.Images, planted.Scripts, planted.Ran)
	}
}

func TestConsoleShowsOnlyWhatTheTokensScopesAllow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := openConsole(t, ctx)
	s, page := c.s, c.page
	defer c.b.checkNothingWentWrong()
	defer page.checkNoViolations(ctx)
	k, key := s.mustCreate(s.keyTerms("free"))
	s.banOf(key, 200)
	s.flushAudit()

	c.signIn(ctx, s.mustCreateAdmin("support", domain.ScopeKeysRead))
	page.waitFor(ctx, "the keys page", `document.querySelector('.page[data-page=keys] tbody')`)
	var nav []string
	page.eval(ctx, `[...document.querySelectorAll('#nav a')].map((a) => a.textContent)`, &nav)
	if strings.Join(nav, ",") != "Keys,Bans,Servers,Backup" {
		t.Errorf("a keys:read token sees the pages %v, want Keys, Bans, Servers and Backup", nav)
	}
	none := func(where, selector string) {
		var n int
		page.eval(ctx, `document.querySelectorAll(`+jsString(selector)+`).length`, &n)
		if n != 0 {
			t.Errorf("%s: a keys:read token sees %s", where, selector)
		}
	}
	none("the keys", ".create-key")
	c.goTo(ctx, fmt.Sprintf("#/keys/%d", k.ID), `document.querySelector('.usage-chart')`)
	none("a key's page", ".key-actions, .revoke, form.edit, form.roll, .lift")
	if got := page.text(ctx, ".limits .ban"); !strings.Contains(got, "Banned until") {
		t.Errorf("a keys:read token reads the banned key's limits as %q, want its ban", got)
	}
	c.goTo(ctx, "#/bans", `document.querySelector('.page[data-page=bans] tbody')`)
	none("the bans", ".lift")
	self := selfServer(&net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 8080}, time.Now())
	self.LastSeen = time.Now()
	if err := s.store.CheckIn(ctx, self); err != nil {
		t.Fatal(err)
	}
	c.goTo(ctx, "#/servers", `document.querySelector('.page[data-page=servers] tbody')`)
	if got := page.text(ctx, ".page[data-page=servers] tbody"); !strings.Contains(got, "192.0.2.7:8080") || !strings.Contains(got, self.Version) {
		t.Errorf("the servers page shows %q, want 192.0.2.7:8080 and its version %s", got, self.Version)
	}
	c.goTo(ctx, "#/backup", `document.querySelector('.page[data-page=backup] p.empty')?.textContent.includes('--replicate-to')`)
	c.goTo(ctx, "#/webhooks", `document.querySelector('.page[data-page=keys]')`) // not allowed: the first page it may see
	none("the webhooks", ".add-webhook")

	// Readable at 360 px wide, in the dark theme: nothing wider than the
	// screen but the tables, which scroll in their own box.
	page.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 360, "height": 740, "deviceScaleFactor": 2, "mobile": true})
	page.call(ctx, "Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-color-scheme", "value": "dark"}}})
	c.goTo(ctx, fmt.Sprintf("#/keys/%d", k.ID), `document.querySelector('.usage-chart')`)
	var fit struct {
		Width      int
		Background string
	}
	page.eval(ctx, `({width: document.documentElement.scrollWidth, background: getComputedStyle(document.documentElement).backgroundColor})`, &fit)
	if fit.Width > 360 || fit.Background != "rgb(21, 26, 24)" {
		t.Errorf("at 360 px in the dark the page is %d px wide on %s, want at most 360 on the dark background", fit.Width, fit.Background)
	}
	page.screenshot(ctx, "console-key-360px-dark")
}

func TestConsoleReturnsToTheSignInWithTheReason(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := openConsole(t, ctx)
	s, page := c.s, c.page
	defer c.b.checkNothingWentWrong()
	defer page.checkNoViolations(ctx)

	// A token revoked while in use: the next request brings back the
	// sign-in, saying why.
	c.signIn(ctx, s.mustCreateAdmin("temp", domain.AllAdminScopes))
	page.waitFor(ctx, "the keys page", `document.querySelector('.page[data-page=keys]')`)
	tokens, err := s.store.AdminTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.RevokeAdminToken(ctx, tokens[len(tokens)-1].ID, testActor); err != nil {
		t.Fatal(err)
	}
	c.goTo(ctx, "#/bans", `document.getElementById('signin')?.hidden === false`)
	if got := page.text(ctx, "#signin-reason"); !strings.Contains(got, "revoked") {
		t.Errorf("after a revocation the sign-in says %q, want the reason", got)
	}

	// An address that failed too often is told, at its next failure, how
	// long to wait, and that a tunnel's operators share 127.0.0.1.
	for status := 0; status != http.StatusTooManyRequests; {
		req, _ := http.NewRequest("GET", c.url+"/admin/v1/whoami", nil)
		req.Header.Set("Authorization", "Bearer psa_nothing")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		status = res.StatusCode
	}
	c.signIn(ctx, mistyped(c.owner))
	page.waitFor(ctx, "the wait", `document.getElementById('signin-reason').textContent.includes('try again in')`)
	if got := page.text(ctx, "#signin-reason"); !strings.Contains(got, "127.0.0.1") {
		t.Errorf("a limited address is told %q, want the tunnel's 127.0.0.1 explained", got)
	}
}

// A page of another origin (another loopback port: the same site; and
// [::1]: another site) has the browser send the admin API 80 requests,
// as any site could: each is refused before anything is counted, and the
// owner's token, from the same address, is still answered.
func TestAPageOfAnotherOriginCannotLockTheOwnersOut(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newTestServer(t)
	owner := s.mustCreateAdmin("owner", domain.AllAdminScopes)
	var mu sync.Mutex
	answered := map[string]int{} // "Sec-Fetch-Site status" of each request without a token
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusOf{ResponseWriter: w, status: 200}
		s.adminHandler.ServeHTTP(rec, r)
		if r.Header.Get("Authorization") == "" {
			mu.Lock()
			answered[r.Header.Get("Sec-Fetch-Site")+" "+strconv.Itoa(rec.status)]++
			mu.Unlock()
		}
	}))
	t.Cleanup(admin.Close)
	elsewhere := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<!doctype html><title>elsewhere</title><p>a page of another origin"))
	})
	sameSite := httptest.NewServer(elsewhere)
	t.Cleanup(sameSite.Close)
	pages := map[string]string{"same-site": sameSite.URL}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		other := &httptest.Server{Listener: ln, Config: &http.Server{Handler: elsewhere}}
		other.Start()
		t.Cleanup(other.Close)
		pages["cross-site"] = other.URL
	} else {
		t.Logf("no [::1] here (%v): the page of another site is left out", err)
	}
	b := startBrowser(t, ctx, chromium)
	tab := b.page(ctx)
	for site, pageURL := range pages {
		tab.call(ctx, "Page.navigate", map[string]any{"url": pageURL + "/"})
		tab.waitFor(ctx, "the page of another origin", `document.title === 'elsewhere'`)
		tab.eval(ctx, `window.__sent = 0; for (let i = 0; i < 80; i++) fetch(`+jsString(admin.URL+"/admin/v1/whoami")+
			`, {mode: 'no-cors'}).finally(() => window.__sent++); true`, nil)
		tab.waitFor(ctx, "80 fetches done", `window.__sent === 80`)
		mu.Lock()
		got := answered[site+" 403"]
		mu.Unlock()
		if got != 80 {
			t.Errorf("the page at %s: the admin listener refused %d of its requests 403 with Sec-Fetch-Site %s, want 80; it saw %v", pageURL, got, site, answered)
		}
		resp, body := testkit.Fetch(t, http.DefaultClient, "GET", admin.URL+"/admin/v1/whoami", owner, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the owner's token after the page at %s sent its requests: %d %s, want 200", pageURL, resp.StatusCode, body)
		}
	}
}

// statusOf remembers the status written through it.
type statusOf struct {
	http.ResponseWriter
	status int
}

func (w *statusOf) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
