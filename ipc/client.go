package ipc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fips-go/fips-go/device"
	"github.com/fips-go/fips-go/device/noise"
)

// MaxReply bounds a reply the client will read: a get=1 for 10,000 peers is
// about 4 MB, so this is generous while still finite.
const MaxReply = 256 << 20

// errBroken marks a connection left out of step by an earlier failure.
var errBroken = errors.New("ipc: connection unusable after an earlier error")

// Client talks UAPI to one interface over one connection; requests are
// serialized, so a Client may be shared between goroutines.
type Client struct {
	mu     sync.Mutex // guards everything below and orders requests
	conn   net.Conn
	br     *bufio.Reader
	broken bool
}

// Dial connects to dir/IFACE.sock (dir defaults to DefaultSocketDir).
func Dial(dir, iface string) (*Client, error) {
	path, err := SocketPath(dir, iface)
	if err != nil {
		return nil, err
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, fmt.Errorf("ipc: connecting to %s: %w", iface, err)
	}
	return NewClient(c), nil
}

// NewClient speaks UAPI over an existing connection, such as one end of a
// net.Pipe in a test. The Client owns c.
func NewClient(c net.Conn) *Client {
	return &Client{conn: c, br: bufio.NewReaderSize(c, 64<<10)}
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// SetDeadline bounds the requests to come (see net.Conn.SetDeadline); a
// request that misses it fails and leaves the Client unusable.
func (c *Client) SetDeadline(t time.Time) error { return c.conn.SetDeadline(t) }

// Get returns the device's status (get=1). PublicKey is derived from the
// private key, as wg(8) does, since the protocol does not carry it.
func (c *Client) Get() (device.Status, error) {
	var g getParser
	if err := c.roundTrip([]byte("get=1\n\n"), g.kv); err != nil {
		return device.Status{}, err
	}
	return g.finish(), nil
}

// Counters returns fips-go's device counters (get=fips).
func (c *Client) Counters() ([]device.Counter, error) {
	var p counterParser
	if err := c.roundTrip([]byte("get=fips\n\n"), p.kv); err != nil {
		return nil, err
	}
	return p.counters, nil
}

// AddFips fills in what only fips-go reports (get=fips) in st, a status
// Get returned: st.Counters and its peers' PathMTU, PathMTUSource and
// PathProbesOn.
// Against wireguard-go it fails and leaves st as it was.
func (c *Client) AddFips(st *device.Status) error {
	p := counterParser{peers: make(map[noise.PublicKey]*device.PeerStatus, len(st.Peers))}
	for i := range st.Peers {
		p.peers[st.Peers[i].PublicKey] = &st.Peers[i]
	}
	saved := make([]device.PeerStatus, len(st.Peers))
	copy(saved, st.Peers)
	if err := c.roundTrip([]byte("get=fips\n\n"), p.kv); err != nil {
		copy(st.Peers, saved)
		return err
	}
	st.Counters = p.counters
	return nil
}

// Set sends cfg as a set=1 request. A refusal comes back as an *Error
// carrying the device's errno.
func (c *Client) Set(cfg *device.Config) error {
	var req bytes.Buffer
	req.WriteString("set=1\n")
	if err := WriteSet(&req, cfg); err != nil {
		return err
	}
	return c.roundTrip(req.Bytes(), func(k, v []byte) error { return nil })
}

func (c *Client) roundTrip(req []byte, kv func(k, v []byte) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return errBroken
	}
	if _, err := c.conn.Write(req); err != nil {
		c.broken = true
		return fmt.Errorf("ipc: sending request: %w", err)
	}
	err := readReply(newLineReader(c.br, MaxReply), kv)
	var ie *Error
	if err != nil && (!errors.As(err, &ie) || ie.Errno == ErrnoProtocol) {
		// Either the transport failed or the reply made no sense; in both
		// cases the next reply cannot be trusted to start where we think.
		c.broken = true
	}
	return err
}

// Interfaces lists the interfaces with a UAPI socket in dir (default
// DefaultSocketDir) in directory order, which is the order wg(8) lists
// them in (so `show all` prints them as `wg show all` does); a missing
// directory means none.
func Interfaces(dir string) ([]string, error) {
	if dir == "" {
		dir = DefaultSocketDir
	}
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ipc: %w", err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("ipc: %w", err)
	}
	var names []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".sock")
		if !ok || e.Type() != fs.ModeSocket || checkIfaceName(name) != nil {
			continue
		}
		names = append(names, name)
	}
	return names, nil
}
