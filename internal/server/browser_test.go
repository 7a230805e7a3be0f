package server

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"petstore/internal/httpapi"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// The API reference in a real browser: headless Chromium, driven over the
// DevTools protocol on a pipe (--remote-debugging-pipe: no WebSocket, no new
// dependency), with every host but loopback unreachable. PETSTORE_TEST_BROWSER=1
// (as .ci/run sets it) makes a missing chromium a failure instead of a skip.

func TestAPIReferenceInABrowserWithoutNetwork(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	s := newTestServer(t)
	key := s.mustCreateKey("free")
	for _, name := range []string{"Rex", "Bella"} {
		if w := s.do("POST", "/v1/pets", key, `{"name":"`+name+`","categoryId":1}`); w.Code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, w.Code, w.Body)
		}
	}
	server := httptest.NewServer(s.handler)
	t.Cleanup(server.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b := startBrowser(t, ctx, chromium)
	page := b.page(ctx)
	page.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 1400, "deviceScaleFactor": 1, "mobile": false})
	page.call(ctx, "Page.navigate", map[string]any{"url": server.URL + "/docs"})
	defer page.checkNoViolations(ctx)

	// The page shows the three operations.
	page.waitFor(ctx, "the operations", `document.querySelectorAll('.opblock').length >= 3`)
	var ops []string
	page.eval(ctx, `[...document.querySelectorAll('.opblock .opblock-summary-operation-id')].map(e => e.textContent.trim())`, &ops)
	for _, want := range []string{"listPets", "createPet", "getPet"} {
		if !slices.Contains(ops, want) {
			t.Errorf("the page shows operations %v, want %s among them", ops, want)
		}
	}

	// The top of the page says what to do first.
	var intro string
	page.eval(ctx, `document.querySelector('.information-container').textContent`, &intro)
	if !strings.Contains(intro, "Authorize") || !strings.Contains(intro, "Try it out") {
		t.Errorf("the top of the page does not say to Authorize, then Try it out:\n%s", intro)
	}

	// Authorize with the key, as a user would: type it into the dialog.
	page.click(ctx, `.auth-wrapper .authorize`)
	page.waitFor(ctx, "the Authorize dialog", `!!document.querySelector('.modal-ux input')`)
	page.eval(ctx, `document.querySelector('.modal-ux input').focus()`, nil)
	page.call(ctx, "Input.insertText", map[string]any{"text": key})
	page.click(ctx, `.modal-ux .auth-btn-wrapper .authorize`)
	page.waitFor(ctx, "the key to be taken", `!!document.querySelector('.modal-ux .auth-btn-wrapper .btn-done, .modal-ux .auth-btn-wrapper .logout')`)
	page.click(ctx, `.modal-ux .close-modal`)

	// Try it out: listPets, sent to this server with the key.
	const op = `#operations-pets-listPets`
	page.click(ctx, op+` .opblock-summary-control`)
	page.waitFor(ctx, "Try it out", `!!document.querySelector('`+op+` .try-out__btn')`)
	page.click(ctx, op+` .try-out__btn`)
	page.waitFor(ctx, "Execute", `!!document.querySelector('`+op+` .execute')`)
	page.click(ctx, op+` .execute`)
	const status = op + ` .live-responses-table .response .response-col_status`
	page.waitFor(ctx, "the response", `!!document.querySelector('`+status+`')`)
	var got string
	page.eval(ctx, `document.querySelector('`+status+`').textContent.trim()`, &got)
	if got != "200" {
		t.Errorf("Try it out on listPets answered %q, want 200", got)
	}
	// The first Try it out sends no filter and no cursor of an example,
	// and lists the pets there are.
	var body string
	page.eval(ctx, `document.querySelector('`+op+` .live-responses-table .response .response-col_description').textContent`, &body)
	if !strings.Contains(body, "Rex") || !strings.Contains(body, "Bella") {
		t.Errorf("Try it out on listPets shows %q, want both pets", body)
	}
	for _, r := range b.requests() {
		if strings.HasPrefix(r.url, server.URL+"/v1/pets?") && (strings.Contains(r.url, "cursor=") || strings.Contains(r.url, "status=")) {
			t.Errorf("the first Try it out of listPets sent %s, want no cursor and no status", r.url)
		}
	}
	page.eval(ctx, `document.querySelector('`+op+` .responses-wrapper').scrollIntoView()`, nil)
	page.screenshot(ctx, "docs-try-it-out")

	// Try it out on createPet twice: two pets, not one replayed under an
	// example Idempotency-Key.
	const create = `#operations-pets-createPet`
	page.click(ctx, create+` .opblock-summary-control`)
	page.waitFor(ctx, "Try it out", `!!document.querySelector('`+create+` .try-out__btn')`)
	page.click(ctx, create+` .try-out__btn`)
	page.waitFor(ctx, "Execute", `!!document.querySelector('`+create+` .execute')`)
	pets := func() int {
		stored, err := s.store.ListPets(ctx, "", 0, httpapi.MaxPageSize)
		if err != nil {
			t.Fatal(err)
		}
		return len(stored)
	}
	for i := range 2 {
		page.click(ctx, create+` .execute`)
		for start := time.Now(); pets() != 3+i; time.Sleep(50 * time.Millisecond) {
			if time.Since(start) > 20*time.Second {
				var text string
				page.eval(ctx, `document.querySelector('`+create+`').innerText`, &text)
				t.Fatalf("Try it out %d on createPet: the store holds %d pets, want %d; the operation shows:\n%s", i+1, pets(), 3+i, text)
			}
		}
		// The answer is shown before Execute is clicked again.
		const created = create + ` .live-responses-table .response .response-col_status`
		page.waitFor(ctx, "the response", `document.querySelector('`+created+`')?.textContent.trim() === '201'`)
	}

	// Every request the page made went to this server; the key went only
	// with the API call, to /v1.
	requests := b.requests()
	var calledAPI bool
	for _, r := range requests {
		if !strings.HasPrefix(r.url, server.URL+"/") && !strings.HasPrefix(r.url, "data:") {
			t.Errorf("the page requested %s, outside this server", r.url)
		}
		if strings.HasPrefix(r.url, server.URL+"/v1/pets") && r.authorization == "Bearer "+key {
			calledAPI = true
		}
	}
	if !calledAPI {
		t.Errorf("no GET /v1/pets with the key among the page's requests: %v", requests)
	}
	b.checkNothingWentWrong()
}

