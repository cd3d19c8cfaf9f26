package wire

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
)

// ErrAuth is returned (wrapped) when password authentication fails.
var ErrAuth = errors.New("password authentication failed")

// challengeLen is the length of the random challenge line, as CCTools sends.
const challengeLen = 64

// Authenticate runs the CCTools password exchange, which is the same on both
// sides: each announces "auth password sha1", sends a random challenge,
// answers the peer's challenge with sha1_hex(password + " " + challenge),
// and says "ok" or "failure" about the peer's answer. password is the
// password file's bytes as they are, trailing newline included, since that is
// what CCTools hashes.
//
// If the peer's first line is not "auth ...", Authenticate returns that line
// in *first so that the caller can say what the peer wanted instead.
func (c *Conn) Authenticate(password []byte) (first string, err error) {
	if err := c.Send(Auth{Method: "sha1"}); err != nil {
		return "", err
	}
	if err := c.Flush(); err != nil {
		return "", err
	}
	line, err := c.ReadLine()
	if err != nil {
		return "", fmt.Errorf("%w: reading peer's announcement: %v", ErrAuth, err)
	}
	if !bytes.Equal(line, []byte("auth password sha1")) {
		return string(line), fmt.Errorf("%w: peer did not authenticate (sent %.80q)", ErrAuth, line)
	}
	mine := challenge()
	if err := c.WriteRaw(append([]byte(mine), '\n')); err != nil {
		return "", err
	}
	if err := c.Flush(); err != nil {
		return "", err
	}
	theirs, err := c.ReadLine()
	if err != nil {
		return "", fmt.Errorf("%w: reading challenge: %v", ErrAuth, err)
	}
	if err := c.WriteRaw(append([]byte(answer(password, string(theirs))), '\n')); err != nil {
		return "", err
	}
	if err := c.Flush(); err != nil {
		return "", err
	}
	got, err := c.ReadLine()
	if err != nil {
		return "", fmt.Errorf("%w: reading answer: %v", ErrAuth, err)
	}
	ok := subtle.ConstantTimeCompare(got, []byte(answer(password, mine))) == 1
	verdict := "failure\n"
	if ok {
		verdict = "ok\n"
	}
	if err := c.WriteRaw([]byte(verdict)); err != nil {
		return "", err
	}
	if err := c.Flush(); err != nil {
		return "", err
	}
	peer, err := c.ReadLine()
	if err != nil {
		return "", fmt.Errorf("%w: reading verdict: %v", ErrAuth, err)
	}
	switch {
	case !ok:
		return "", fmt.Errorf("%w: peer's answer was wrong", ErrAuth)
	case !bytes.Equal(peer, []byte("ok")):
		return "", fmt.Errorf("%w: peer rejected our answer", ErrAuth)
	}
	return "", nil
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
