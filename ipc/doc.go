// Package ipc speaks the WireGuard cross-platform UAPI: the text protocol on
// /var/run/wireguard/IFACE.sock that wg(8) and wg-quick(8) use, the socket
// server that answers it for a device, the client that fips-go show/set use,
// and wg's configuration-file and command-line formats.
//
// The pieces:
//   - ParseSet / WriteSet and WriteGet / WriteCounters: the request and
//     reply text (uapi_set.go, uapi_get.go).
//   - Listen, FileListener and (*Listener).Serve: the socket and the
//     server, which hands each parsed request to a Handler in one piece.
//   - Dial and Client: the client side.
//   - ParseConfigFile, ParseAddConfigFile, ParseQuickConfigFile,
//     SyncConfig, StripQuickConfig, FormatConfig, ParseSetArgs: wg(8)'s and
//     wg-quick(8)'s formats.
//
// Nothing here keeps package-level state; limits and loggers are options.
package ipc