// checkNothingWentWrong fails the test for each problem the page reported
// (an exception, an error logged, a policy violation, a dialog) and each
// request that tried to leave loopback.
func (b *browser) checkNothingWentWrong() {
	b.t.Helper()
	for _, problem := range b.problems() {
		b.t.Errorf("the page reported: %s", problem)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	asked := map[string]bool{} // the hosts the page asked for
	for _, r := range b.reqs {
		if u, err := url.Parse(r.url); err == nil {
			asked[u.Hostname()] = true
		}
	}
	for _, l := range b.leaked {
		// Chromium's own services now and then reach for Google over
		// HTTPS (a CONNECT), whatever the flags: refused all the same,
		// and only a failure when the page asked for that host.
		host, _, _ := net.SplitHostPort(strings.TrimPrefix(l, "CONNECT "))
		if strings.HasPrefix(l, "CONNECT ") && !asked[host] {
			b.t.Logf("Chromium itself (not the page) reached for %s, refused", l)
			continue
		}
		b.t.Errorf("the browser tried to leave loopback: %s", l)
	}
}

// chromiumPath finds Chromium, or skips the test when it is not installed
// and not required.
func chromiumPath(t *testing.T) string {
	t.Helper()
	required := os.Getenv("PETSTORE_TEST_BROWSER") == "1"
	if testing.Short() && !required {
		t.Skip("starts a browser; PETSTORE_TEST_BROWSER=1 runs it with -short")
	}
	// Debian's /usr/bin/chromium is a script that adds flags, extensions
	// and Google API keys, each a reason to call Google: start the browser
	// itself.
	for _, name := range []string{"/usr/lib/chromium/chromium", "chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if required {
		t.Fatal("PETSTORE_TEST_BROWSER=1 and no chromium on PATH: install it (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH (apt-get install chromium); PETSTORE_TEST_BROWSER=1 makes this a failure")
	return ""
}

// browser is one test's browser context of the shared Chromium, and what
// its pages did.
type browser struct {
	t       *testing.T
	c       *chromium
	context string // its browser context's id

	mu     sync.Mutex
	reqs   []pageRequest
	issues []string
	leaked []string // requests that went for another host
	shots  string   // where the screenshots go
}

type pageRequest struct{ url, authorization string }

type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// chromium is the one headless Chromium of this test binary: the first
// browser test starts it, and each test then works in a browser context of
// its own (cookies, storage and proxy of its own), since each start of
// Chromium costs about 3 CPU-seconds. TestMain stops it.
type chromium struct {
	cmd     *exec.Cmd
	profile string // its user data directory, removed when it stops
	stderr  testkit.SyncBuffer

	writing sync.Mutex     // one command at a time on out
	out     io.WriteCloser // the browser's fd 3: our commands

	mu       sync.Mutex
	nextID   int
	calls    map[int]chan cdpMessage
	sessions map[string]*browser // by DevTools session: the test's browser
}

var shared struct {
	once     sync.Once
	chromium *chromium
	err      error
}

// stopChromium ends the shared Chromium, when a test started it.
func stopChromium() {
	if c := shared.chromium; c != nil {
		// The browser and its helpers are in their own process group.
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		c.cmd.Wait()
		c.out.Close()
		os.RemoveAll(c.profile)
	}
}

// startBrowser opens a browser context of the shared Chromium for t, whose
// way out, for anything that is not on loopback, is a proxy that refuses it
// and remembers it (host names do not resolve anyway).
func startBrowser(t *testing.T, ctx context.Context, path string) *browser {
	t.Helper()
	shared.once.Do(func() { shared.chromium, shared.err = startChromium(path) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	b := &browser{t: t, c: shared.chromium}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.leaked = append(b.leaked, r.Method+" "+r.Host+r.URL.Path)
		b.mu.Unlock()
		http.Error(w, "no network in this test", http.StatusForbidden)
	}))
	t.Cleanup(proxy.Close)
	raw, err := b.c.send(ctx, "", "Target.createBrowserContext", map[string]any{
		"disposeOnDetach": true, "proxyServer": proxy.URL, "proxyBypassList": "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ BrowserContextID string }
	json.Unmarshal(raw, &created)
	b.context = created.BrowserContextID
	t.Cleanup(func() {
		b.c.send(context.Background(), "", "Target.disposeBrowserContext", map[string]any{"browserContextId": b.context})
		b.c.mu.Lock()
		maps.DeleteFunc(b.c.sessions, func(_ string, of *browser) bool { return of == b })
		b.c.mu.Unlock()
		if t.Failed() {
			t.Logf("chromium's standard error:\n%s", b.c.stderr.String())
		}
	})
	return b
}

// startChromium starts headless Chromium, driven over a pipe.
func startChromium(path string) (*chromium, error) {
	toBrowser, commands, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	answers, fromBrowser, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	profile, err := profileWithoutSpellcheck()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--disable-extensions", "--disable-default-apps", "--mute-audio",
		"--disable-component-extensions-with-background-pages", "--disable-client-side-phishing-detection",
		"--disable-breakpad", "--disable-domain-reliability", "--disable-field-trial-config",
		"--metrics-recording-only", "--no-service-autorun", "--password-store=basic", "--use-mock-keychain",
		"--disable-features=Translate,OptimizationHints,OptimizationHintsFetching,OptimizationGuideModelDownloading,"+
			"OptimizationTargetPrediction,MediaRouter,AutofillServerCommunication,NetworkTimeServiceQuerying,"+
			"CertificateTransparencyComponentUpdater",
		"--safebrowsing-disable-auto-update",
		// Chromium's own services (Google sign-in's account list, on-demand
		// component installs) call Google even on about:blank, and no
		// switch turns them off: their addresses are pointed at a closed
		// port on loopback, so that anything reaching a test's proxy is
		// its page's doing.
		"--gaia-url=http://127.0.0.1:9/", "--component-updater=url-source=http://127.0.0.1:9/",
		"--user-data-dir="+profile,
		`--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE ::1`,
		"--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{toBrowser, fromBrowser} // its fd 3 and fd 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := &chromium{cmd: cmd, profile: profile, out: commands, calls: map[int]chan cdpMessage{}, sessions: map[string]*browser{}}
	cmd.Stderr = &c.stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(profile)
		return nil, err
	}
	toBrowser.Close()
	fromBrowser.Close()
	go c.read(answers)
	return c, nil
}

// profileWithoutSpellcheck is a fresh profile directory whose preferences
// turn the spellchecker off: typing into a text field would otherwise have
// Chromium fetch a dictionary from Google.
func profileWithoutSpellcheck() (string, error) {
	dir, err := os.MkdirTemp("", "petstore-chromium-")
	if err != nil {
		return "", err
	}
	prefs := `{"browser": {"enable_spellchecking": false}, "spellcheck": {"dictionaries": [], "use_spelling_service": false}}`
	if err := os.MkdirAll(filepath.Join(dir, "Default"), 0o700); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "Default", "Preferences"), []byte(prefs), 0o600)
}

