package exit

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
)

// BenchmarkExitFlows relays b.N bytes in total from a host sender on
// loopback to a client stack, through the exit, over 1 or 100 TCP flows
// (one op is one byte, so MB/s is the throughput):
//
//	go test -run '^$' -bench ExitFlows -benchtime 2000000000x ./internal/app/exit/
func BenchmarkExitFlows(b *testing.B) {
	for _, flows := range []int{1, 100} {
		b.Run(fmt.Sprint(flows), func(b *testing.B) { benchFlows(b, flows) })
	}
}

func benchFlows(b *testing.B, flows int) {
	per := int64(max(b.N/flows, 1))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		buf := make([]byte, 256<<10)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				left := per
				for left > 0 {
					n, err := c.Write(buf[:min(int64(len(buf)), left)])
					if err != nil {
						return
					}
					left -= int64(n)
				}
			}()
		}
	}()
	client, _ := setup(b, netip.AddrPort{})
	dst := ln.Addr().(*net.TCPAddr).AddrPort()
	b.SetBytes(1)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range flows {
		wg.Go(func() {
			c, err := client.DialTCPAddrPort(context.Background(), dst)
			if err != nil {
				b.Error(err)
				return
			}
			defer c.Close()
			if n, err := io.Copy(io.Discard, c); n != per {
				b.Errorf("got %d of %d: %v", n, per, err)
			}
		})
	}
	wg.Wait()
}
