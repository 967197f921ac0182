package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// devVersion is the version of a build that carries no other: a checkout
// built without its commit (no git, a worktree, or -buildvcs=false).
const devVersion = "0.1.0-dev"

// ldVersion is set by release builds: -ldflags "-X main.ldVersion=v1.2.3".
var ldVersion string

// version is what the daemon reports as its version (`tether version`,
// server_version, /healthz, the runtime info).
var version = buildVersion(ldVersion, debug.ReadBuildInfo)

// buildVersion picks the version: the one given at link time, else the
// main module's version in the build info: the version `go install
// …@VERSION` fetched, or for a build of a git checkout the one go build
// derives from its commit (a tag, else a pseudo-version
// v0.0.0-TIME-COMMIT, +dirty with changes not committed); else devVersion.
func buildVersion(ld string, read func() (*debug.BuildInfo, bool)) string {
	if ld != "" {
		return ld
	}
	if bi, ok := read(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return devVersion
}

func buildSettings(bi *debug.BuildInfo) map[string]string {
	m := map[string]string{}
	for _, s := range bi.Settings {
		m[s.Key] = s.Value
	}
	return m
}

// versionText is `tether version`'s answer: the version, then what the
// build recorded of its source and toolchain.
func versionText(read func() (*debug.BuildInfo, bool)) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tether %s\n", version)
	bi, ok := read()
	if !ok {
		return b.String()
	}
	s := buildSettings(bi)
	if rev := s["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "commit %s", rev)
		if t := s["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " of %s", t)
		}
		if s["vcs.modified"] == "true" {
			b.WriteString(", with changes not committed")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "module %s %s, built with %s for %s/%s\n", bi.Main.Path, bi.Main.Version, bi.GoVersion, s["GOOS"], s["GOARCH"])
	return b.String()
}