// read hands each answer to its caller, and each event of a page to the
// test whose page it is.
func (c *chromium) read(r io.Reader) {
	br := bufio.NewReader(r)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			c.mu.Lock()
			for id, ch := range c.calls {
				close(ch)
				delete(c.calls, id)
			}
			c.mu.Unlock()
			return
		}
		var m cdpMessage
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		c.mu.Lock()
		ch, answer := c.calls[m.ID]
		delete(c.calls, m.ID)
		b := c.sessions[m.SessionID]
		c.mu.Unlock()
		switch {
		case m.ID != 0 && answer:
			ch <- m
		case m.ID == 0 && b != nil:
			b.mu.Lock()
			b.event(m)
			b.mu.Unlock()
		}
	}
}

// event keeps what the page requested and what went wrong in it; b.mu is
// held.
func (b *browser) event(m cdpMessage) {
	switch m.Method {
	case "Network.requestWillBeSent":
		var p struct {
			Request struct {
				URL     string            `json:"url"`
				Headers map[string]string `json:"headers"`
			} `json:"request"`
		}
		json.Unmarshal(m.Params, &p)
		auth := p.Request.Headers["Authorization"]
		if auth == "" {
			auth = p.Request.Headers["authorization"]
		}
		b.reqs = append(b.reqs, pageRequest{p.Request.URL, auth})
	case "Network.webSocketCreated":
		var p struct {
			URL string `json:"url"`
		}
		json.Unmarshal(m.Params, &p)
		b.reqs = append(b.reqs, pageRequest{url: p.URL})
	case "Page.javascriptDialogOpening":
		// A dialog the page opened (an alert of injected script, say):
		// a failure, dismissed so that the page goes on.
		b.issues = append(b.issues, "a dialog opened: "+string(m.Params))
		go b.c.send(context.Background(), m.SessionID, "Page.handleJavaScriptDialog", map[string]any{"accept": false})
	case "Runtime.exceptionThrown":
		b.issues = append(b.issues, "exception: "+string(m.Params))
	case "Log.entryAdded":
		var p struct {
			Entry struct {
				Level, Text, URL string
			} `json:"entry"`
		}
		json.Unmarshal(m.Params, &p)
		// A refused request or a policy violation; a missing
		// /favicon.ico is not the page's doing, nor is an answer of the
		// API with an error status (a test asks for those: the leaked
		// requests are kept apart).
		answered := strings.HasPrefix(p.Entry.Text, "Failed to load resource: the server responded with a status of")
		if p.Entry.Level == "error" && !strings.HasSuffix(p.Entry.URL, "/favicon.ico") && !answered {
			b.issues = append(b.issues, p.Entry.Text+" "+p.Entry.URL)
		}
	}
}

