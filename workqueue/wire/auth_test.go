package wire

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

func TestAuthenticate(t *testing.T) {
	cases := []struct {
		name           string
		server, client string
		wantOK         bool
	}{
		{"same password", "s3cret\n", "s3cret\n", true},
		{"different password", "s3cret\n", "other\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tcpPair(t)
			errs := make(chan error, 1)
			go func() { errs <- NewConn(a, Limits{}).AuthenticateServer([]byte(tc.server), nil) }()
			errClient := NewConn(b, Limits{}).AuthenticateClient([]byte(tc.client), nil)
			errServer := <-errs
			if ok := errServer == nil && errClient == nil; ok != tc.wantOK {
				t.Errorf("server: %v, client: %v; want ok=%v", errServer, errClient, tc.wantOK)
			}
			if !tc.wantOK && (!errors.Is(errServer, ErrAuth) || !errors.Is(errClient, ErrAuth)) {
				t.Errorf("server: %v, client: %v; want ErrAuth on both sides", errServer, errClient)
			}
		})
	}
}

func TestAuthenticateAnswerMatchesCCTools(t *testing.T) {
	// From the captured exchange: the worker's answer to the master's challenge.
	const challenge = "d[vNZSorS^O`u^YgvbWumJbf_aWIq[Hf\\rYmhwkHtOwUUZQeWTIS^Jj]pYhgw]x"
	if got := answer([]byte("s3cret\n"), challenge); !strings.HasPrefix(got, "9a71c4fb") {
		t.Errorf("answer = %s, want 9a71c4fb...", got)
	}
}

// rawPeer plays one side of the exchange by hand, as an attacker would.
type rawPeer struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func newRawPeer(t *testing.T, conn net.Conn) *rawPeer {
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawPeer{t: t, conn: conn, r: bufio.NewReader(conn)}
}

func (p *rawPeer) line() string {
	p.t.Helper()
	l, err := p.r.ReadString('\n')
	if err != nil {
		p.t.Fatalf("reading from the side under test: %v (got %q)", err, l)
	}
	return strings.TrimSuffix(l, "\n")
}

