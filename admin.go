package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"petstore/internal/domain"
	"petstore/internal/limits"
	"petstore/internal/metrics"
	"petstore/internal/store"
)

// Admin tokens (docs/admin.md#admin-tokens): the credential of the admin
// API, a second kind that is never a pet key. A token looks like a key with
// another prefix (psa_live_, psa_test_ on staging: adminPrefixes), made and
// checked by the same code (newSecret, secretProblem); the database keeps
// its SHA-256 hash. Its scopes are the admin scopes of scope.go.

// parseAdminScopes reads --scope of admin create: admin scopes separated by
// commas, repeatable. None given: every admin scope.
func parseAdminScopes(flags []string) (domain.ScopeSet, error) {
	return parseScopeFlags(flags, domain.AllAdminScopes, func(_, name string) error {
		return usagef("--scope: unknown admin scope %q; the admin scopes are %s", name, strings.Join(domain.AllAdminScopes.Names(), ", "))
	})
}

func adminCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := newCommand("admin create", getenv, stdout).withDB()
	var name string
	var scopeFlags []string
	c.fs.StringVar(&name, "name", "", "who holds the token, shown in admin list and as the actor admin:NAME of every change it makes (required)")
	c.fs.Func("scope", "what the token may do: keys:read, keys:write, audit:read, webhooks; repeat the flag or separate scopes by commas (default all four)", func(v string) error {
		scopeFlags = append(scopeFlags, v)
		return nil
	})
	if err := c.parse(args); err != nil {
		return err
	}
	if name == "" {
		return usagef("admin create needs --name NAME: the actor admin:NAME of every change the token makes")
	}
	if err := checkLabel("--name", name); err != nil {
		return usagef("%v", err)
	}
	scopes, err := parseAdminScopes(scopeFlags)
	if err != nil {
		return err
	}
	store, err := c.db.open(ctx, true)
	if err != nil {
		return err
	}
	defer store.Close()
	token := domain.NewSecret(domain.AdminPrefixes[c.db.env])
	hash := domain.HashKey(token)
	t, err := store.CreateAdminToken(ctx, domain.AdminToken{Hash: hash[:], Name: name, Scopes: scopes, Env: c.db.env}, commandActor())
	if err != nil {
		return fmt.Errorf("create admin token: %w", err)
	}
	fmt.Fprintf(stderr, "created admin token %d (%s, %s) in %s; it is shown only now:\n", t.ID, name, scopes.Described(), c.db.shown())
	fmt.Fprintln(stdout, token)
	return nil
}

func adminList(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	read := func(ctx context.Context, store store.Storage) ([]domain.ListedAdminToken, error) {
		tokens, err := store.AdminTokens(ctx)
		return listed(tokens, func(t domain.AdminToken) domain.ListedAdminToken { return t.Listed() }), err
	}
	return listCommand(ctx, "admin list", "admin tokens", args, getenv, stdout, read, "ID\tNAME\tSCOPES\tCREATED\tREVOKED", func(w io.Writer, t domain.ListedAdminToken) {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", t.ID, t.Name, strings.Join(t.Scopes, ","), t.Created.Format(time.RFC3339), timeOrDash(t.Revoked))
	})
}

func adminRevoke(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	c := newCommand("admin revoke", getenv, stdout).withDB()
	rest, err := c.parseArgs(args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("admin revoke takes one ID (see petstore admin list)")
	}
	id, ok := parseID(rest[0])
	if !ok {
		return usagef("ID must be an admin token's numeric id from petstore admin list, not %q", rest[0])
	}
	store, err := c.db.open(ctx, false)
	if err != nil {
		return err
	}
	defer store.Close()
	revoked, err := store.RevokeAdminToken(ctx, id, commandActor())
	if err != nil {
		return keyCommandError("revoke admin token", id, err)
	}
	if !revoked {
		fmt.Fprintf(stdout, "admin token %d was revoked already; nothing changed\n", id)
		return nil
	}
	fmt.Fprintf(stdout, "revoked admin token %d; the admin API refuses it at once\n", id)
	return nil
}

// adminGate lets a request into the admin API with a valid admin token that
// holds the scope its route needs. The token is looked up in the database
// at each request (the admin API is not the hot path), so a revocation
// holds at once on every server. Failed authentications are counted
// (petstore_admin_auth_failures_total) and limited per client address by a
// limiter of their own, never the /v1 one: a portal with a wrong token
// never bans its address from /v1, nor /v1 traffic its admin access.
type adminGate struct {
	store    store.Storage
	env      string
	failures limits.Limiter
	metrics  *metrics.Metrics
}

// caller is whom the failures of r are counted against: its TCP peer,
// whatever --trust-proxy says. The admin listener is reached directly, not
// through the public listener's proxy, so X-Forwarded-For there is the
// client's own word: believed, it would let one address spread its
// failures over made-up addresses, or ban another's.
func (g *adminGate) caller(r *http.Request) domain.CallerID {
	return domain.CallerID{Addr: clientAddr(r, false)}
}

// adminChallenge is the WWW-Authenticate of the admin API's 401s.
const adminChallenge = `Bearer realm="petstore-admin"`

