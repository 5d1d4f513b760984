// Package userns runs a command in a new unprivileged user, mount and
// network namespace whose only network is a kernel TUN, and hands that
// TUN's file descriptor back to the caller, which serves it from its own
// namespace (where its UDP socket stays). No root is needed where the
// kernel lets unprivileged users create user namespaces.
//
// The namespaces are set up by a child process, a re-execution of the
// running binary in which the caller's uid is root: it creates and
// configures the TUN, bind-mounts a resolv.conf, passes the TUN back over a
// unix socket, and then runs the command in one more user namespace that
// maps the caller's own uid, so the command has the caller's identity and
// no capabilities.
package userns

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// ChildEnv is the environment variable that marks the child process; the
// program's main must call ChildMain first thing when IsChild reports it.
const ChildEnv = "FIPS_GO_USERNS_CHILD"

// Options describe the namespace's network and the command to run there.
type Options struct {
	// Name is the TUN interface's name inside the namespace; default
	// "fipsgo0".
	Name string
	// MTU of the TUN; default 1420.
	MTU int
	// Addresses are the interface's addresses with their subnets.
	Addresses []netip.Prefix
	// Routes are routed through the TUN (0.0.0.0/0 is the default route).
	Routes []netip.Prefix
	// DNS and DNSSearch make the namespace's /etc/resolv.conf; with both
	// empty the host's is kept.
	DNS       []netip.Addr
	DNSSearch []string
	// Args is the command and its arguments; Args[0] is looked up in PATH.
	Args []string
	// Stdin, Stdout and Stderr are the command's; nil means the caller's.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// ErrUnavailable is wrapped by Start's error when the kernel or a policy
// refuses unprivileged user namespaces.
var ErrUnavailable = errors.New("unprivileged user namespaces are not available")

// spec is what the child is told, through ChildEnv.
type spec struct {
	Name      string
	MTU       int
	Addresses []netip.Prefix
	Routes    []netip.Prefix
	Resolv    string // path of the resolv.conf to bind-mount; "" for none
	UID, GID  int    // the caller's, for the command's own user namespace
	Path      string // the command, found in PATH
}

// reply is the child's one message back, sent with the TUN's descriptor
// when Err is empty.
type reply struct {
	Err string
}

func (o *Options) normalize() error {
	if o.Name == "" {
		o.Name = "fipsgo0"
	}
	if o.MTU == 0 {
		o.MTU = 1420
	}
	switch {
	case len(o.Args) == 0:
		return errors.New("userns: no command to run")
	case len(o.Name) > 15 || strings.ContainsAny(o.Name, "/: \t\n"):
		return fmt.Errorf("userns: invalid interface name %q", o.Name)
	case o.MTU < 68 || o.MTU > 65535:
		return fmt.Errorf("userns: MTU %d out of range [68, 65535]", o.MTU)
	case len(o.Addresses) == 0:
		return errors.New("userns: the namespace needs at least one address")
	}
	return nil
}

// ResolvConf is the resolv.conf for servers and search domains.
func ResolvConf(servers []netip.Addr, search []string) string {
	var b strings.Builder
	b.WriteString("# written by fips-go userspace: the tunnel's DNS\n")
	for _, a := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", a)
	}
	if len(search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(search, " "))
	}
	return b.String()
}

// Diagnose names the kernel setting or policy that keeps unprivileged
// users from user namespaces, reading /proc/sys files with read; "" when
// none of the known ones does.
func Diagnose(read func(path string) (string, error)) string {
	val := func(p string) string {
		s, err := read(p)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(s)
	}
	var why []string
	if val("/proc/sys/kernel/unprivileged_userns_clone") == "0" {
		why = append(why, "sysctl kernel.unprivileged_userns_clone is 0 (set it to 1)")
	}
	if val("/proc/sys/user/max_user_namespaces") == "0" {
		why = append(why, "sysctl user.max_user_namespaces is 0 (set it above 0)")
	}
	if val("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1" {
		why = append(why, "AppArmor restricts unprivileged user namespaces (sysctl kernel.apparmor_restrict_unprivileged_userns=1; give fips-go an AppArmor profile with \"userns,\" or set it to 0)")
	}
	return strings.Join(why, "; ")
}