func (p *rawPeer) send(lines ...string) {
	p.t.Helper()
	if _, err := io.WriteString(p.conn, strings.Join(lines, "\n")+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

// open reads the announcement and challenge of the side under test.
func (p *rawPeer) open() (challenge string) {
	p.t.Helper()
	if l := p.line(); l != "auth password sha1" {
		p.t.Fatalf("announcement %q", l)
	}
	return p.line()
}

// rest returns everything else the side under test sends before it closes.
func (p *rawPeer) rest() string {
	b, _ := io.ReadAll(p.r)
	return string(b)
}

var answerRE = regexp.MustCompile(`(?m)^[0-9a-f]{40}$`)

// TestServerNeverAnswersFirst: a peer that does not know the password gets
// no answer from the server to study offline, only "failure".
func TestServerNeverAnswersFirst(t *testing.T) {
	a, b := tcpPair(t)
	errs := make(chan error, 1)
	go func() {
		errs <- NewConn(a, Limits{}).AuthenticateServer([]byte("s3cret\n"), nil)
		a.Close()
	}()
	p := newRawPeer(t, b)
	p.open()
	p.send("auth password sha1", strings.Repeat("x", 64), strings.Repeat("0", 40))
	if err := <-errs; !errors.Is(err, ErrAuth) {
		t.Errorf("server: %v, want ErrAuth", err)
	}
	if rest := p.rest(); rest != "failure\nfailure\n" {
		t.Errorf("server sent %q after its challenge, want only failure twice", rest)
	}
}

// TestServerRefusesReflection: a peer that sends one of the server's own
// challenges back, on the same connection or on another, is refused
// without an answer.
func TestServerRefusesReflection(t *testing.T) {
	var issued Challenges
	serve := func(conn net.Conn) <-chan error {
		errs := make(chan error, 1)
		go func() {
			errs <- NewConn(conn, Limits{}).AuthenticateServer([]byte("s3cret\n"), &issued)
			conn.Close()
		}()
		return errs
	}
	check := func(t *testing.T, p *rawPeer, errs <-chan error) {
		t.Helper()
		if err := <-errs; !errors.Is(err, ErrReflected) || !errors.Is(err, ErrAuth) {
			t.Errorf("server: %v, want ErrReflected", err)
		}
		if rest := p.rest(); answerRE.MatchString(rest) {
			t.Errorf("server answered a reflected challenge: %q", rest)
		}
	}
	t.Run("same connection", func(t *testing.T) {
		a, b := tcpPair(t)
		errs := serve(a)
		p := newRawPeer(t, b)
		x := p.open()
		p.send("auth password sha1", x, strings.Repeat("0", 40))
		check(t, p, errs)
	})
	t.Run("second connection", func(t *testing.T) {
		a1, b1 := tcpPair(t)
		errs1 := serve(a1)
		p1 := newRawPeer(t, b1)
		x1 := p1.open()
		a2, b2 := tcpPair(t)
		errs2 := serve(a2)
		p2 := newRawPeer(t, b2)
		x2 := p2.open()
		p2.send("auth password sha1", x1, strings.Repeat("0", 40))
		check(t, p2, errs2)
		p1.send("auth password sha1", x2, strings.Repeat("0", 40))
		check(t, p1, errs1)
	})
	t.Run("earlier connection", func(t *testing.T) {
		a1, b1 := tcpPair(t)
		errs1 := serve(a1)
		p1 := newRawPeer(t, b1)
		x1 := p1.open()
		b1.Close()
		<-errs1
		a2, b2 := tcpPair(t)
		errs2 := serve(a2)
		p2 := newRawPeer(t, b2)
		p2.open()
		p2.send("auth password sha1", x1, strings.Repeat("0", 40))
		check(t, p2, errs2)
	})
}

// TestClientRefusesReflection: a peer that sends the client's challenge
// back as its own, now or in a later exchange, gets no answer.
func TestClientRefusesReflection(t *testing.T) {
	var issued Challenges
	dial := func(t *testing.T) (*rawPeer, <-chan error) {
		a, b := tcpPair(t)
		errs := make(chan error, 1)
		go func() {
			errs <- NewConn(b, Limits{}).AuthenticateClient([]byte("s3cret\n"), &issued)
			b.Close()
		}()
		return newRawPeer(t, a), errs
	}
	check := func(t *testing.T, p *rawPeer, errs <-chan error) {
		t.Helper()
		if err := <-errs; !errors.Is(err, ErrReflected) {
			t.Errorf("client: %v, want ErrReflected", err)
		}
		if rest := p.rest(); rest != "" {
			t.Errorf("client sent %q after a reflected challenge, want nothing", rest)
		}
	}
	t.Run("same connection", func(t *testing.T) {
		p, errs := dial(t)
		y := p.open()
		p.send("auth password sha1", y)
		check(t, p, errs)
	})
	t.Run("later connection", func(t *testing.T) {
		p1, errs1 := dial(t)
		y1 := p1.open()
		p1.conn.Close()
		<-errs1
		p2, errs2 := dial(t)
		p2.open()
		p2.send("auth password sha1", y1)
		check(t, p2, errs2)
	})
}

// TestCCToolsOrder: the exchange as CCTools' link_auth_password runs it on
// either side (everything written before the peer's answer is read) works
// with both of ours.
func TestCCToolsOrder(t *testing.T) {
	pw := []byte("s3cret\n")
	t.Run("CCTools worker, our server", func(t *testing.T) {
		a, b := tcpPair(t)
		errs := make(chan error, 1)
		go func() { errs <- NewConn(a, Limits{}).AuthenticateServer(pw, nil) }()
		p := newRawPeer(t, b)
		y := strings.Repeat("y", 64)
		p.send("auth password sha1", y)
		x := p.open()
		p.send(answer(pw, x))
		if got := p.line(); got != answer(pw, y) {
			t.Fatalf("server's answer %q, want %q", got, answer(pw, y))
		}
		p.send("ok")
		if v := p.line(); v != "ok" {
			t.Errorf("server's verdict %q", v)
		}
		if err := <-errs; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	t.Run("CCTools master, our client", func(t *testing.T) {
		a, b := tcpPair(t)
		errs := make(chan error, 1)
		go func() { errs <- NewConn(a, Limits{}).AuthenticateClient(pw, nil) }()
		p := newRawPeer(t, b)
		x := strings.Repeat("x", 64)
		p.send("auth password sha1", x)
		y := p.open()
		p.send(answer(pw, y))
		if got := p.line(); got != answer(pw, x) {
			t.Fatalf("client's answer %q, want %q", got, answer(pw, x))
		}
		if v := p.line(); v != "ok" {
			t.Errorf("client's verdict %q", v)
		}
		p.send("ok")
		if err := <-errs; err != nil {
			t.Errorf("client: %v", err)
		}
	})
}

func TestAuthenticatePeerWithoutPassword(t *testing.T) {
	a, b := tcpPair(t)
	go func() {
		c := NewConn(b, Limits{})
		c.Send(Hello{Protocol: 9, Host: "h", OS: "Linux", Arch: "x86_64", Version: "1"})
		c.Flush()
		io.Copy(io.Discard, b)
	}()
	err := NewConn(a, Limits{}).AuthenticateServer([]byte("pw"), nil)
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "workqueue 9") {
		t.Errorf("AuthenticateServer = %v; want ErrAuth quoting the peer's hello", err)
	}
}

func TestReadPasswordFile(t *testing.T) {
	cases := []struct {
		name     string
		content  string
		mode     os.FileMode
		wantWarn bool
		wantErr  bool
	}{
		{"owner only", "s3cret\n", 0o600, false, false},
		{"read-only owner", "s3cret\n", 0o400, false, false},
		{"group can read", "s3cret\n", 0o640, true, false},
		{"anyone can read", "s3cret\n", 0o644, true, false},
		{"empty", "", 0o600, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "pw")
			os.WriteFile(name, []byte(tc.content), 0o600)
			os.Chmod(name, tc.mode)
			var warnings []string
			pw, err := ReadPasswordFile(name, func(s string) { warnings = append(warnings, s) })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if err == nil && string(pw) != tc.content {
				t.Errorf("password %q, want the file's bytes %q", pw, tc.content)
			}
			if (len(warnings) > 0) != tc.wantWarn {
				t.Errorf("warnings %q, want one: %v", warnings, tc.wantWarn)
			}
			if tc.wantWarn && !strings.Contains(warnings[0], "chmod 600 "+name) {
				t.Errorf("warning %q does not say how to fix it", warnings[0])
			}
		})
	}
	if _, err := ReadPasswordFile(filepath.Join(t.TempDir(), "none"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestTLS(t *testing.T) {
	cert, key := testutil.SelfSignedCert(t, "master")
	other, _ := testutil.SelfSignedCert(t, "other")
	server, err := ServerTLS(cert, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		ca     string
		wantOK bool
	}{
		{"no CA: any certificate", "", true},
		{"the master's own certificate", cert, true},
		{"another certificate", other, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client, err := ClientTLS(tc.ca)
			if err != nil {
				t.Fatal(err)
			}
			a, b := tcpPair(t)
			errs := make(chan error, 1)
			go func() { errs <- tls.Server(a, server).Handshake(); a.Close() }()
			errClient := tls.Client(b, client).Handshake()
			<-errs
			if (errClient == nil) != tc.wantOK {
				t.Errorf("handshake: %v, want ok=%v", errClient, tc.wantOK)
			}
		})
	}
	if _, err := ClientTLS(key); err == nil {
		t.Error("ClientTLS accepted a file without a certificate")
	}
	if _, err := ServerTLS(other, key, nil); err == nil {
		t.Error("ServerTLS accepted a key that does not match the certificate")
	}
}
