package workqueue

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// rawConn is an attacker's connection: lines in and out by hand.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
	got  []string // every line read
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// send writes lines; errors are ignored, since the peer may have hung up.
func (c *rawConn) send(lines ...string) {
	io.WriteString(c.conn, strings.Join(lines, "\n")+"\n")
}

// line reads a line, or returns "" when the peer hung up or said nothing.
func (c *rawConn) line() string {
	l, err := c.r.ReadString('\n')
	if err != nil {
		return ""
	}
	l = strings.TrimSuffix(l, "\n")
	c.got = append(c.got, l)
	return l
}

// open sends the announcement and reads the peer's and its challenge.
func (c *rawConn) open() string {
	c.t.Helper()
	c.send("auth password sha1")
	if l := c.line(); l != "auth password sha1" {
		c.t.Fatalf("peer announced %q", l)
	}
	return c.line()
}

var sha1Hex = regexp.MustCompile(`^[0-9a-f]{40}$`)

// TestMasterRefusesReflection: a worker without the password sends the
// master's own challenge back, on the same connection or on a second one,
// to have the master compute the answer it owes. The master must neither
// answer nor let it in.
func TestMasterRefusesReflection(t *testing.T) {
	for _, form := range []string{"same connection", "second connection"} {
		t.Run(form, func(t *testing.T) {
			m := startMaster(t, Config{Password: []byte("s3cret\n")})
			addr := fmt.Sprintf("127.0.0.1:%d", m.Port())
			a := dialRaw(t, addr)
			x := a.open()
			var stolen string
			switch form {
			case "same connection":
				a.send(x)
				stolen = a.line()
				a.send(stolen)
			case "second connection":
				b := dialRaw(t, addr)
				b.open()
				b.send(x)
				stolen = b.line()
				checkNoAnswer(t, b)
				a.send(strings.Repeat("y", 64), stolen)
			}
			a.line()
			a.line()
			checkNoAnswer(t, a)
			if n := m.Stats().WorkersJoined; n != 0 {
				t.Errorf("%d workers joined", n)
			}
		})
	}
}

// checkNoAnswer fails the test if the master sent c an answer to a
// challenge or accepted c's answer.
func checkNoAnswer(t *testing.T, c *rawConn) {
	t.Helper()
	for _, l := range c.got {
		if sha1Hex.MatchString(l) || l == "ok" {
			t.Errorf("the master sent %q to a peer without the password (all it sent: %q)", l, c.got)
		}
	}
}
