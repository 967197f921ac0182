package hooks

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestLoadOrCreateToken(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := ReadToken(dir); !errors.Is(err, ErrNoToken) {
		t.Fatalf("before: %v", err)
	}
	tok, err := LoadOrCreateToken(dir)
	if err != nil || len(tok) != 64 {
		t.Fatalf("%q %v", tok, err)
	}
	fi, err := os.Stat(filepath.Join(dir, TokenFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file %v %v", fi, err)
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Fatalf("data directory mode %v", di.Mode())
	}
	again, err := LoadOrCreateToken(dir)
	if err != nil || again != tok {
		t.Fatalf("second call: %q %v", again, err)
	}
	if read, err := ReadToken(dir); err != nil || read != tok {
		t.Fatalf("read: %q %v", read, err)
	}
	if other, _ := LoadOrCreateToken(t.TempDir()); other == tok {
		t.Fatal("two data directories share a token")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left over: %v", entries)
	}
}

func TestTokenCreatedOnceUnderRace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	toks := make([]string, 8)
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() {
			tok, err := LoadOrCreateToken(dir)
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		})
	}
	wg.Wait()
	for _, tok := range toks {
		if tok != toks[0] {
			t.Fatalf("tokens differ: %v", toks)
		}
	}
}

func TestDamagedToken(t *testing.T) {
	t.Parallel()
	for _, content := range []string{"", "short\n", "zz" + testToken[2:], testToken + "00"} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, TokenFile), []byte(content), 0o600)
		if _, err := LoadOrCreateToken(dir); !errors.Is(err, ErrBadToken) {
			t.Errorf("%q: %v", content, err)
		}
	}
}
