package manage

import (
	"context"
	"crypto/subtle"
	"strings"

	"golang.org/x/text/unicode/norm"

	"petstore/internal/domain"
)

// A key's name and externalId, and an admin token's name, are shown in
// lists, kept in the append-only audit trail and sent in key.* webhooks:
// none may hold a secret. Two checks refuse one, each after NFKC (which
// makes fullwidth letters, digits and underscores ASCII):
//
//   - refuseSecret, without the database: a key's or token's prefix, in any
//     case and with any separators (PSK-LIVE, Psk_live, psk.test), or
//     whsec_, so that a key of another database is refused too;
//   - RefuseSecrets, with it: any run of the text's letters and digits,
//     whatever separates them, that is a key or admin token of this
//     database with any of the prefixes (the bare body, live_<body>), looked
//     up by its hash as authentication does, or that is a webhook secret of
//     one of its endpoints.

// secretRefusal is the refusal of both checks: it names the field, never
// the secret.
const secretRefusal = "%s must not hold an API key or admin token (psk_..., psa_...), nor a webhook secret (whsec_...), " +
	"in any case or with any separators: it is shown in lists and kept in the audit trail"

// secretPrefixes are the prefixes refuseSecret refuses, with their
// separators folded to _.
var secretPrefixes = []string{"psk_live", "psk_test", "psa_live", "psa_test", "whsec_"}

// refuseSecret refuses a value (a name, an externalId) that holds a key's
// or token's prefix, or whsec_, however it is written.
func refuseSecret(field, value string) error {
	folded := foldSeparators(strings.ToLower(norm.NFKC.String(value)))
	for _, p := range secretPrefixes {
		if i := strings.Index(folded, p); i >= 0 && (p != "whsec_" || i+len(p) < len(folded)) {
			return domain.Invalid(secretRefusal, field)
		}
	}
	return nil
}

// foldSeparators is s with each run of characters other than ASCII
// letters and digits as one _.
func foldSeparators(s string) string {
	var b strings.Builder
	sep := false
	for i := 0; i < len(s); i++ {
		if isAlnum(s[i]) {
			b.WriteByte(s[i])
			sep = false
		} else if !sep {
			b.WriteByte('_')
			sep = true
		}
	}
	return b.String()
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// SecretStore is what RefuseSecrets looks texts up in: the keys and admin
// tokens by hash, and the webhook endpoints, whose secrets are kept as they
// are (they sign every delivery).
type SecretStore interface {
	KeyByHash(ctx context.Context, hash []byte) (domain.Key, bool, error)
	AdminTokenByHash(ctx context.Context, hash []byte) (domain.AdminToken, bool, error)
	WebhookEndpoints(ctx context.Context, env string) ([]domain.WebhookEndpoint, error)
}

// Texts name a key's texts in RefuseSecrets's refusals: the flags of the
// commands or the admin API's fields.
type Texts struct{ Name, ExternalID string }

var (
	FlagTexts = Texts{Name: "--name", ExternalID: "--external-id"}
	JSONTexts = Texts{Name: "name", ExternalID: "externalId"}
)

// RefuseSecrets refuses name and externalID (nil: not given) when either
// holds a secret of store's database: invalid_request naming the field by
// f, never the secret. A text without a candidate run costs no query.
func RefuseSecrets(ctx context.Context, store SecretStore, f Texts, name, externalID *string) error {
	for _, t := range []struct {
		field string
		value *string
	}{{f.Name, name}, {f.ExternalID, externalID}} {
		if t.value == nil {
			continue
		}
		held, err := holdsKey(ctx, store, *t.value)
		if err == nil && !held {
			held, err = holdsWebhookSecret(ctx, store, *t.value)
		}
		if err != nil {
			return err
		}
		if held {
			return domain.Invalid(secretRefusal, t.field)
		}
	}
	return nil
}

// keyBodyLen is the length of a key's or token's body: all after its
// prefix.
const keyBodyLen = domain.KeyRandomLen + domain.KeyChecksumLen

// holdsKey tells whether a run of value's letters and digits (after NFKC,
// with whatever separated them dropped) is, with one of the prefixes, a key
// or admin token of the database. Only a run whose checksum is right for
// a prefix is looked up, by its hash, as authentication does: at most a
// few hundred checksums for the longest text, and as good as no query
// for a text that holds no key.
func holdsKey(ctx context.Context, store SecretStore, value string) (bool, error) {
	runs := keepOnly(norm.NFKC.String(value), isAlnum, nil)
	var token [64]byte
	for i := 0; i+keyBodyLen <= len(runs); i++ {
		body := runs[i : i+keyBodyLen]
		for _, prefix := range tokenPrefixes {
			t := append(append(token[:0], prefix...), body[:domain.KeyRandomLen]...)
			var sum [domain.KeyChecksumLen]byte
			if string(domain.AppendChecksum(sum[:0], t)) != body[domain.KeyRandomLen:] {
				continue
			}
			hash := domain.HashKey(string(t) + body[domain.KeyRandomLen:])
			var found bool
			var err error
			if strings.HasPrefix(prefix, "psa_") {
				_, found, err = store.AdminTokenByHash(ctx, hash[:])
			} else {
				_, found, err = store.KeyByHash(ctx, hash[:])
			}
			if found || err != nil {
				return found, err
			}
		}
	}
	return false, nil
}

// tokenPrefixes are the prefixes of keys and admin tokens, of both
// environments.
var tokenPrefixes = []string{
	domain.KeyPrefixes["production"], domain.KeyPrefixes["staging"], domain.AdminPrefixes["production"], domain.AdminPrefixes["staging"],
}

// webhookSecretLen is the length of a webhook secret's base64 without its
// prefix and padding: 32 bytes.
const webhookSecretLen = 43

// holdsWebhookSecret tells whether a run of value's base64 characters
// (after NFKC, base64url's - and _ read as + and /, the others dropped) is
// the secret, current or previous, of one of the database's webhook
// endpoints. The secrets are kept as they are, so each run is compared
// with each secret in constant time, every pair compared: the time taken
// says nothing of how much of a secret a text holds.
func holdsWebhookSecret(ctx context.Context, store SecretStore, value string) (bool, error) {
	runs := keepOnly(norm.NFKC.String(value), isBase64, strings.NewReplacer("-", "+", "_", "/"))
	if len(runs) < webhookSecretLen {
		return false, nil
	}
	var endpoints []domain.WebhookEndpoint
	for env := range domain.KeyPrefixes { // the secrets of the whole database, each environment's
		of, err := store.WebhookEndpoints(ctx, env)
		if err != nil {
			return false, err
		}
		endpoints = append(endpoints, of...)
	}
	held := 0
	for _, e := range endpoints {
		for _, secret := range []string{e.Secret, e.PreviousSecret} {
			s := strings.TrimRight(strings.TrimPrefix(secret, domain.WebhookSecretPrefix), "=")
			if len(s) != webhookSecretLen {
				continue
			}
			for i := 0; i+webhookSecretLen <= len(runs); i++ {
				held |= subtle.ConstantTimeCompare([]byte(runs[i:i+webhookSecretLen]), []byte(s))
			}
		}
	}
	return held == 1, nil
}

func isBase64(c byte) bool { return isAlnum(c) || c == '+' || c == '/' }

// keepOnly is s, mapped by r when not nil, with only the bytes keep
// keeps.
func keepOnly(s string, keep func(byte) bool, r *strings.Replacer) string {
	if r != nil {
		s = r.Replace(s)
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if keep(s[i]) {
			b = append(b, s[i])
		}
	}
	return string(b)
}
