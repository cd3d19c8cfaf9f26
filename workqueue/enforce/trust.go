package enforce

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/rightsize/rightsize/workqueue/catalog"
)

// The fields of a pool's record that make its decision one the masters
// and workers can trust (see the package documentation).
const (
	// FieldDecided is when the pool took the decision, in Unix
	// milliseconds: of two signed decisions of a pool, the later wins.
	FieldDecided = "decided_ms"
	// FieldSignature is the decision's HMAC-SHA256, in hex, under a key
	// derived from the masters' password.
	FieldSignature = "signature"
)

// MaxDecisionLag is how long after a signed decision was taken the
// catalog may hear it (its lastheardfrom): a pool sends each decision as
// it takes it, so a record heard later is a replay — or the pool's clock
// is that far behind the catalog's. A decision dated as far ahead of the
// catalog's clock is not read either: the pool's clock is wrong, and a
// master that followed it would then take none of the pool's decisions
// for older until its own time came.
const MaxDecisionLag = 5 * time.Minute

// Limits on what a pool's record may say, beyond which it is not read:
// no pool of this world gives a master more workers, or decides about
// more masters, and an answer past them comes from a liar.
const (
	MaxAssignedWorkers = 1 << 20
	MaxAssignments     = 10000
	MaxWorkerCores     = 1 << 16
)

// signKey derives the key that signs pools' decisions from the masters'
// password, so that the password itself is never used as a MAC key of
// something else than the CCTools challenge.
func signKey(password []byte) []byte {
	h := sha256.New()
	h.Write([]byte("rightsize pool decision\x00"))
	h.Write(password)
	return h.Sum(nil)
}

// signed is what a signature covers: the pool, when it decided, and the
// assignments as their JSON encoding writes them, which is the same for
// the signer and for a reader that decoded them.
type signed struct {
	Pool        string       `json:"pool"`
	Decided     int64        `json:"decided_ms"`
	Assignments []Assignment `json:"assignments"`
}

func mac(key []byte, pool string, decided int64, as []Assignment) []byte {
	b, err := json.Marshal(signed{Pool: pool, Decided: decided, Assignments: as})
	if err != nil {
		panic(err) // strings and integers always encode
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(nil)
}

// Sign adds to a pool's record rec (type PoolType, its name and
// assignments set) the time of its decision, at, and its signature under
// password, the masters' password file's content. Without a password it
// only adds the time: a master without one cannot check a signature.
func Sign(rec catalog.Record, as []Assignment, password []byte, at time.Time) {
	ms := at.UnixMilli()
	rec["assignments"] = as
	rec[FieldDecided] = ms
	if len(password) == 0 {
		return
	}
	rec[FieldSignature] = hex.EncodeToString(mac(signKey(password), rec.String("name"), ms, as))
}

// verify reports whether d, read from rec, carries a good signature under
// key, and was heard by the catalog within MaxDecisionLag of its taking.
func verify(key []byte, rec catalog.Record, d Decision) bool {
	if heard := rec.Float("lastheardfrom"); heard > 0 {
		if lag := int64(heard*1000) - d.Decided; lag > MaxDecisionLag.Milliseconds() || lag < -MaxDecisionLag.Milliseconds() {
			return false
		}
	}
	sig, err := hex.DecodeString(rec.String(FieldSignature))
	if err != nil || len(sig) != sha256.Size {
		return false
	}
	return hmac.Equal(sig, mac(key, d.Pool, d.Decided, d.Assignments))
}

// resolve makes one decision of the records ds that claim a pool. With a
// password, Decisions has kept only those signed and decided last (a
// forged record, or one replayed from before, loses to the pool's own),
// and most often there is one. Otherwise nothing tells the pool's record
// from a forgery, so a master is given the most workers any record gives
// it: a forged record can then make no master release a worker that the
// pool's own record keeps.
func resolve(ds []Decision) Decision {
	if len(ds) == 1 {
		return ds[0]
	}
	most := map[masterKey]int{}
	order := []masterKey{}
	out := Decision{Pool: ds[0].Pool}
	for _, d := range ds {
		out.Decided = max(out.Decided, d.Decided)
		for _, a := range d.Assignments {
			k := masterKey{a.Project, a.Name, a.Port, a.Address}
			if n, ok := most[k]; !ok || a.Workers > n {
				if !ok {
					order = append(order, k)
				}
				most[k] = a.Workers
			}
		}
	}
	for _, k := range order {
		out.Assignments = append(out.Assignments, Assignment{Project: k.project, Name: k.name, Port: k.port,
			Address: k.address, Workers: most[k]})
	}
	return out
}

// masterKey is a master as an assignment names it.
type masterKey struct {
	project, name string
	port          int
	address       string
}

// A Reader reads the pools' decisions as a master follows them: as
// Decisions does, and besides, once it has honoured a signed decision of
// a pool, it never honours one decided earlier, which a replay of the
// pool's old record would be: while the catalog holds only such a record
// of the pool, the Reader keeps the decision it honoured last, so that
// the replay changes nothing.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	password []byte
	last     map[string]Decision // pool → the signed decision honoured last
}

// NewReader returns a Reader that checks the pools' signatures under
// password, the masters' password file's content (nil: none).
func NewReader(password []byte) *Reader {
	return &Reader{password: password, last: map[string]Decision{}}
}

// Read returns the decisions of the pools in recs, a catalog's answer.
func (r *Reader) Read(recs []catalog.Record) []Decision {
	ds := Decisions(recs, r.password)
	if len(r.password) == 0 {
		return ds
	}
	for i, d := range ds {
		if last, ok := r.last[d.Pool]; ok && d.Decided < last.Decided {
			ds[i] = last
			continue
		}
		r.last[d.Pool] = d
	}
	return ds
}
