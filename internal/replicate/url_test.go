package replicate

import (
	"strings"
	"testing"
)

func TestAReplicaURLWithASecretOrAnUnknownSchemeIsRefused(t *testing.T) {
	for _, tc := range []struct {
		url, says string
	}{
		{"ftp://backup.example.com/petstore", `unknown scheme "ftp"`},
		{"petstore-backups/prod", "unknown scheme"},
		{"s3://AKIAEXAMPLE:hunter2@bucket/prod", "user or password"},
		{"s3://AKIAEXAMPLE@bucket/prod", "user or password"},
		{"s3://bucket/prod?sseCustomerKey=hunter2", `"sseCustomerKey" is not taken`},
		{"s3://bucket/prod?accessKeyId=AKIA&secretAccessKey=hunter2", "is not taken"},
		{"s3://bucket/prod?endpoint=https://u:hunter2@s3.example.com", "without a user or password"},
		{"s3:///prod", "names no bucket"},
		{"file://host/backup", "file:///ABSOLUTE/PATH"},
		{"file:///backup?x=1", "no query"},
	} {
		_, err := ParseTarget(tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("ParseTarget(%q): %v, want an error saying %q", tc.url, err, tc.says)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseTarget(%q): %v shows the secret", tc.url, err)
		}
	}
}

func TestAReplicaURLOfS3OrAFileIsTakenAndShownAsGiven(t *testing.T) {
	for url, shown := range map[string]string{
		"s3://petstore-backups/prod": "s3://petstore-backups/prod",
		"s3://petstore-backups/prod?region=eu-central-1&endpoint=https://s3.example.com": "s3://petstore-backups/prod?endpoint=https://s3.example.com&region=eu-central-1",
		"file:///mnt/backup/petstore": "file:///mnt/backup/petstore",
	} {
		target, err := ParseTarget(url)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", url, err)
			continue
		}
		if got := target.Shown(); got != shown {
			t.Errorf("ParseTarget(%q).Shown() = %q, want %q", url, got, shown)
		}
	}
}
