package server

import (
	"petstore/internal/metrics"
	"runtime"
	"runtime/debug"
)

// BuildInfo is what the binary knows of its own build, for --version and
// petstore_build_info.
type BuildInfo struct {
	Version   string // the module version, "(devel)" for a local build
	Revision  string // the VCS commit, "unknown" without one
	Modified  string // "+dirty" when built from a modified tree
	Time      string // the commit time
	GoVersion string
}

// ReadBuildInfo is the running binary's build.
func ReadBuildInfo() BuildInfo {
	b := BuildInfo{Version: "unknown", Revision: "unknown", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Version, b.GoVersion = info.Main.Version, info.GoVersion
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				b.Modified = "+dirty"
			}
		}
	}
	return b
}

// Metrics is b as petstore_build_info reports it.
func (b BuildInfo) Metrics() metrics.Build {
	return metrics.Build{Version: b.Version, GoVersion: b.GoVersion, Revision: b.Revision}
}
