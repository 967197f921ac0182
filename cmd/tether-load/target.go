package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// errBadTarget is returned for a -target value that cannot be parsed.
var errBadTarget = errors.New("bad target")

// A target is one server under test.
type target struct {
	// Name labels the target in the output.
	Name string
	// URL is the WebSocket endpoint, ws:// or wss://.
	URL string
	// Token is the device token sent in auth.
	Token string
	// PID is the server's process id, 0 when unknown; idle mode needs it,
	// and with it the other modes report the server's CPU use.
	PID int
	// Fingerprint, when set, pins the server's leaf certificate by the
	// SHA-256 of its DER encoding.
	Fingerprint []byte
	// Insecure accepts any certificate.
	Insecure bool
	// Start, when set, is a shell command that runs the server: the load
	// tool starts it afresh for every run and stops it after, and knows
	// its PID.
	Start string
}

// tlsDefaults is what a target inherits from -fp and -insecure when it
// does not name its own certificate check.
type tlsDefaults struct {
	Fingerprint []byte
	Insecure    bool
}

// parseTarget parses NAME=URL,TOKEN[,PID[,CERT]] where TOKEN is the token
// itself or env:VAR (read from the environment through getenv), PID may be
// empty, and CERT is sha256:HEX or "insecure".
func parseTarget(s string, def tlsDefaults, getenv func(string) string) (target, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return target{}, fmt.Errorf("%w %q: want NAME=URL,TOKEN[,PID[,CERT]]", errBadTarget, s)
	}
	fields := strings.Split(rest, ",")
	if len(fields) < 2 || len(fields) > 4 {
		return target{}, fmt.Errorf("%w %q: want NAME=URL,TOKEN[,PID[,CERT]]", errBadTarget, s)
	}
	t := target{Name: name, URL: fields[0], Fingerprint: def.Fingerprint, Insecure: def.Insecure}
	if err := checkURL(t.URL); err != nil {
		return target{}, fmt.Errorf("%w %q: %w", errBadTarget, name, err)
	}
	tok, err := resolveToken(fields[1], getenv)
	if err != nil {
		return target{}, fmt.Errorf("%w %q: %w", errBadTarget, name, err)
	}
	t.Token = tok
	if len(fields) >= 3 && fields[2] != "" {
		pid, err := strconv.Atoi(fields[2])
		if err != nil || pid <= 0 {
			return target{}, fmt.Errorf("%w %q: PID %q is not a process id", errBadTarget, name, fields[2])
		}
		t.PID = pid
	}
	if len(fields) == 4 {
		switch c := fields[3]; c {
		case "insecure":
			t.Fingerprint, t.Insecure = nil, true
		default:
			fp, err := parseFingerprint(c)
			if err != nil {
				return target{}, fmt.Errorf("%w %q: %w", errBadTarget, name, err)
			}
			t.Fingerprint, t.Insecure = fp, false
		}
	}
	return t, nil
}

// resolveToken returns the token a TOKEN field names: env:VAR reads VAR.
func resolveToken(field string, getenv func(string) string) (string, error) {
	if v, ok := strings.CutPrefix(field, "env:"); ok {
		tok := getenv(v)
		if tok == "" {
			return "", fmt.Errorf("environment variable %s is empty", v)
		}
		return tok, nil
	}
	if field == "" {
		return "", errors.New("empty token")
	}
	return field, nil
}

// checkURL accepts ws:// and wss:// URLs with a host.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("URL: %w", err)
	}
	if (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return fmt.Errorf("URL %q: want ws://HOST:PORT/PATH or wss://HOST:PORT/PATH", s)
	}
	return nil
}

// parseFingerprint parses sha256:HEX, 64 hex digits in either case,
// colons between byte pairs allowed (as openssl prints them).
func parseFingerprint(s string) ([]byte, error) {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok {
		return nil, fmt.Errorf("fingerprint %q: want sha256:HEX", s)
	}
	b, err := hex.DecodeString(strings.ReplaceAll(h, ":", ""))
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("fingerprint %q: want %d hex-encoded bytes", s, sha256.Size)
	}
	return b, nil
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}
