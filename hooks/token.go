package hooks

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TokenFile is the name of the hook secret's file in the data directory.
const TokenFile = "hook-token"

// ErrNoToken is returned by ReadToken when the data directory holds no hook
// secret yet (the daemon has never started there).
var ErrNoToken = errors.New("hooks: no hook token in the data directory")

// ErrBadToken is returned for a token file whose content is not a token.
var ErrBadToken = errors.New("hooks: the hook token file is damaged")

// tokenLen is the length of a token: 256 random bits in hex.
const tokenLen = 64

// LoadOrCreateToken returns the hook secret kept in dataDir, creating it
// (256 random bits, file mode 0600, the directory 0700) on the first call.
// Two processes creating it at once end up with the same token.
func LoadOrCreateToken(dataDir string) (string, error) {
	tok, err := ReadToken(dataDir)
	if !errors.Is(err, ErrNoToken) {
		return tok, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("hooks: data directory: %w", err)
	}
	var b [32]byte
	rand.Read(b[:])
	tok = hex.EncodeToString(b[:])
	tmp, err := os.CreateTemp(dataDir, TokenFile+".*")
	if err != nil {
		return "", fmt.Errorf("hooks: token: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(tok + "\n")
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return "", fmt.Errorf("hooks: token: %w", err)
	}
	// A hard link never replaces an existing file: whoever links first wins.
	if err := os.Link(tmp.Name(), filepath.Join(dataDir, TokenFile)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ReadToken(dataDir)
		}
		return "", fmt.Errorf("hooks: token: %w", err)
	}
	return tok, nil
}

// ReadToken returns the hook secret kept in dataDir, or ErrNoToken.
func ReadToken(dataDir string) (string, error) {
	p := filepath.Join(dataDir, TokenFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", ErrNoToken
	}
	if err != nil {
		return "", fmt.Errorf("hooks: token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if _, err := hex.DecodeString(tok); err != nil || len(tok) != tokenLen {
		return "", fmt.Errorf("%w: %s", ErrBadToken, p)
	}
	return tok, nil
}
