package manage

import (
	"strings"
	"testing"
)

// TestLabelsRefuseASecretsPrefixHoweverWritten: without the database, a
// name or externalId that holds a key's or token's prefix, or whsec_ and
// more, is refused in any case and with any separators, fullwidth ones
// too; the words alone are taken.
func TestLabelsRefuseASecretsPrefixHoweverWritten(t *testing.T) {
	for _, tt := range []struct {
		value   string
		refused bool
	}{
		{"psk_live_", true},
		{"PSK_LIVE_0123", true},
		{"Psk_live_x", true},
		{"psk-test-x", true},
		{"psk.live", true},
		{"psk live", true},
		{"\uff50\uff53\uff4b\uff3f\uff4c\uff49\uff56\uff45\uff3fabc", true}, // ｐｓｋ＿ｌｉｖｅ＿abc
		{"psk\uff3flive\uff3fabc", true},
		{"my PSA:TEST token", true},
		{"whsec_abc", true},
		{"WHSEC-abc", true},
		{"tiny-bot", false},
		{"PSK rotation notes", false},
		{"pre-shared key (PSK) owner", false},
		{"whsec", false},
		{"whsec ", false},
		{"live_test_bot", false},
		{"pskalive", false},
	} {
		for _, check := range []func(field, value string) error{CheckLabel, CheckExternalID} {
			err := check("name", tt.value)
			if (err != nil) != tt.refused {
				t.Errorf("%q: %v, want refused %v", tt.value, err, tt.refused)
			}
			if err != nil && (!strings.HasPrefix(err.Error(), "name must not hold an API key or admin token") || strings.Contains(err.Error(), tt.value)) {
				t.Errorf("%q: the refusal %q does not name the field, or echoes the value", tt.value, err)
			}
		}
	}
}
