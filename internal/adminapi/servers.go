package adminapi

import (
	"net/http"
	"time"

	"petstore/internal/domain"
)

// GET /admin/v1/servers (keys:read; docs/admin.md, "The routes"): the
// servers that use the database as they last checked in, and where its
// schema stands, so that an operator rolling a fleet sees which are done
// (docs/replicas.md, "Upgrading a fleet").

// serverJSON is a server of the list.
type serverJSON struct {
	Address    string    `json:"address"`
	Version    string    `json:"version"`
	Revision   string    `json:"revision"`
	Migrations int       `json:"migrations"`
	UpToDate   bool      `json:"upToDate"` // it knows every migration the schema has
	Started    time.Time `json:"started"`
	LastSeen   time.Time `json:"lastSeen"`
}

type serversJSON struct {
	Schema  schemaJSON   `json:"schema"`
	Servers []serverJSON `json:"servers"`
}

type schemaJSON struct {
	Version int `json:"version"`
	Level   int `json:"level"`
}

func ListServers(d Deps) http.Handler {
	return route(func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		schema, err := d.Servers.Schema(r.Context())
		if err != nil {
			return 0, nil, err
		}
		servers, err := d.Servers.Servers(r.Context())
		out := serversJSON{Schema: schemaJSON{schema.Version, schema.Level}, Servers: make([]serverJSON, 0, len(servers))}
		for _, s := range servers {
			out.Servers = append(out.Servers, serverOf(s, schema))
		}
		return http.StatusOK, out, err
	})
}

func serverOf(s domain.Server, schema domain.Schema) serverJSON {
	return serverJSON{Address: s.Address, Version: s.Version, Revision: s.Revision, Migrations: s.Migrations,
		UpToDate: s.Migrations >= schema.Version, Started: s.StartedAt.UTC(), LastSeen: s.LastSeen.UTC()}
}
