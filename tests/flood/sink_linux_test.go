//go:build linux

package flood

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/fips-go/fips-go/conn"
	"golang.org/x/sys/unix"
)

// The sink: a UDP socket in the victim's namespace that nobody reads,
// set up as fips-go's shared socket is while it sheds a flood (UDP_GRO on,
// SO_RCVBUF of conn.ShedBuffer). A flood aimed at it costs the machine what
// the kernel spends delivering datagrams to an open port and dropping them
// at a full buffer, and nothing in user space: the least any user-space
// implementation can pay for a flood at its port. The test binary
// re-executes itself in the namespace with sinkEnv set to the port; it
// prints "ready" and holds the socket until its stdin closes.
const (
	sinkEnv  = "FIPS_FLOOD_SINK"
	sinkPort = 51998
)

func sinkMain(portArg string) int {
	port, err := strconv.Atoi(portArg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sink: bad port %q\n", portArg)
		return 1
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, conn.ShedBuffer)
	}
	if err == nil {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1)
	}
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrInet4{Port: port})
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "sink: %v\n", err)
		return 1
	}
	fmt.Println("ready")
	waitStdinClosed()
	unix.Close(fd)
	return 0
}

// startSink runs the sink in the victim's namespace until stop.
func (b *testbed) startSink() (stop func()) {
	b.t.Helper()
	cmd, stdin, stdout := b.reexec(b.nsV, sinkEnv+"="+strconv.Itoa(sinkPort))
	if l, _ := bufio.NewReader(stdout).ReadString('\n'); strings.TrimSpace(l) != "ready" {
		cmd.Wait()
		b.t.Fatalf("sink did not start: %q", l)
	}
	return func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.t.Errorf("sink: %v", err)
		}
	}
}
