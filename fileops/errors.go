package fileops

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
)

// Protocol error codes, as sent in the phone protocol's error payload.
const (
	// CodeOutsideRoot: the path, or a symbolic link on it, leads outside the root.
	CodeOutsideRoot = "PATH_OUTSIDE_ROOT"
	// CodeInvalidPath: NUL byte, invalid UTF-8, too long, or too many links.
	CodeInvalidPath = "INVALID_PATH"
	// CodeNotFound: nothing by that name, or a dangling link.
	CodeNotFound = "FILE_NOT_FOUND"
	// CodeNotDirectory: a listing of something that is not a directory.
	CodeNotDirectory = "NOT_A_DIRECTORY"
	// CodeNotFile: a read of a directory, FIFO, socket or device.
	CodeNotFile = "NOT_A_FILE"
	// CodePermission: the daemon's user may not read it.
	CodePermission = "PERMISSION_DENIED"
	// CodeInvalidRange: a negative offset or limit.
	CodeInvalidRange = "INVALID_RANGE"
	// CodeFileError: any other failure, such as an I/O error.
	CodeFileError = "FILE_ERROR"
)

// Sentinel errors. Errors returned by this package wrap one of them (or,
// for unexpected failures, the underlying error); test with [errors.Is] or
// map with [Code].
var (
	// ErrOutsideRoot reports a path or link that leads outside the root.
	ErrOutsideRoot = errors.New("path outside root")
	// ErrInvalidPath reports a path with a NUL byte or invalid UTF-8.
	ErrInvalidPath = errors.New("invalid path")
	// ErrNameTooLong reports a path over 4096 bytes or a component over 255.
	ErrNameTooLong = errors.New("path too long")
	// ErrSymlinkLoop reports a path that goes through more than 40 links.
	ErrSymlinkLoop = errors.New("too many levels of symbolic links")
	// ErrNotFound reports a path that names nothing, or a dangling link.
	ErrNotFound = errors.New("no such file or directory")
	// ErrNotDirectory reports a listing of something that is not a directory.
	ErrNotDirectory = errors.New("not a directory")
	// ErrNotFile reports a read of something that is not a regular file.
	ErrNotFile = errors.New("not a regular file")
	// ErrPermission reports a path the daemon's user may not read.
	ErrPermission = errors.New("permission denied")
	// ErrInvalidRange reports a negative offset or limit.
	ErrInvalidRange = errors.New("invalid offset or limit")
)

var sentinels = []struct {
	err     error
	code    string
	message string
}{
	{ErrOutsideRoot, CodeOutsideRoot, "Path is outside the session's directory"},
	{ErrInvalidPath, CodeInvalidPath, "Invalid path"},
	{ErrNameTooLong, CodeInvalidPath, "Path too long"},
	{ErrSymlinkLoop, CodeInvalidPath, "Too many levels of symbolic links"},
	{ErrNotFound, CodeNotFound, "No such file or directory"},
	{ErrNotDirectory, CodeNotDirectory, "Not a directory"},
	{ErrNotFile, CodeNotFile, "Not a regular file"},
	{ErrPermission, CodePermission, "Permission denied"},
	{ErrInvalidRange, CodeInvalidRange, "Invalid offset or limit"},
}

// Code returns the protocol error code for err: one of the Code constants,
// [CodeFileError] for an error that wraps none of the sentinels, and "" for
// nil.
func Code(err error) string {
	if err == nil {
		return ""
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.code
		}
	}
	return CodeFileError
}

// Message returns a short text describing err that is safe to send to the
// phone: it never holds paths or internal detail. It returns "" for nil.
func Message(err error) string {
	if err == nil {
		return ""
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.message
		}
	}
	return "File operation failed"
}

// errPathEscapes is the os package's unexported error for a path that an
// os.Root refuses to follow out of the root. Refusals are normally caught
// by resolve before os.Root sees the path; this one shows up only when the
// tree changes between the two (a directory swapped for a link out). It is
// captured once by captureEscapeError.
var (
	errPathEscapes    error
	captureEscapeOnce sync.Once
)

// captureEscapeError records errPathEscapes from root: os.Root refuses ".."
// at its top lexically, before any system call.
func captureEscapeError(root *os.Root) {
	captureEscapeOnce.Do(func() {
		_, err := root.Stat("..")
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			errPathEscapes = pe.Err
		}
	})
}

// classify wraps an error from the os package in the sentinel that fits,
// and returns it unchanged when none does.
func classify(err error) error {
	var sentinel error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		sentinel = ErrNotFound
	case errors.Is(err, syscall.ENOTDIR):
		sentinel = ErrNotDirectory
	case errors.Is(err, fs.ErrPermission):
		sentinel = ErrPermission
	case errors.Is(err, syscall.ELOOP):
		sentinel = ErrSymlinkLoop
	case errors.Is(err, syscall.ENAMETOOLONG):
		sentinel = ErrNameTooLong
	case errPathEscapes != nil && errors.Is(err, errPathEscapes):
		sentinel = ErrOutsideRoot
	default:
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}
