package adminapi

import (
	"net/http"
	"time"
)

// BackupStatus is GET /admin/v1/backup's answer: where the continuous
// replica of the SQLite file stands (docs/production.md, "Backup and
// restore"). Replicating is false, and the rest absent, without
// --replicate-to.
type BackupStatus struct {
	Replicating bool   `json:"replicating"`
	URL         string `json:"url,omitempty"` // without secrets
	// LastUploadAt is when this server last uploaded to the replica.
	LastUploadAt *time.Time `json:"last_upload_at,omitempty"`
	// BehindSeconds is how long the replica has lacked a transaction
	// this server wrote; 0 when it holds every one.
	BehindSeconds *float64   `json:"behind_seconds,omitempty"`
	UploadedBytes *int64     `json:"uploaded_bytes,omitempty"`
	Errors        *int64     `json:"errors,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	LastErrorAt   *time.Time `json:"last_error_at,omitempty"`
}

// Backup answers GET /admin/v1/backup with what status reads.
func Backup(status func() BackupStatus) http.Handler {
	return route(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		return http.StatusOK, status(), nil
	})
}