// The failures of an admin authentication, each naming the mistake: its
// reason is the label of petstore_admin_auth_failures_total. Only a pet key
// sent here is told about psk_.
var (
	adminNoHeader    = authFailure{authMissing, "the request has no admin token: send Authorization: Bearer psa_..."}
	adminNoToken     = authFailure{authMissing, "the Authorization header has Bearer and no admin token after it: send Authorization: Bearer psa_..."}
	adminNoBearer    = authFailure{authMalformed, "the Authorization header has the admin token without Bearer before it: send Authorization: Bearer psa_..."}
	adminBareWord    = authFailure{authMalformed, "the Authorization header is one word, neither Bearer and a token nor an admin token: send Authorization: Bearer psa_..."}
	adminBasic       = authFailure{authMalformed, "the admin API does not take Basic authentication (a user and a password): send Authorization: Bearer psa_..., an admin token made by petstore admin create"}
	adminOtherScheme = authFailure{authMalformed, "the Authorization header must use the Bearer scheme: send Authorization: Bearer psa_..."}
	adminPetKey      = authFailure{authMalformed, "this is an API key (psk_...), which works on /v1 only: the admin API takes an admin token (psa_...), made by petstore admin create"}
	adminMistyped    = authFailure{authMalformed, "the admin token is not valid: it has not the length, the characters or the checksum of one (mistyped, or cut short when copied?)"}
	adminUnknown     = authFailure{authInvalid, "the admin token is not valid: there is no such token (petstore admin list shows them)"}
	adminRevoked     = authFailure{authRevoked, "the admin token has been revoked"}
)

// adminCredential is the admin token of an Authorization header, or the
// mistake that keeps the header from holding one for env.
func adminCredential(header, env string) (string, authFailure) {
	token, isBearer := bearerToken(header)
	scheme, _, spaced := strings.Cut(header, " ")
	switch {
	case header == "":
		return "", adminNoHeader
	case isBearer && token == "":
		return "", adminNoToken
	case isBearer:
	case strings.EqualFold(scheme, "Basic"):
		return "", adminBasic
	case spaced:
		return "", adminOtherScheme
	case strings.HasPrefix(header, "psk_"):
		return "", adminPetKey
	case strings.HasPrefix(header, "psa_"):
		return "", adminNoBearer
	default:
		return "", adminBareWord
	}
	if strings.HasPrefix(token, "psk_") {
		return "", adminPetKey
	}
	switch problem := secretProblem(token, env, domain.AdminPrefixes); problem.reason {
	case 0:
		return token, authFailure{}
	case authWrongEnvironment:
		return "", authFailure{authWrongEnvironment, fmt.Sprintf("the admin token belongs to the other environment (psa_live_ is production's, psa_test_ staging's), and this server is %s", env)}
	}
	return "", adminMistyped
}

// require answers a request without a valid admin token 401 (429 once its
// address has failed too often), one whose token lacks need 403, and
// passes the rest to next with the token on the request's info.
func (g *adminGate) require(need domain.ScopeSet) middleware {
	challenge := []string{`Bearer realm="petstore-admin", error="insufficient_scope", scope="` + need.String() + `"`}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t, failure, err := g.authenticate(r)
			if err != nil {
				writeError(w, r, err)
				return
			}
			if t == nil {
				g.refuse(w, r, failure)
				return
			}
			if !t.Scopes.Has(need) {
				insufficientScope(w, r, challenge, "this admin token", "the token", need, t.Scopes)
				return
			}
			recordOf(w).admitted(t)
			next.ServeHTTP(w, r)
		})
	}
}

// authenticate finds the request's admin token, or why it has none. An
// address banned for its failures is not looked up.
func (g *adminGate) authenticate(r *http.Request) (*domain.AdminToken, authFailure, error) {
	token, failure := adminCredential(firstHeader(r.Header, "Authorization"), g.env)
	if failure.reason != 0 {
		return nil, failure, nil
	}
	s, err := g.failures.Peek(r.Context(), g.caller(r), domain.AnonymousLimits)
	if err != nil {
		return nil, authFailure{}, err
	}
	if !s.Allowed {
		return nil, adminUnknown, nil // banned: the token is not even looked up
	}
	hash := domain.HashKey(token)
	t, ok, err := g.store.AdminTokenByHash(r.Context(), bytes.Clone(hash[:]))
	switch {
	case err != nil:
		return nil, authFailure{}, err
	case !ok || t.Env != g.env:
		return nil, adminUnknown, nil
	case !t.RevokedAt.IsZero():
		return nil, adminRevoked, nil
	}
	return &t, authFailure{}, nil
}

// refuse answers a failed authentication: counted, and spent from the
// address's own allowance of failures; 401, or 429 past it.
func (g *adminGate) refuse(w http.ResponseWriter, r *http.Request, failure authFailure) {
	g.metrics.AdminAuthFailed(uint8(failure.reason))
	d, err := g.failures.Allow(r.Context(), g.caller(r), domain.AnonymousLimits)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if !d.Allowed {
		refuse(w, r, &d)
		return
	}
	w.Header().Set("WWW-Authenticate", adminChallenge)
	writeError(w, r, &Error{Code: codeUnauthorized, Message: failure.message})
}
