package wire

// File message types: a session's working directory, listed and read.
const (
	TypeFileList         = "file_list"
	TypeFileListResponse = "file_list_response"
	TypeFileRead         = "file_read"
	TypeFileReadResponse = "file_read_response"
)

// FileList is the payload of file_list.
type FileList struct {
	SessionID  string `json:"session_id"`
	Path       string `json:"path"`
	Offset     int    `json:"offset"`
	Limit      int    `json:"limit"`
	ShowHidden bool   `json:"show_hidden"`
}

// FileRead is the payload of file_read.
type FileRead struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
	Offset    int    `json:"offset"`
	Limit     int    `json:"limit"`
}

// FileListing is one page of a directory listing.
type FileListing struct {
	// Path is the directory's root-relative path, "." for the root.
	Path string `json:"path"`
	// Parent is the root-relative path of the directory's parent, "" at the root.
	Parent string `json:"parent"`
	// Entries is the page, directories first, then by name; never null.
	Entries []FileEntry `json:"entries"`
	// Total is the number of entries in the whole listing.
	Total int `json:"total"`
	// Offset is the index of the page's first entry.
	Offset int `json:"offset"`
	// Limit is the page size used.
	Limit int `json:"limit"`
	// HasMore is true when entries follow this page.
	HasMore bool `json:"has_more"`
}

// Kinds of a FileEntry.
const (
	FileTypeFile      = "file"
	FileTypeDirectory = "directory"
)

// FileEntry is one name in a FileListing.
type FileEntry struct {
	// Name is the entry's name in its directory.
	Name string `json:"name"`
	// Path is the entry's root-relative path, accepted back by file_list
	// and file_read.
	Path string `json:"path"`
	// Type is FileTypeFile or FileTypeDirectory (a symbolic link's
	// target's type).
	Type string `json:"type"`
	// Size is the size in bytes of a file; 0 for a directory and for a
	// link without a target inside the root.
	Size int64 `json:"size"`
	// Modified is the modification time, in whole seconds, UTC (RFC 3339:
	// "2026-11-27T16:00:00Z"); absent for a link without a target inside
	// the root. A string, not a time.Time: encoding/json validates and
	// compacts what a MarshalJSON method returns, which was a third of the
	// cost of encoding a listing of 1,000 entries.
	Modified string `json:"modified,omitempty"`
	// Symlink is true when the entry is a symbolic link.
	Symlink bool `json:"symlink,omitempty"`
}

// FileListResponse is the payload of file_list_response.
type FileListResponse struct {
	SessionID string `json:"session_id"`
	*FileListing
}

// FileContent is part of a file's content.
type FileContent struct {
	// Path is the file's root-relative path.
	Path string `json:"path"`
	// Content holds the asked lines, verbatim; "" for a binary file.
	Content string `json:"content"`
	// Size is the size of the whole file in bytes.
	Size int64 `json:"size"`
	// Lines is the number of lines in the whole file; 0 for a binary file.
	Lines int `json:"lines"`
	// LinesPartial is true when the file was too long to count all its
	// lines; Lines is then a lower bound.
	LinesPartial bool `json:"lines_partial,omitempty"`
	// Offset is the index of the first line in Content.
	Offset int `json:"offset"`
	// ReturnedLines is the number of lines in Content.
	ReturnedLines int `json:"returned_lines"`
	// Truncated is true when more of the file follows Content.
	Truncated bool `json:"truncated"`
	// Encoding is "utf-8", or "binary" for a binary file.
	Encoding string `json:"encoding"`
	// Binary is true when the file is not UTF-8 text.
	Binary bool `json:"binary"`
	// MIME is the file's media type, from its name or its first bytes.
	MIME string `json:"mime,omitempty"`
}

// FileReadResponse is the payload of file_read_response.
type FileReadResponse struct {
	SessionID string `json:"session_id"`
	*FileContent
}
