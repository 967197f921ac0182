// Package fileops lists directories and reads files for a phone, confined to
// one root directory (a session's working directory).
//
// Every filesystem access goes through an [os.Root] opened on that directory
// (directory entries are stat'ed with fstatat relative to a directory
// descriptor that the os.Root opened, one name at a time, without following
// links), so nothing outside the root is opened, read or stat'ed, not even
// through a symbolic link or a directory swapped for one while a request runs.
// The bridge sends its results to the phone as the protocol's types
// (wire.FileListing, wire.FileContent).
//
// # Path rules
//
// A client path is turned into a path relative to the root by [Root.Rel]:
//
//   - "", "." and a path made only of slashes ("/", "//") name the root.
//   - An absolute path is cleaned lexically; if it equals the root's absolute
//     path (the one given to [Open], or the same directory with its symbolic
//     links resolved) it names the root, if it lies under it it names that
//     path, and any other absolute path is refused with PATH_OUTSIDE_ROOT.
//   - A relative path is relative to the root. It is cleaned lexically, so
//     "a/../b" is "b" whatever "a" is (as os.Root does); a ".." that climbs
//     above the root is refused with PATH_OUTSIDE_ROOT.
//   - A NUL byte or invalid UTF-8 is refused with INVALID_PATH (JSON cannot
//     carry invalid UTF-8, so such a path could only be a forgery). A path
//     longer than 4096 bytes or with a component longer than 255 bytes is
//     refused with INVALID_PATH.
//   - Symbolic links are followed while they stay inside the root. A relative
//     link is resolved against its own directory; an absolute link is
//     followed only when its target is under the root's absolute path. A link
//     that leads outside, at any depth and through any chain of links, is
//     refused with PATH_OUTSIDE_ROOT before its target is touched. More than
//     40 links in one path is INVALID_PATH.
//
// Paths in replies are root-relative, slash-separated and clean ("." is the
// root); they are accepted back as they are. A reply echoes the path as the
// client named it (through links), not the link targets.
//
// # Error codes
//
// [Code] maps an error returned by this package to one of these protocol
// codes, and [Message] to a short text safe to show on the phone:
//
//	PATH_OUTSIDE_ROOT  the path, or a link on it, leads outside the root
//	INVALID_PATH       NUL byte, invalid UTF-8, too long, or a symlink loop
//	FILE_NOT_FOUND     nothing by that name, or a dangling link
//	NOT_A_DIRECTORY    file_list of something that is not a directory
//	NOT_A_FILE         file_read of a directory, FIFO, socket or device
//	PERMISSION_DENIED  the daemon's user may not read it
//	INVALID_RANGE      a negative offset or limit
//	FILE_ERROR         any other failure (I/O); no detail is given
//
// # Listings
//
// Entries have type "file" or "directory" only. A symbolic link has its
// target's type and symlink true; a dangling link, a link loop or a link that
// leads outside the root is a "file" with symlink true, size 0 and no
// modification time. FIFOs, sockets and devices are listed as "file".
// Directories come first, then files, each sorted by name in byte order.
// Names starting with "." are left out unless [ListOptions.ShowHidden] is
// set, and ".git" is left out unless [ListOptions.ShowGit] is set (whatever
// ShowHidden says); paths inside .git can still be listed and read when
// named. Names that are not valid UTF-8 are left out, since the phone could
// not name them back. Pages hold [DefaultListLimit] entries unless asked
// otherwise, and at most [MaxListLimit].
//
// # Reading
//
// [Root.Read] pages by lines: a line ends after "\n" (a final line without
// one counts too), and content holds the asked lines verbatim, "\n" or "\r\n"
// included. A reply carries at most [MaxContentBytes] of content, cut after
// the last whole line that fits; a single line longer than that is cut at a
// rune boundary and counts as one returned line. truncated is true whenever
// more of the file follows the content. A file is binary when its first
// [SniffBytes] hold a NUL byte or are not valid UTF-8 (like git's
// heuristic): then binary is true, encoding is "binary", content is empty and
// lines is 0. Other text (Latin-1, UTF-16) is binary by this rule; it is not
// transcoded. Invalid UTF-8 found further on is replaced by U+FFFD. Read
// stops scanning once it has the content and has seen [MaxCountBytes] of the
// file; for a longer file lines is then a lower bound and lines_partial is
// true.
package fileops
