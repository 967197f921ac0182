package bridge

import (
	"github.com/tetherdev/tether/fileops"
	"github.com/tetherdev/tether/wire"
)

// sessionRoot opens the working directory of the named session for file
// access, confined to it.
func (c *conn) sessionRoot(sessionID string) (*fileops.Root, error) {
	if sessionID == "" {
		return nil, wire.Errorf(wire.CodeInvalidMessage, "session_id is required")
	}
	dir, err := c.s.Sessions.WorkDir(c.ctx, sessionID)
	if err != nil {
		return nil, err
	}
	root, err := fileops.Open(dir)
	if err != nil {
		return nil, fileError(err)
	}
	return root, nil
}

// fileError turns a fileops error into a protocol error with its code and
// a message that names no path of the machine.
func fileError(err error) error {
	return &wire.Error{Code: fileops.Code(err), Message: fileops.Message(err)}
}

func (c *conn) fileList(env wire.Envelope) error {
	var p wire.FileList
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	root, err := c.sessionRoot(p.SessionID)
	if err != nil {
		return err
	}
	defer root.Close()
	l, err := root.List(p.Path, fileops.ListOptions{Offset: p.Offset, Limit: p.Limit, ShowHidden: p.ShowHidden})
	if err != nil {
		return fileError(err)
	}
	c.sendPooled(wire.TypeFileListResponse, env.ID, wire.FileListResponse{SessionID: p.SessionID, FileListing: wireListing(l)})
	return nil
}

func (c *conn) fileRead(env wire.Envelope) error {
	var p wire.FileRead
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	root, err := c.sessionRoot(p.SessionID)
	if err != nil {
		return err
	}
	defer root.Close()
	f, err := root.Read(p.Path, fileops.ReadOptions{Offset: p.Offset, Limit: p.Limit})
	if err != nil {
		return fileError(err)
	}
	c.sendPooled(wire.TypeFileReadResponse, env.ID, wire.FileReadResponse{SessionID: p.SessionID, FileContent: wireFile(f)})
	return nil
}
