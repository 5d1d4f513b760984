//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "conf":
		err = confMain(os.Args[2:])
	case "run":
		err = runMain(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peersim:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: peersim conf|run [flags] (peersim run -h lists them)")
	os.Exit(2)
}

// confMain writes the gateway's wg configuration: its private key and
// listen port, and every simulated peer with its tunnel address as one /32
// and no endpoint, as a server's road-warrior clients are configured.
func confMain(args []string) error {
	fs := flag.NewFlagSet("conf", flag.ExitOnError)
	n := fs.Int("n", 1000, "peers")
	seed := fs.Uint64("seed", 1, "key seed (the same for run)")
	port := fs.Int("port", 51820, "the gateway's listen port")
	fs.Parse(args)
	if *n < 1 || *n > 1<<22-2 {
		return fmt.Errorf("-n %d: want 1 to %d", *n, 1<<22-2)
	}
	pubs := make([]string, *n)
	parallel(*n, func(i int) {
		k := derivedKey(*seed, i)
		pubs[i] = k.PublicKey().Base64()
	})
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	gw := derivedKey(*seed, -1)
	fmt.Fprintf(w, "[Interface]\nPrivateKey = %s\nListenPort = %d\n", gw.Base64(), *port)
	for i, p := range pubs {
		a := innerAddr(i)
		fmt.Fprintf(w, "\n[Peer]\nPublicKey = %s\nAllowedIPs = %d.%d.%d.%d/32\n", p, a[0], a[1], a[2], a[3])
	}
	return w.Flush()
}

func runMain(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var o options
	fs.IntVar(&o.n, "n", 1000, "peers (the first n of the gateway's configuration)")
	fs.Uint64Var(&o.seed, "seed", 1, "key seed (as given to conf)")
	gw := fs.String("gateway", "", "the gateway's outer address:port")
	src := fs.String("src", "10.99.0.0/16", "outer source prefix, local in this namespace")
	port := fs.Uint("port", 40000, "first outer source port")
	fs.DurationVar(&o.storm, "storm", time.Second, "first initiations spread evenly over this time")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "run at most this long from the storm's start")
	fs.Float64Var(&o.rate, "rate", 0, "echo requests per second per established peer (0: none)")
	fs.IntVar(&o.payload, "payload", 56, "ICMP payload bytes of each echo request")
	fs.IntVar(&o.pings, "pings", 0, "a peer stops pinging after this many replies (0: never)")
	fs.DurationVar(&o.keepalive, "keepalive", 25*time.Second, "send a keepalive after this long without sending (0: never)")
	fs.BoolVar(&o.retryOnCookie, "retry-on-cookie", false, "retry at once after a cookie reply (a real peer waits for its retransmission)")
	fs.BoolVar(&o.untilDone, "until-done", false, "stop once every peer has a session and its -pings replies")
	fs.DurationVar(&o.linger, "linger", 0, "with -until-done: print \"done\" when done, then go on this long (sessions kept alive)")
	fs.IntVar(&o.sockets, "sockets", 2, "receiving sockets (goroutines) per source port")
	fs.Parse(args)
	var err error
	if o.gateway, err = netip.ParseAddrPort(*gw); err != nil || !o.gateway.Addr().Is4() {
		return fmt.Errorf("-gateway %q: want IPv4 address:port", *gw)
	}
	if o.src, err = netip.ParsePrefix(*src); err != nil || !o.src.Addr().Is4() || o.src.Bits() > 30 {
		return fmt.Errorf("-src %q: want an IPv4 prefix of at most /30", *src)
	}
	o.basePort = uint16(*port)
	if err := o.validate(); err != nil {
		return err
	}
	s, err := newSim(o)
	if err != nil {
		return err
	}
	rep, err := s.run()
	if err != nil {
		return err
	}
	rep.print(os.Stderr)
	return json.NewEncoder(os.Stdout).Encode(rep)
}