func (b *browser) requests() []pageRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.reqs)
}

func (b *browser) problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.issues)
}

// send sends one command, to the browser or to a page's session, and
// returns its result.
func (c *chromium) send(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan cdpMessage, 1)
	c.calls[id] = ch
	c.mu.Unlock()
	msg, _ := json.Marshal(map[string]any{"id": id, "sessionId": session, "method": method, "params": params})
	c.writing.Lock()
	_, err := c.out.Write(append(msg, 0))
	c.writing.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, errors.New("the browser has gone")
		}
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		return m.Result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// tab is the page of the browser, through its DevTools session.
type tab struct {
	b       *browser
	session string
}

func (b *browser) page(ctx context.Context) *tab {
	b.t.Helper()
	raw, err := b.c.send(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank", "browserContextId": b.context})
	if err != nil {
		b.t.Fatal(err)
	}
	var target struct{ TargetID string }
	json.Unmarshal(raw, &target)
	raw, err = b.c.send(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true})
	if err != nil {
		b.t.Fatal(err)
	}
	var attached struct{ SessionID string }
	json.Unmarshal(raw, &attached)
	b.c.mu.Lock()
	b.c.sessions[attached.SessionID] = b
	b.c.mu.Unlock()
	p := &tab{b: b, session: attached.SessionID}
	for _, domain := range []string{"Page", "Network", "Runtime", "Log"} {
		p.call(ctx, domain+".enable", map[string]any{})
	}
	// Pages of other tests share the browser: each page behaves as the
	// one in front, with the focus, as a user's would.
	p.call(ctx, "Emulation.setFocusEmulationEnabled", map[string]any{"enabled": true})
	// Every Content-Security-Policy violation, as the page itself hears
	// of it (the browser runs this before any script of the page's).
	p.call(ctx, "Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": `window.__violations = [];
		document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile + ':' + e.lineNumber));`})
	return p
}

func (p *tab) call(ctx context.Context, method string, params any) json.RawMessage {
	p.b.t.Helper()
	raw, err := p.b.c.send(ctx, p.session, method, params)
	if err != nil {
		p.b.t.Fatal(err)
	}
	return raw
}

