package dnsclient

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

var qWeb = dnsmessage.Question{Name: dnsmessage.MustNewName("web.internal."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}

// The query is a recursive one with the question and an EDNS(0) record.
func TestNewQuery(t *testing.T) {
	msg, err := newQuery(0xbeef, qWeb)
	if err != nil {
		t.Fatal(err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(msg); err != nil {
		t.Fatal(err)
	}
	if m.ID != 0xbeef || m.Response || !m.RecursionDesired || len(m.Questions) != 1 || m.Questions[0] != qWeb {
		t.Fatalf("query %+v", m)
	}
	if len(m.Additionals) != 1 || m.Additionals[0].Header.Type != dnsmessage.TypeOPT || m.Additionals[0].Header.Class != ednsSize {
		t.Fatalf("additionals %+v", m.Additionals)
	}
}

// answerMsg builds a response to qWeb (ID 1) with the given answers and
// additionals.
func answerMsg(t testing.TB, answers, additionals []dnsmessage.Resource) []byte {
	t.Helper()
	m := dnsmessage.Message{
		Header:      dnsmessage.Header{ID: 1, Response: true},
		Questions:   []dnsmessage.Question{qWeb},
		Answers:     answers,
		Additionals: additionals,
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rr(name string, body dnsmessage.ResourceBody) dnsmessage.Resource {
	return dnsmessage.Resource{Header: dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name), Class: dnsmessage.ClassINET, TTL: 60}, Body: body}
}

func a4(s string) *dnsmessage.AResource {
	return &dnsmessage.AResource{A: netip.MustParseAddr(s).As4()}
}

// Addresses of the name and of its aliases count, in any order and case;
// records of other names, of other types, and outside the answer
// section do not; a CNAME loop ends.
func TestParseAnswerCNAME(t *testing.T) {
	msg := answerMsg(t, []dnsmessage.Resource{
		rr("cdn.example.", a4("192.0.2.2")),
		rr("WEB.internal.", &dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName("edge.example.")}),
		rr("unrelated.example.", a4("6.6.6.6")),
		rr("edge.example.", &dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName("cdn.example.")}),
		rr("cdn.example.", &dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName("web.internal.")}),
		rr("web.internal.", &dnsmessage.AAAAResource{AAAA: netip.MustParseAddr("fd00::1").As16()}),
		rr("web.internal.", &dnsmessage.TXTResource{TXT: []string{"hi"}}),
		rr("web.internal.", a4("192.0.2.1")),
	}, []dnsmessage.Resource{rr("web.internal.", a4("6.6.6.7"))})
	ans, err := parseAnswer(msg, 1, qWeb)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.1")}
	if !slices.Equal(ans.addrs, want) || ans.rcode != dnsmessage.RCodeSuccess || ans.truncated {
		t.Fatalf("got %+v, want %v", ans, want)
	}
}

// What is not the answer to the query is errNotOurs; the answer to it
// cut short is errMalformed.
func TestParseAnswerRejects(t *testing.T) {
	good := answerMsg(t, []dnsmessage.Resource{rr("web.internal.", a4("192.0.2.1"))}, nil)
	if ans, err := parseAnswer(good, 1, qWeb); err != nil || len(ans.addrs) != 1 {
		t.Fatalf("good: %+v, %v", ans, err)
	}
	otherType := qWeb
	otherType.Type = dnsmessage.TypeAAAA
	otherName := qWeb
	otherName.Name = dnsmessage.MustNewName("web.internak.")
	twoQuestions := dnsmessage.Message{Header: dnsmessage.Header{ID: 1, Response: true}, Questions: []dnsmessage.Question{qWeb, qWeb}}
	two, _ := twoQuestions.Pack()
	noQuestion := dnsmessage.Message{Header: dnsmessage.Header{ID: 1, Response: true, RCode: dnsmessage.RCodeRefused}}
	none, _ := noQuestion.Pack()
	query, _ := newQuery(1, qWeb)
	for name, c := range map[string]struct {
		msg []byte
		id  uint16
		q   dnsmessage.Question
	}{
		"other ID":      {good, 2, qWeb},
		"other type":    {good, 1, otherType},
		"other name":    {good, 1, otherName},
		"a query":       {query, 1, qWeb},
		"two questions": {two, 1, qWeb},
		"no question":   {none, 1, qWeb},
		"empty":         {nil, 1, qWeb},
		"header only":   {good[:12], 1, qWeb},
	} {
		if _, err := parseAnswer(c.msg, c.id, c.q); !errors.Is(err, errNotOurs) {
			t.Errorf("%s: %v, want errNotOurs", name, err)
		}
	}
	for n := len(good) - 1; n > len(good)-16; n-- {
		if _, err := parseAnswer(good[:n], 1, qWeb); !errors.Is(err, errMalformed) {
			t.Errorf("cut to %d bytes: %v, want errMalformed", n, err)
		}
	}
}

// ASCII case does not matter in names; other bytes are compared as they
// are (Unicode folding would call distinct invalid bytes equal).
func TestParseAnswerCase(t *testing.T) {
	msg := answerMsg(t, []dnsmessage.Resource{rr("web.internal.", a4("192.0.2.1"))}, nil)
	q := qWeb
	q.Name = dnsmessage.MustNewName("Web.INTERNAL.")
	if ans, err := parseAnswer(msg, 1, q); err != nil || len(ans.addrs) != 1 {
		t.Fatalf("%+v, %v", ans, err)
	}
	if sameName(dnsmessage.MustNewName("web\xff."), dnsmessage.MustNewName("web\xfe.")) {
		t.Fatal("distinct bytes compared equal")
	}
}

// The parser never panics, and what it returns is of the question's
// type and within its caps.
func FuzzParseAnswer(f *testing.F) {
	f.Add(answerMsg(f, []dnsmessage.Resource{rr("web.internal.", a4("192.0.2.1"))}, nil))
	f.Add(answerMsg(f, []dnsmessage.Resource{
		rr("web.internal.", &dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName("cdn.example.")}),
		rr("cdn.example.", a4("192.0.2.2")),
		rr("web.internal.", &dnsmessage.AAAAResource{AAAA: netip.MustParseAddr("fd00::1").As16()}),
	}, []dnsmessage.Resource{rr("web.internal.", a4("6.6.6.7"))}))
	q, _ := newQuery(1, qWeb)
	f.Add(q)
	f.Add(reply(1, qWeb, dnsmessage.RCodeNameError, false))
	f.Add(reply(1, qWeb, dnsmessage.RCodeSuccess, true))
	f.Fuzz(func(t *testing.T, msg []byte) {
		ans, err := parseAnswer(msg, 1, qWeb)
		if err != nil {
			if ans.addrs != nil || (!errors.Is(err, errNotOurs) && !errors.Is(err, errMalformed)) {
				t.Fatalf("error %v with %+v", err, ans)
			}
			return
		}
		if len(ans.addrs) > maxRecords || (len(ans.addrs) > 0 && (ans.truncated || ans.rcode != dnsmessage.RCodeSuccess)) {
			t.Fatalf("answer %+v", ans)
		}
		for _, a := range ans.addrs {
			if !a.Is4() {
				t.Fatalf("%v in an answer to an A query", a)
			}
		}
	})
}
