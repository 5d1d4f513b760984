// Command fips-go is a userspace WireGuard implementation: a drop-in for
// wireguard-go under wg(8) and wg-quick(8), plus a built-in wg-style client
// and a rootless self-benchmark.
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	if err := newApp().Run(context.Background(), os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "fips-go:", err)
		os.Exit(1)
	}
}
