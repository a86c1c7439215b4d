package checkprobe

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/arkadiuss/openfief/internal/check/probewire"
)

// TestParseRequest accepts well-formed requests with their defaults and
// refuses every malformed one, naming the cell.
func TestParseRequest(t *testing.T) {
	r, err := parseRequest(`{"cells":[{"name":"a","kind":"tcp","target":"10.0.0.1:80"},{"name":"b","kind":"dns-udp","target":"[fd00::a]:53","query":"example.com"},{"name":"c","kind":"proxy-token","host":"example.com:443"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if r.timeout != 2*time.Second || len(r.cells) != 3 || r.cells[1].Query != "example.com" {
		t.Errorf("parsed %+v", r)
	}
	if r, err := parseRequest(`{"timeoutMillis":10000,"cells":[{"name":"a","kind":"dns-tcp","target":"kube-dns.kube-system:53"}]}`); err != nil || r.timeout != 10*time.Second {
		t.Errorf("timeout %v, %v", r.timeout, err)
	}

	var many []string
	for i := range probewire.MaxCells + 1 {
		many = append(many, fmt.Sprintf(`{"name":"c%d","kind":"tcp","target":"10.0.0.1:80"}`, i))
	}
	for name, tc := range map[string]struct{ raw, want string }{
		"not JSON":          {`cells`, "not a JSON request"},
		"null":              {`null`, "no cells"},
		"no cells":          {`{"cells":[]}`, "no cells"},
		"too many cells":    {`{"cells":[` + strings.Join(many, ",") + `]}`, "33 cells, more than 32"},
		"unknown field":     {`{"cells":[{"name":"a","kind":"tcp","target":"a:1","port":1}]}`, "unknown field"},
		"trailing data":     {`{"cells":[{"name":"a","kind":"tcp","target":"a:1"}]} {}`, "data after"},
		"negative timeout":  {`{"timeoutMillis":-1,"cells":[{"name":"a","kind":"tcp","target":"a:1"}]}`, "timeoutMillis -1"},
		"long timeout":      {`{"timeoutMillis":10001,"cells":[{"name":"a","kind":"tcp","target":"a:1"}]}`, "timeoutMillis 10001"},
		"no name":           {`{"cells":[{"kind":"tcp","target":"a:1"}]}`, "cells[0]: name"},
		"control in name":   {`{"cells":[{"name":"a\nb","kind":"tcp","target":"a:1"}]}`, "cells[0]: name"},
		"long name":         {`{"cells":[{"name":"` + strings.Repeat("n", 64) + `","kind":"tcp","target":"a:1"}]}`, "cells[0]: name"},
		"same name":         {`{"cells":[{"name":"a","kind":"tcp","target":"a:1"},{"name":"a","kind":"tcp","target":"a:2"}]}`, "cells[1]: the name \"a\" is used twice"},
		"unknown kind":      {`{"cells":[{"name":"a","kind":"udp","target":"a:1"}]}`, `kind "udp"`},
		"no port":           {`{"cells":[{"name":"a","kind":"tcp","target":"a"}]}`, "target: want host:port"},
		"port 0":            {`{"cells":[{"name":"a","kind":"tcp","target":"a:0"}]}`, "port is not"},
		"port +1":           {`{"cells":[{"name":"a","kind":"tcp","target":"a:+1"}]}`, "port is not"},
		"no host":           {`{"cells":[{"name":"a","kind":"tcp","target":":80"}]}`, "not a host"},
		"tcp with host":     {`{"cells":[{"name":"a","kind":"tcp","target":"a:1","host":"b:1"}]}`, "target only"},
		"dns with host":     {`{"cells":[{"name":"a","kind":"dns-udp","target":"a:53","host":"b:1"}]}`, "target and a query only"},
		"bad query":         {`{"cells":[{"name":"a","kind":"dns-udp","target":"a:53","query":"a..b"}]}`, "not a DNS name"},
		"proxy with target": {`{"cells":[{"name":"a","kind":"proxy-token","host":"a:443","target":"b:1"}]}`, "host only"},
		"CRLF in host":      {`{"cells":[{"name":"a","kind":"proxy-token","host":"a:443\r\nX: y"}]}`, "host:"},
		"space in host":     {`{"cells":[{"name":"a","kind":"proxy-no-token","host":"a b:443"}]}`, "not a host"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseRequest(tc.raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// FuzzParseRequest feeds the exec argument's parser anything: it never
// panics, and what it accepts is within the bounds and safe to put into a
// CONNECT request line.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"cells":[{"name":"a","kind":"tcp","target":"10.0.0.1:80"}]}`,
		`{"timeoutMillis":300,"cells":[{"name":"b","kind":"dns-udp","target":"[fd00::a]:53","query":"example.com."}]}`,
		`{"cells":[{"name":"c","kind":"proxy-token","host":"example.com:443"},{"name":"d","kind":"proxy-no-token","host":"example.com:443"}]}`,
		`{"cells":[{"name":"a","kind":"dns-tcp","target":"a:53","query":""}]}`,
		`null`, `[]`, `{"cells":null}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := parseRequest(raw)
		if err != nil {
			return
		}
		if len(r.cells) == 0 || len(r.cells) > probewire.MaxCells || r.timeout <= 0 || r.timeout > probewire.MaxTimeoutMillis*time.Millisecond {
			t.Fatalf("accepted %d cells, timeout %v", len(r.cells), r.timeout)
		}
		for _, c := range r.cells {
			for _, s := range []string{c.Name, c.Target, c.Host, c.Query} {
				if strings.ContainsAny(s, "\r\n\x00") {
					t.Fatalf("accepted %q", s)
				}
			}
			if strings.ContainsAny(c.Host, " /?#@") {
				t.Fatalf("accepted host %q", c.Host)
			}
		}
	})
}

// TestCleanDetail: a detail is printable ASCII and bounded.
func TestCleanDetail(t *testing.T) {
	if got := cleanDetail("dial tcp: \x1b[31mé\n"); got != "dial tcp: ?[31m???" {
		t.Errorf("got %q", got)
	}
	if got := cleanDetail(strings.Repeat("x", 500)); len(got) != probewire.MaxDetailBytes || !strings.HasSuffix(got, "...") {
		t.Errorf("got %d bytes", len(got))
	}
}
