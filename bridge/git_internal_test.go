package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/tetherdev/tether/gitops"
	"github.com/tetherdev/tether/wire"
)

// TestGitErrorMessages: what a phone reads of a failed git request is a
// sentinel's text or a fixed sentence, never git's output or a path.
func TestGitErrorMessages(t *testing.T) {
	t.Parallel()
	c := &conn{s: &Server{Logger: slog.New(slog.DiscardHandler)}}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("git status: %w", context.DeadlineExceeded), "git did not finish in time and was stopped"},
		{fmt.Errorf("%w: /home/u/secret: fatal: x", gitops.ErrNotRepository), "not a git repository"},
		{errors.New("fatal: /home/u/secret"), "git failed; see the daemon's log"},
	} {
		var we *wire.Error
		if !errors.As(c.gitError("s", tt.err), &we) || we.Code != wire.CodeGitError || we.Message != tt.want {
			t.Errorf("%v: %+v, want GIT_ERROR %q", tt.err, we, tt.want)
		}
	}
}
