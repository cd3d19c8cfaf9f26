package wire

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// ErrAuth is returned (wrapped) when password authentication fails.
var ErrAuth = errors.New("password authentication failed")

// ErrReflected is returned (wrapped, with ErrAuth) when the peer's challenge
// is one this side issued: a peer without the password sends our own
// challenge back so that we compute the answer it owes us.
var ErrReflected = errors.New("peer sent back a challenge of ours (a reflection attack)")

// challengeLen is the length of the random challenge line, as CCTools sends.
const challengeLen = 64

// refused is what AuthenticateServer sends in place of its answer when the
// peer's answer was wrong: no answer at all, so that it is never an oracle.
const refused = "failure"

// recentChallenges is how many finished challenges a Challenges remembers.
const recentChallenges = 256

// Challenges is the set of challenges one side has issued: those of
// exchanges under way and the last few hundred finished ones. Neither
// AuthenticateServer nor AuthenticateClient answers a challenge in it, so
// that a peer cannot get an answer by reflecting one of ours, on the same
// connection or on another. A master shares one Challenges across all its
// connections; a worker keeps one for its life. The zero value is ready to
// use; it is safe for concurrent use.
type Challenges struct {
	mu     sync.Mutex
	live   map[string]bool
	recent [recentChallenges]string
	next   int
}

// issue returns a new random challenge, recorded as live.
func (s *Challenges) issue() string {
	ch := challenge()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		s.live = map[string]bool{}
	}
	s.live[ch] = true
	return ch
}

// retire moves ch from the live set to the recent ones.
func (s *Challenges) retire(ch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, ch)
	s.recent[s.next] = ch
	s.next = (s.next + 1) % len(s.recent)
}

// issued reports whether ch is live or recent.
func (s *Challenges) issued(ch []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live[string(ch)] {
		return true
	}
	for _, r := range s.recent {
		if r != "" && r == string(ch) {
			return true
		}
	}
	return false
}

// AuthenticateServer runs the CCTools password exchange as the side that
// accepted the connection (the master), proving itself only after the peer
// has. Both sides announce "auth password sha1" and send a random challenge;
// each answers the other's with sha1_hex(password + " " + challenge) and
// then says "ok" or "failure" about the peer's answer. CCTools answers as
// soon as it reads the peer's challenge; this side reads and checks the
// peer's answer first, and when it is wrong sends "failure" where its own
// answer would be, so that anyone who can connect learns nothing about the
// password. A peer whose challenge is in issued is refused unanswered
// (ErrReflected).
//
// password is the password file's bytes as they are, trailing newline
// included, since that is what CCTools hashes. issued may be nil: then only
// this exchange's own challenge is refused.
func (c *Conn) AuthenticateServer(password []byte, issued *Challenges) error {
	if issued == nil {
		issued = &Challenges{}
	}
	mine, theirs, err := c.openExchange(issued)
	defer issued.retire(mine)
	if err != nil {
		return err
	}
	if issued.issued(theirs) {
		return fmt.Errorf("%w: %w", ErrAuth, ErrReflected)
	}
	got, err := c.ReadLine()
	if err != nil {
		return fmt.Errorf("%w: reading the peer's answer: %w", ErrAuth, err)
	}
	if !correct(password, mine, got) {
		c.writeLines(refused, "failure")
		return fmt.Errorf("%w: the peer's answer was wrong", ErrAuth)
	}
	if err := c.writeLines(answer(password, string(theirs)), "ok"); err != nil {
		return err
	}
	return c.readVerdict()
}

