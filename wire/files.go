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
