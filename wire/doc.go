// Package wire is the phone protocol as PROTOCOL.md documents it: the
// envelope, every message type and the shape of its payload, the error
// codes, and the decoder that turns a client's frame into them. Its files
// follow PROTOCOL.md's sections: transport.go (the HTTPS fallback's paths),
// envelope.go and errors.go, connection.go (auth, acknowledgement,
// health), sessions.go, chat.go, approvals.go, notifications.go, claude.go
// (claude_event), history.go, git.go, files.go, devices.go and runs.go. A
// newcomer looking for a message finds it here.
//
// It does no I/O and imports no package of tether: the bridge package
// reads and writes the frames, and the packages below the bridge
// (session, history, runs, notify, terminal) make the events.
package wire

// ProtocolVersion is the version of the phone protocol this package speaks,
// as "MAJOR.MINOR". A client announcing another major version is refused.
const ProtocolVersion = "1.0"
