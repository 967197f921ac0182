package pairing

import "net/netip"

// Connection modes of the protocol.
const (
	ModeLocalOnly      = "local_only"
	ModePrivateNetwork = "private_network"
	ModeSecureRemote   = "secure_remote"
	ModeDirectPublic   = "direct_public"
	ModeMisconfigured  = "misconfigured"
)

// Classification is a connection's mode and a sentence for the user.
type Classification struct {
	Mode        string
	Description string
}

// ClassifyAddr classifies a peer by its address alone: loopback is
// local_only; RFC 1918, IPv6 unique-local and link-local are
// private_network; anything else is direct_public. A tailnet peer is
// secure_remote only when tailscaled vouches for it, which an address
// cannot show (100.64.0.0/10 is also carrier-grade NAT), so this function
// never returns secure_remote.
func ClassifyAddr(a netip.Addr) Classification {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return Classification{ModeLocalOnly, "Loopback connection from this machine (" + a.String() + ")"}
	case a.IsPrivate():
		return Classification{ModePrivateNetwork, "Private network address " + a.String() + " (RFC 1918 or IPv6 ULA)"}
	case a.IsLinkLocalUnicast():
		return Classification{ModePrivateNetwork, "Link-local address " + a.String()}
	default:
		return Classification{ModeDirectPublic, "Public address " + a.String() + " without a tunnel"}
	}
}
