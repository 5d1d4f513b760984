package main

import (
	"github.com/urfave/cli/v3"
)

// version is the fips-go release; set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func newApp() *cli.Command {
	return &cli.Command{
		Name:     "fips-go",
		Usage:    "a fast userspace WireGuard, drop-in for wireguard-go",
		Version:  version,
		Commands: keyCommands(),
	}
}