// AuthenticateClient runs the CCTools password exchange as the side that
// connected (a worker): it answers the peer's challenge as soon as it has
// read it, unless the challenge is in issued (ErrReflected), and then
// checks the peer's answer. One side must answer first, and
// AuthenticateServer waits for this answer before giving its own (CCTools
// servers answer at once). See AuthenticateServer for the exchange and the
// arguments.
func (c *Conn) AuthenticateClient(password []byte, issued *Challenges) error {
	if issued == nil {
		issued = &Challenges{}
	}
	mine, theirs, err := c.openExchange(issued)
	defer issued.retire(mine)
	if err != nil {
		return err
	}
	if issued.issued(theirs) {
		return fmt.Errorf("%w: %w", ErrAuth, ErrReflected)
	}
	if err := c.writeLines(answer(password, string(theirs))); err != nil {
		return err
	}
	got, err := c.ReadLine()
	if err != nil {
		return fmt.Errorf("%w: reading the peer's answer: %w", ErrAuth, err)
	}
	if string(got) == refused {
		return fmt.Errorf("%w: the peer refused our answer (a different password?)", ErrAuth)
	}
	if !correct(password, mine, got) {
		c.writeLines("failure")
		return fmt.Errorf("%w: the peer's answer was wrong", ErrAuth)
	}
	if err := c.writeLines("ok"); err != nil {
		return err
	}
	return c.readVerdict()
}

// openExchange announces the method and a new challenge, recorded in
// issued, and reads the peer's announcement and challenge.
func (c *Conn) openExchange(issued *Challenges) (mine string, theirs []byte, err error) {
	mine = issued.issue()
	if err := c.Send(Auth{Method: "sha1"}); err != nil {
		return mine, nil, err
	}
	if err := c.writeLines(mine); err != nil {
		return mine, nil, err
	}
	line, err := c.ReadLine()
	if err != nil {
		return mine, nil, fmt.Errorf("%w: reading the peer's announcement: %w", ErrAuth, err)
	}
	if !bytes.Equal(line, []byte("auth password sha1")) {
		return mine, nil, fmt.Errorf("%w: the peer did not authenticate (sent %.80q)", ErrAuth, line)
	}
	theirs, err = c.ReadLine()
	if err != nil {
		return mine, nil, fmt.Errorf("%w: reading the peer's challenge: %w", ErrAuth, err)
	}
	return mine, bytes.Clone(theirs), nil
}

// readVerdict reads the peer's "ok" or "failure" about our answer.
func (c *Conn) readVerdict() error {
	verdict, err := c.ReadLine()
	switch {
	case err != nil:
		return fmt.Errorf("%w: reading the peer's verdict: %w", ErrAuth, err)
	case !bytes.Equal(verdict, []byte("ok")):
		return fmt.Errorf("%w: the peer refused our answer", ErrAuth)
	}
	return nil
}

// writeLines writes lines and flushes them.
func (c *Conn) writeLines(lines ...string) error {
	for _, l := range lines {
		if err := c.WriteRaw(append([]byte(l), '\n')); err != nil {
			return err
		}
	}
	return c.Flush()
}

func correct(password []byte, challenge string, got []byte) bool {
	return subtle.ConstantTimeCompare(got, []byte(answer(password, challenge))) == 1
}

func answer(password []byte, challenge string) string {
	h := sha1.New()
	h.Write(password)
	h.Write([]byte{' '})
	h.Write([]byte(challenge))
	return hex.EncodeToString(h.Sum(nil))
}

// challenge returns 64 random printable characters without spaces.
func challenge() string {
	var b [challengeLen]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = 'A' + b[i]%58
	}
	return string(b[:])
}

// ReadPasswordFile reads a password file: its bytes as they are, which is
// what both sides hash. Like ssh with a private key, it checks that group
// and others cannot read the file; if they can, warn (when not nil) is
// called with a sentence that says so and how to fix it, and the password
// is still returned.
func ReadPasswordFile(name string, warn func(string)) ([]byte, error) {
	pw, err := readSecret(name, "password file", warn)
	if err != nil {
		return nil, err
	}
	if len(pw) == 0 {
		return nil, fmt.Errorf("password file %s is empty", name)
	}
	return pw, nil
}

// readSecret reads a file that only its owner should read, warning as
// ReadPasswordFile does.
func readSecret(name, what string, warn func(string)) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 && warn != nil {
		warn(fmt.Sprintf("%s %s can be read by others (permissions %04o): anyone who reads it can impersonate your master or your workers; run chmod 600 %s",
			what, name, perm, name))
	}
	return io.ReadAll(f)
}
