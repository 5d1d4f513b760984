// Command fips-go is a userspace WireGuard implementation: a drop-in for
// wireguard-go under wg(8) and wg-quick(8), plus a built-in wg-style client
// and a rootless self-benchmark.
package main

import (
	"os"

	"github.com/fips-go/fips-go/internal/app/cli"
)

func main() { os.Exit(cli.Main(os.Args)) }
