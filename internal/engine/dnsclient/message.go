package dnsclient

import (
	"errors"
	"net/netip"

	"golang.org/x/net/dns/dnsmessage"
)

// ednsSize is the UDP payload size a query advertises (EDNS(0)): the
// DNS flag day 2020 value, small enough to avoid IP fragmentation inside
// a tunnel. Larger answers come truncated and are asked again over TCP.
const ednsSize = 1232

// udpBufSize is the largest UDP answer read. It exceeds ednsSize so a
// server that ignores the advertised size is still read whole when it
// stays under a common MTU; anything cut short fails to parse.
const udpBufSize = 1500

var (
	// errNotOurs: a datagram that is not a response to the query asked
	// (another ID or question): a stray or forged packet, to ignore.
	errNotOurs = errors.New("not an answer to the query")
	// errMalformed: a response to the query that does not parse.
	errMalformed = errors.New("cannot unmarshal DNS message")
)

// answer is what a response says about the query.
type answer struct {
	rcode     dnsmessage.RCode
	truncated bool
	addrs     []netip.Addr // of the question's type, for its name or an alias of it
}

// newQuery is a recursive query with id for q, advertising ednsSize.
func newQuery(id uint16, q dnsmessage.Question) ([]byte, error) {
	b := dnsmessage.NewBuilder(make([]byte, 0, 64), dnsmessage.Header{ID: id, RecursionDesired: true})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAdditionals(); err != nil {
		return nil, err
	}
	var opt dnsmessage.ResourceHeader
	if err := opt.SetEDNS0(ednsSize, dnsmessage.RCodeSuccess, false); err != nil {
		return nil, err
	}
	if err := b.OPTResource(opt, dnsmessage.OPTResource{}); err != nil {
		return nil, err
	}
	return b.Finish()
}

// parseAnswer reads msg as the response to the query id for q. A message
// that is not a response, or whose ID or question differ, is errNotOurs;
// a response to the query whose answer section does not parse is
// errMalformed. A truncated response or one with an error code carries
// no addresses. Only the answer section is read: records elsewhere are
// never trusted as addresses.
func parseAnswer(msg []byte, id uint16, q dnsmessage.Question) (answer, error) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || !h.Response || h.ID != id {
		return answer{}, errNotOurs
	}
	got, err := p.Question()
	if err != nil || got.Type != q.Type || got.Class != q.Class || !sameName(got.Name, q.Name) {
		return answer{}, errNotOurs
	}
	if _, err := p.Question(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return answer{}, errNotOurs
	}
	ans := answer{rcode: h.RCode, truncated: h.Truncated}
	if h.Truncated || h.RCode != dnsmessage.RCodeSuccess {
		return ans, nil
	}
	recs, err := answerRecords(&p, q.Type)
	if err != nil {
		return answer{}, err
	}
	ans.addrs = recs.addrsFor(q.Name)
	return ans, nil
}

// record is an address or an alias (CNAME) record of the answer section.
type record struct {
	name     dnsmessage.Name
	hasAlias bool
	alias    dnsmessage.Name // the CNAME's target, when hasAlias
	addr     netip.Addr      // when not hasAlias
}

type records []record

// maxRecords caps the answer records kept (a 64 KiB TCP answer could hold
// thousands); the rest are ignored. maxChain caps the CNAME chain
// followed.
const (
	maxRecords = 256
	maxChain   = 16
)

// answerRecords reads the answer section's records of type qtype (A or
// AAAA) and CNAME, of class INET; others are skipped.
func answerRecords(p *dnsmessage.Parser, qtype dnsmessage.Type) (records, error) {
	var recs records
	for {
		h, err := p.AnswerHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) || len(recs) == maxRecords {
			return recs, nil
		}
		if err != nil {
			return nil, errMalformed
		}
		switch {
		case h.Class != dnsmessage.ClassINET || (h.Type != qtype && h.Type != dnsmessage.TypeCNAME):
			err = p.SkipAnswer()
		case h.Type == dnsmessage.TypeA:
			var r dnsmessage.AResource
			r, err = p.AResource()
			recs = append(recs, record{name: h.Name, addr: netip.AddrFrom4(r.A)})
		case h.Type == dnsmessage.TypeAAAA:
			var r dnsmessage.AAAAResource
			r, err = p.AAAAResource()
			recs = append(recs, record{name: h.Name, addr: netip.AddrFrom16(r.AAAA)})
		default:
			var r dnsmessage.CNAMEResource
			r, err = p.CNAMEResource()
			recs = append(recs, record{name: h.Name, alias: r.CNAME, hasAlias: true})
		}
		if err != nil {
			return nil, errMalformed
		}
	}
}

// addrsFor is the addresses of name and of the aliases its CNAME chain
// in recs leads to; a chain ends where it would repeat a name, or after
// maxChain aliases, which keeps a hostile answer's cost linear.
func (recs records) addrsFor(name dnsmessage.Name) []netip.Addr {
	chain := []dnsmessage.Name{name}
	for len(chain) <= maxChain {
		next, ok := recs.aliasOf(chain[len(chain)-1])
		if !ok || inChain(chain, next) {
			break
		}
		chain = append(chain, next)
	}
	var out []netip.Addr
	for _, r := range recs {
		if !r.hasAlias && inChain(chain, r.name) {
			out = append(out, r.addr)
		}
	}
	return out
}

func (recs records) aliasOf(name dnsmessage.Name) (dnsmessage.Name, bool) {
	for _, r := range recs {
		if r.hasAlias && sameName(r.name, name) {
			return r.alias, true
		}
	}
	return dnsmessage.Name{}, false
}

func inChain(chain []dnsmessage.Name, n dnsmessage.Name) bool {
	for _, c := range chain {
		if sameName(c, n) {
			return true
		}
	}
	return false
}

// sameName compares names as DNS does, ignoring ASCII case only (not
// Unicode's folding, under which distinct invalid bytes compare equal).
func sameName(a, b dnsmessage.Name) bool {
	if a.Length != b.Length {
		return false
	}
	for i := range int(a.Length) {
		if lower(a.Data[i]) != lower(b.Data[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