// eval runs a JavaScript expression in the page and decodes its value into
// v (when v is not nil).
func (p *tab) eval(ctx context.Context, expression string, v any) {
	p.b.t.Helper()
	raw := p.call(ctx, "Runtime.evaluate", map[string]any{"expression": expression, "returnByValue": true})
	var res struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails json.RawMessage
	}
	json.Unmarshal(raw, &res)
	if res.ExceptionDetails != nil {
		p.b.t.Fatalf("%s: %s", expression, res.ExceptionDetails)
	}
	if v != nil {
		if err := json.Unmarshal(res.Result.Value, v); err != nil {
			p.b.t.Fatalf("%s gave %s: %v", expression, res.Result.Value, err)
		}
	}
}

// waitFor waits until a JavaScript condition holds in the page.
func (p *tab) waitFor(ctx context.Context, what, condition string) {
	p.b.t.Helper()
	if !testkit.Until(20*time.Second, 50*time.Millisecond, func() bool {
		var ok bool
		p.eval(ctx, "Boolean("+condition+")", &ok)
		return ok
	}) {
		var text string
		p.eval(ctx, `document.body ? document.body.innerText.slice(0, 2000) : ""`, &text)
		p.b.t.Fatalf("waited 20 s for %s (%s); the page says:\n%s\nproblems: %v", what, condition, text, p.b.problems())
	}
}

// checkNoViolations fails the test for each Content-Security-Policy
// violation the page heard of.
func (p *tab) checkNoViolations(ctx context.Context) {
	p.b.t.Helper()
	var violations []string
	p.eval(ctx, `window.__violations || []`, &violations)
	for _, v := range violations {
		p.b.t.Errorf("Content-Security-Policy violation: %s", v)
	}
}

// typeInto focuses the element that selector finds and types text into
// it, as a user's keyboard would.
func (p *tab) typeInto(ctx context.Context, selector, text string) {
	p.b.t.Helper()
	p.waitFor(ctx, selector, "document.querySelector("+jsString(selector)+")")
	p.eval(ctx, "document.querySelector("+jsString(selector)+").focus()", nil)
	p.call(ctx, "Input.insertText", map[string]any{"text": text})
}

// press sends one key (Enter, Tab) to the element that has the focus.
func (p *tab) press(ctx context.Context, key string, code int) {
	p.b.t.Helper()
	down := map[string]any{"type": "keyDown", "key": key, "code": key, "windowsVirtualKeyCode": code}
	if key == "Enter" {
		down["text"] = "\r" // what submits a form
	}
	p.call(ctx, "Input.dispatchKeyEvent", down)
	p.call(ctx, "Input.dispatchKeyEvent", map[string]any{"type": "keyUp", "key": key, "code": key, "windowsVirtualKeyCode": code})
}

// text is the text of the element that selector finds.
func (p *tab) text(ctx context.Context, selector string) string {
	p.b.t.Helper()
	p.waitFor(ctx, selector, "document.querySelector("+jsString(selector)+")")
	var s string
	p.eval(ctx, "document.querySelector("+jsString(selector)+").textContent", &s)
	return s
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// click clicks the element that selector finds, as a user's click would.
func (p *tab) click(ctx context.Context, selector string) {
	p.b.t.Helper()
	p.waitFor(ctx, selector, "document.querySelector("+jsString(selector)+")")
	p.eval(ctx, "document.querySelector("+jsString(selector)+").click()", nil)
}

// screenshot keeps a picture of the page as name.png, outside the
// repository: in $PETSTORE_ARTIFACTS for CI, or else in a temporary
// directory removed when the test passes.
func (p *tab) screenshot(ctx context.Context, name string) {
	t := p.b.t
	t.Helper()
	raw := p.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"})
	var shot struct{ Data string }
	json.Unmarshal(raw, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	p.b.mu.Lock()
	dir := p.b.shots
	p.b.mu.Unlock()
	if dir == "" {
		if dir = os.Getenv("PETSTORE_ARTIFACTS"); dir == "" {
			if dir, err = os.MkdirTemp("", "petstore-browser-test-"); err != nil {
				t.Fatal(err)
			}
			// Kept for a look at what failed; a plain go test ./... that
			// passes leaves nothing behind.
			t.Cleanup(func() {
				if !t.Failed() {
					os.RemoveAll(dir)
				}
			})
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p.b.mu.Lock()
		p.b.shots = dir
		p.b.mu.Unlock()
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s: %s", name, path)
}
