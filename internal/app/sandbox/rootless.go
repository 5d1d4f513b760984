package sandbox

// The rootless modes (`fips-go userspace`) run as an ordinary user and
// parse the same network input as the daemon: every peer's packets, with
// --exit any peer's traffic, and the local proxies' clients' requests. A
// compromise of such a process would otherwise get everything its user
// has: SSH keys, browser profiles, the user's other programs' sockets and
// processes. ApplyRootless takes that away once the mode's sockets,
// listeners and (for `-- CMD`) namespace child exist. It is a policy of
// its own: no capabilities to keep, other socket families, and a child
// process to signal.

// RootlessConfig says what a rootless mode still reads and writes after
// start.
type RootlessConfig struct {
	// ReadFiles are files of the user's it may read: the config file it
	// was given.
	ReadFiles []string
	// SocketDir holds the UAPI socket, removed at exit ("" for none).
	SocketDir string
	// WriteFiles exist already and are written again later (a heap
	// profile written at exit, created empty before the sandbox applies):
	// only these files, not their directories, become writable.
	WriteFiles []string
	// Child is the namespace child of `userspace -- CMD`, which the mode
	// passes signals on to (0: none). It is a process outside the
	// sandbox, so Landlock's signal scope is left out for it and the
	// seccomp filter lets kill reach this pid besides the process's own.
	Child int
}

// NetlinkSockDiag is the netlink protocol of the SOCKS5 proxy's owner
// check (linux/netlink.h): which local user owns the socket a datagram
// or connection came from.
const NetlinkSockDiag = 4

// RootlessNetlink are the netlink protocols a rootless mode opens after
// start: route (the interface list, for the exit's host addresses) and
// socket diagnostics (the SOCKS5 owner check). Any other netlink protocol
// is refused; so is any family but AF_INET, AF_INET6 (the tunnel's UDP
// socket, the exit's host TCP, UDP and unprivileged ICMP sockets, the
// forwards, DNS-following endpoints' lookups) and AF_UNIX where Landlock
// confines it, as for the daemon.
var RootlessNetlink = []uint64{NetlinkRoute, NetlinkSockDiag}

// RootlessDenyExtra are system calls the daemon needs and a rootless mode
// does not: setns (the daemon follows its interface into another network
// namespace; a rootless mode never changes namespace).
var RootlessDenyExtra = []string{"setns"}
