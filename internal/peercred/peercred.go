// Package peercred checks who is at the other end of a Unix socket: the
// daemon's control socket and a sandbox bridge's socket that a restarted
// daemon adopts both talk only to the daemon's own user.
package peercred

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// SameUser refuses a peer (SO_PEERCRED: the process that made the other
// end) whose user is not this process's effective user.
func SameUser(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return errors.New("not a Unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return credErr
	}
	if int(cred.Uid) != os.Geteuid() {
		return fmt.Errorf("peer uid %d is not this process's %d", cred.Uid, os.Geteuid())
	}
	return nil
}
